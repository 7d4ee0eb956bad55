"""`steward audit verify`: recompute every hash and link of the stored log, check it against the signed
checkpoints, against the ledger's own witness of how far the log went (the outbox), and against the dedup
table's claims about it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from sqlalchemy import func, select

from steward.audit.checkpoints import checkpoint_rows
from steward.store import schema
from steward.store.eventstore import EventStore
from steward.store.verifier import (
    GENESIS,
    ChainReport,
    Problem,
    check_chain,
    check_checkpoints,
    leaves_of,
    roots_at,
)


def witnesses(store: EventStore) -> dict[str, int]:
    """Positions other tables say the log reached: the outbox relay's (it publishes committed events only)
    and the furthest one the dedup table names (written with the events it names). Read before the head
    that the chain check reads: the log only grows, so a live log's head is then at least as far as each
    witness, and a witness past it means events went missing, not that the ledger wrote meanwhile."""
    pm = schema.processed_messages
    with store.engine.connect() as conn:
        relay = conn.execute(select(func.max(schema.relay_positions.c.position))).scalar() or 0
        reached = conn.execute(select(func.max(pm.c.position))).scalar() or 0
        conn.rollback()
    return {"outbox relay": int(relay), "processed messages": int(reached)}


def _dedup_problems(store: EventStore) -> list[Problem]:
    """Where the dedup table disagrees with the log (ADR 0026). A row (message, none) says the message was
    processed and recorded no event, so an event with its id means it was recorded twice (few rows: the
    messages that recorded nothing; one index probe each; the first `PROBLEMS_READ` are read). Rows with a
    position were written before ADR 0026, one per message: as before, only the furthest position they name
    is a witness of how far the log went (`truncated` past its end; see `witnesses`). Checking each such row against its
    message's first event costs a pass over them (~1.2 s per million rows by position, ~3.5 s by message id,
    against ~1.5 s for verifying a million events), and the rows are not covered by the chain anyway."""
    pm, ev = schema.processed_messages, schema.events
    first = func.min(ev.c.position)
    twice = (select(pm.c.message_id, first.label("first"))
             .select_from(pm.join(ev, ev.c.message_id == pm.c.message_id))
             .where(pm.c.position.is_(None)).group_by(pm.c.message_id).order_by(first).limit(PROBLEMS_READ))
    with store.engine.connect() as conn:
        none_rows = conn.execute(twice).all()
        conn.rollback()
    return [Problem(cast(int, found), "recorded-twice", f"message {message!r} is recorded as having no event, "
                    f"and has events from position {found}") for message, found in none_rows]


PROBLEMS_READ = 20  # rows of messages recorded twice read at most


# The chain check in PostgreSQL itself (C sha256 next to the data): every hash recomputed from the stored
# canonical texts exactly as `event_body_text` builds the body. It is a plain aggregate, so PostgreSQL runs
# it with parallel workers; the links (each prev_hash equals the hash before it) are a second, narrow pass,
# and gaps show as a count short of the span (positions are a primary key). Only the first suspicious
# positions come back; the precise classification is then done by the Python check.
# Text becomes bytes by `textsend` under `client_encoding` UTF8 (the session settings below), which is
# `convert_to(text, 'UTF8')` without looking the encoding up by name and re-validating the stored text.
_SQL_HASHES = """
SELECT count(*), min(position), max(position),
       min(position) FILTER (WHERE hash <> encode(sha256(textsend(
           prev_hash || '{"message_id":' || coalesce(to_json(message_id)::text, 'null')
           || ',"metadata":' || metadata::text
           || ',"payload_sha256":"' || CASE WHEN payload::text LIKE '{"$redacted_sha256":%%'
                THEN payload->>'$redacted_sha256'
                ELSE encode(sha256(textsend(payload::text)), 'hex') END
           || '","position":' || position
           || ',"recorded_at":"' || CASE WHEN recorded_at = trunc(recorded_at) AND abs(recorded_at) < 1e16
                THEN trunc(recorded_at)::bigint::text || '.0' ELSE recorded_at::text END
           || '","schema_version":' || schema_version || ',"stream_id":' || to_json(stream_id)::text
           || ',"type":' || to_json(type)::text || ',"version":' || version || '}')), 'hex'))
FROM events WHERE position >= %(start)s AND position <= %(to)s
"""
_SQL_LINKS = """
SELECT min(position) FILTER (WHERE prev_hash <> before_hash)
FROM (SELECT position, prev_hash, lag(hash) OVER (ORDER BY position) AS before_hash
      FROM events WHERE position >= %(start)s AND position <= %(to)s) e
"""
# The same pass when the checkpoints are checked too: it also hands back every hash, as raw digests end to
# end in position order, for the Merkle leaves (32 bytes a row in one value instead of a 64-character row).
_SQL_LINKS_AND_HASHES = """
SELECT min(position) FILTER (WHERE prev_hash <> before_hash),
       string_agg(decode(hash, 'hex'), ''::bytea ORDER BY position)
FROM (SELECT position, prev_hash, hash, lag(hash) OVER (ORDER BY position) AS before_hash
      FROM events WHERE position >= %(start)s AND position <= %(to)s) e
