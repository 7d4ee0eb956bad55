"""`steward audit verify`: recompute every hash and link of the stored log, check it against the signed
checkpoints, and against the ledger's own witnesses of how far the log went (outbox and dedup)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import func, select

from steward.audit.checkpoints import checkpoint_rows
from steward.audit.verifier import GENESIS, ChainReport, Problem, check_chain, check_checkpoints, leaf_hash
from steward.store import schema
from steward.store.eventstore import EventStore


def _witnesses(store: EventStore) -> dict[str, int]:
    """Positions other tables say the log reached (the ledger writes them in the same transaction)."""
    with store.engine.connect() as conn:
        relay = conn.execute(select(func.max(schema.relay_positions.c.position))).scalar() or 0
        dedup = conn.execute(select(func.max(schema.processed_messages.c.position))).scalar() or 0
        conn.rollback()
    return {"outbox relay": int(relay), "processed messages": int(dedup)}


# The chain check in PostgreSQL itself (C sha256 next to the data): every hash recomputed from the stored
# canonical texts exactly as `event_body_text` builds the body. It is a plain aggregate, so PostgreSQL runs
# it with parallel workers; the links (each prev_hash equals the hash before it) are a second, narrow pass,
# and gaps show as a count short of the span (positions are a primary key). Only the first suspicious
# positions come back; the precise classification is then done by the Python check.
_SQL_HASHES = """
SELECT count(*), min(position), max(position),
       min(position) FILTER (WHERE hash <> encode(sha256(convert_to(
           prev_hash || '{"message_id":' || coalesce(to_json(message_id)::text, 'null')
           || ',"metadata":' || metadata::text
           || ',"payload_sha256":"' || CASE WHEN payload::text LIKE '{"$redacted_sha256":%%'
                THEN payload->>'$redacted_sha256'
                ELSE encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') END
           || '","position":' || position
           || ',"recorded_at":"' || CASE WHEN recorded_at = trunc(recorded_at) AND abs(recorded_at) < 1e16
                THEN trunc(recorded_at)::bigint::text || '.0' ELSE recorded_at::text END
           || '","schema_version":' || schema_version || ',"stream_id":' || to_json(stream_id)::text
           || ',"type":' || to_json(type)::text || ',"version":' || version || '}', 'UTF8')), 'hex'))
FROM events WHERE position >= %(start)s AND position <= %(to)s
"""
_SQL_LINKS = """
SELECT min(position) FILTER (WHERE prev_hash <> before_hash)
FROM (SELECT position, prev_hash, lag(hash) OVER (ORDER BY position) AS before_hash
      FROM events WHERE position >= %(start)s AND position <= %(to)s) e
"""


def _sql_chain_ok(store: EventStore, start: int, to: int | None) -> tuple[int, int, list[int], int | None]:
    """(events, head, first suspicious positions, first position) of [start, to], checked by PostgreSQL."""
    # Both passes cover [start, to] with `to` at most the committed head, so the two connections see the
    # same rows (events are immutable and positions commit in order) and the passes can run at once.
    params = {"start": start, "to": min(to, store.head()) if to is not None else store.head()}

    def one(sql: str) -> Any:
        with store.engine.connect() as conn:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.execute(sql, params)
            row = cursor.fetchone()
            cursor.close()
            conn.rollback()
        return row

    with ThreadPoolExecutor(max_workers=1) as pool:
        links = pool.submit(one, _SQL_LINKS)
        count, first, head, bad_hash = one(_SQL_HASHES)
        (bad_link,) = links.result()
    bad = sorted(p for p in (bad_hash, bad_link) if p is not None)
    if count and count != head - first + 1:  # a gap somewhere
        bad.append(first)
    return int(count or 0), int(head or 0), bad, first


def _anchored(store: EventStore, start: int) -> bool:
    rows = store.read(after=start - 2, limit=2)
    return len(rows) == 2 and rows[0].position == start - 1 and rows[1].prev_hash == rows[0].hash


def _hashes(store: EventStore) -> list[str]:
    with store.engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SELECT hash FROM events ORDER BY position")
        out = [h for (h,) in cursor.fetchall()]
        cursor.close()
        conn.rollback()
    return out


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
    if store.dialect == "postgresql" and not independent:
        count, head, bad, first = _sql_chain_ok(store, start, to)
        if not bad and (count == 0 or first == start) and (start == 1 or _anchored(store, start)):
            engine = "postgresql"
            rep = ChainReport(events=count, first=first, head=head if count else start - 1,
                              head_hash=store.read(after=head - 1, limit=1)[0].hash if count else GENESIS)
            if full and checkpoints:
                rep.leaves = [leaf_hash(h) for h in _hashes(store)]
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
        for name, pos in _witnesses(store).items():
            if pos > rep.head:
                problems.append(Problem(rep.head + 1, "truncated",
                                        f"the {name} reached position {pos}, the log ends at {rep.head}"))
        if checkpoints:
            cps = checkpoint_rows(store)
            problems += check_checkpoints(cps, rep.leaves, rep.head, public_key, chain_ok=rep.ok)
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