"""
# Per transaction only (ADR 0018): no JIT (compiling the expression in every process costs more than it
# saves on one pass), and up to 4 workers for the aggregate (PostgreSQL plans 4 for a log of about 1M
# events and fewer for smaller ones).
_SESSION = ("SET LOCAL client_encoding = 'UTF8'", "SET LOCAL jit = off",
            "SET LOCAL max_parallel_workers_per_gather = 4")


def _sql_chain_ok(store: EventStore, start: int, to: int | None, tree_sizes: list[int] | None = None
                  ) -> tuple[int, int, list[int], int | None, tuple[list[bytes], dict[int, bytes]] | None]:
    """(events, head, first suspicious positions, first position, hashed) of [start, to], checked by
    PostgreSQL; with `tree_sizes` (start 1), `hashed` is the Merkle leaves and the roots of the log's
    prefixes of those sizes, computed here while the server is still hashing."""
    # Both passes cover [start, to] with `to` at most the committed head, so the two connections see the
    # same rows (events are immutable and positions commit in order) and the passes can run at once.
    params = {"start": start, "to": min(to, store.head()) if to is not None else store.head()}

    def one(sql: str) -> Any:
        with store.engine.connect() as conn:
            cursor = conn.connection.driver_connection.cursor(binary=True)  # type: ignore[union-attr]
            for setting in _SESSION:
                cursor.execute(setting)
            cursor.execute(sql, params)
            row = cursor.fetchone()
            cursor.close()
            conn.rollback()
        return row

    def links() -> tuple[int | None, tuple[list[bytes], dict[int, bytes]] | None]:
        if tree_sizes is None:
            return one(_SQL_LINKS)[0], None
        bad_link, hashes = one(_SQL_LINKS_AND_HASHES)
        leaves = leaves_of(bytes(hashes or b""))
        return bad_link, (leaves, roots_at(leaves, [n for n in tree_sizes if 0 <= n <= len(leaves)]))

    with ThreadPoolExecutor(max_workers=1) as pool:
        linked = pool.submit(links)
        count, first, head, bad_hash = one(_SQL_HASHES)
        bad_link, hashed = linked.result()
    bad = sorted(p for p in (bad_hash, bad_link) if p is not None)
    if count and count != head - first + 1:  # a gap somewhere
        bad.append(first)
    return int(count or 0), int(head or 0), bad, first, hashed


def _anchored(store: EventStore, start: int) -> bool:
    rows = store.read(after=start - 2, limit=2)
    return len(rows) == 2 and rows[0].position == start - 1 and rows[1].prev_hash == rows[0].hash


def range_problem(start: int, to: int | None, head: int | None = None,
                  names: tuple[str, str] = ("--from", "--to")) -> str | None:
    """Why positions `start` to `to` (None: the head) name nothing of the log to check or export (None: they name
    some, or start just past the head, where a log with nothing new since is checked empty and says so). An empty
    range is refused, not reported as a log that verifies. `head` is the log's, when the caller has read it; `names`
    are the caller's words for the two bounds. The one home of the rule: the CLI's `verify` and `export` and the
    API's `verify` ask it."""
    first, last = names
    if start < 1:
        return f"{first} must be 1 or more (the first position), got {start}"
    if to is not None and to < start:
        return f"{last} {to} is before {first} {start}: no position to check"
    if head is not None and start > head + 1:
        return f"{first} {start} is past the log's head ({head}): no position to check"
    return None


def verify(store: EventStore, start: int = 1, to: int | None = None, public_key: Any | None = None,
           checkpoints: bool = True, independent: bool = False) -> dict[str, Any]:
    """Check the chain from `start` to `to` (default: all of it); over the whole log, also the signed
    checkpoints and the witnesses. `independent` recomputes every hash here, in Python (always so on
    SQLite); otherwise PostgreSQL recomputes them next to the data and a failure is re-checked here to
    name it."""
    started = time.perf_counter()
    start = max(1, start)
    full = start == 1 and to is None
    rep: ChainReport | None = None
    engine = "python"
    # read before the head, so that no checkpoint and no witness covers more than the log being checked
    cps = checkpoint_rows(store) if full and checkpoints else None
    reached = witnesses(store) if full else {}
    roots: dict[int, bytes] | None = None
    if store.dialect == "postgresql" and not independent:
        count, head, bad, first, hashed = _sql_chain_ok(
            store, start, to, None if cps is None else [int(c["tree_size"]) for c in cps])
        if not bad and (count == 0 or first == start) and (start == 1 or _anchored(store, start)):
            engine = "postgresql"
            rep = ChainReport(events=count, first=first, head=head if count else start - 1,
                              head_hash=store.read(after=head - 1, limit=1)[0].hash if count else GENESIS)
            if hashed is not None:
                rep.leaves, roots = hashed
    if rep is None:
        anchor: str | None = GENESIS
        if start > 1:
            before = store.read(after=start - 2, limit=1)
            anchor = before[0].hash if before and before[0].position == start - 1 else None
        rep = check_chain(store.rows(after=start - 1, to=to), anchor_position=start - 1, anchor_hash=anchor,
                          keep_leaves=full and checkpoints)
    problems: list[Problem] = list(rep.problems)
    checked = 0
    if full:
        for name, pos in reached.items():
            if pos > rep.head:
                problems.append(Problem(rep.head + 1, "truncated",
                                        f"the {name} reached position {pos}, the log ends at {rep.head}"))
        problems += _dedup_problems(store)
        if cps is not None:
            problems += check_checkpoints(cps, rep.leaves, rep.head, public_key, chain_ok=rep.ok, roots=roots)
            checked = len(cps)
    problems.sort(key=lambda p: p.position)
    out: dict[str, Any] = {
        "ok": not problems, "events": rep.events, "from": start, "to": to if to is not None else rep.head,
        "head": rep.head, "head_hash": rep.head_hash, "checkpoints_checked": checked, "engine": engine,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if problems:
        first_problem = problems[0]
        out |= {"first_bad_position": first_problem.position, "problem": first_problem.kind,
                "detail": first_problem.detail, "problems": [p.to_dict() for p in problems[:20]]}
    return out
