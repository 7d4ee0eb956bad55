"""Snapshots of the folded state, and time travel: the projections as of any past time.

Snapshots are a cache (`steward.store.snapshotparts`): a *base* with the whole state every `BASE_EVERY`
events and, every `SNAPSHOT_EVERY` events in between, a *delta* with only the jobs changed since the
snapshot before it. A chain (base, deltas) is read only when every link's digest matches and every
member's `head_hash` equals the hash the log holds at its position; anything stale, unreadable or
broken is skipped and the fold starts earlier. `state_at(t)` = the newest chain at or before the last
event recorded at or before t, plus the tail of the log (at most `SNAPSHOT_EVERY` events), as a
`StateAt` that reads only the jobs it needs.

The writer (`Snapshotter`) keeps the folded state in memory between calls, so a snapshot costs the new
events and the jobs they changed, not a re-encoding of the whole state (except for each base).
"""

from __future__ import annotations

import json
import struct
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from sqlalchemy import delete, func, select, text

from steward.audit.timetravel import StateAt
from steward.domain.events import EVENT_TYPES, Event
from steward.store import schema
from steward.store.eventstore import EventStore, gc_paused
from steward.store.leases import Fence, fenced_transaction
from steward.store.projections import JOB_LOCAL_EVENTS, Projector
from steward.store.snapshotparts import (
    BASE_FORMAT,
    DELTA_FORMAT,
    Ref,
    SnapshotView,
    StoredSnapshot,
    digest_of,
    encode_base,
    encode_delta,
    header_length,
)
from steward.store.upcasting import upcast

SNAPSHOT_EVERY = 1_000  # a delta (or a base) every this many events
BASE_EVERY = 100_000  # a base at the first due snapshot this many events after the previous base
_PREFIX = 16_384  # bytes read to get a header (read again whole when it is longer)
_DECODE = json.JSONDecoder().decode  # on text: skips `json.loads`'s encoding detection
_UNREADABLE = (ValueError, TypeError, EOFError, KeyError, IndexError, struct.error)


_SQL_PAGE = ("SELECT position, stream_id, type, schema_version, payload::text, recorded_at, hash FROM events "
             "WHERE position > %s AND position <= %s ORDER BY position")
_PAGE = 20_000


def _pages(store: EventStore, after: int, to: int) -> Iterator[list[tuple[Any, ...]]]:
    """The log in (after, to] as pages of rows fetched by psycopg's C row loader, the next page read on
    another connection while the caller folds this one (the server and this process work at once)."""

    def fetch(low: int) -> list[tuple[Any, ...]]:
        with store.engine.connect() as conn:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.execute(_SQL_PAGE, (low, min(to, low + _PAGE)))
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            cursor.close()
            conn.rollback()
        return rows

    with ThreadPoolExecutor(max_workers=1) as pool:
        low, pending = after, pool.submit(fetch, after)
        while low < to:
            rows = pending.result()
            low += _PAGE
            if low < to:
                pending = pool.submit(fetch, low)
            yield rows


def events_for_fold(store: EventStore, after: int, to: int | None = None) -> Iterator[Any]:
    """(position, event, recorded_at, hash) from the log, upcast to the current schema versions. On
    PostgreSQL up to `to` or the head when it starts (a caller that needs later events reads them)."""
    current = EVENT_TYPES
    if store.dialect == "postgresql":
        decode = _DECODE
        for rows in _pages(store, after, store.head() if to is None else to):
            for position, stream_id, type_, version, text_, at, h in rows:
                payload = decode(text_)
                if current.get(type_, 1) != version:
                    payload = upcast(type_, version, payload)
                yield position, Event(stream_id, type_, payload), at, h
        return
    for position, stream_id, type_, version, payload, at, h in store.fold_rows(after, to):
        if current.get(type_, 1) != version:
            payload = upcast(type_, version, payload)
        yield position, Event(stream_id, type_, payload), at, h


# ------------------------------------------------------------------------------------------ reading


def _fetch(store: EventStore, position: int, spans: list[tuple[int, int]]) -> list[bytes]:
    """Byte ranges of one stored snapshot, read by the database (`substr` on the blob), not the whole."""
    t = schema.snapshots
    out: list[bytes] = []
    with store.engine.connect() as conn:
        for i in range(0, len(spans), 200):
            chunk = spans[i:i + 200]
            cols = [func.substr(t.c.state, offset + 1, length) for offset, length in chunk]
            row = conn.execute(select(*cols).where(t.c.position == position)).one()
            out += [bytes(v) if v is not None else b"" for v in row]
        conn.rollback()
    return out


def _fetch_many(store: EventStore, wanted: list[tuple[StoredSnapshot, int]]) -> None:
    """Parts of several snapshots in one query per 500 parts (each checked by its snapshot)."""
    with store.engine.connect() as conn:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            values = ", ".join(f"(:p{k}, :k{k}, :o{k}, :n{k})" for k in range(len(chunk)))
            params: dict[str, int] = {}
            for k, (snap, part) in enumerate(chunk):
                offset, length = snap.span(part)
                params |= {f"p{k}": snap.position, f"k{k}": k, f"o{k}": offset + 1, f"n{k}": length}
            rows = conn.execute(text(
                f"SELECT v.column2, substr(s.state, v.column3, v.column4) FROM snapshots s "
                f"JOIN (VALUES {values}) AS v ON s.position = v.column1"), params).tuples().all()
            got: dict[int, bytes] = {int(k): bytes(data) if data is not None else b"" for k, data in rows}
            for k, (snap, part) in enumerate(chunk):
                snap.accept(part, got.get(k, b""))
        conn.rollback()


def _headers(store: EventStore, low: int, high: int, formats: tuple[str, ...],
             newest: int | None = None) -> list[tuple[int, str, bytes]]:
    """(position, digest, first bytes of the blob) of the snapshots in [low, high], newest first."""
    t = schema.snapshots
    q = (select(t.c.position, t.c.digest, func.substr(t.c.state, 1, _PREFIX))
         .where(t.c.format.in_(formats), t.c.position >= low, t.c.position <= high)
         .order_by(t.c.position.desc()))
    if newest is not None:
        q = q.limit(newest)
    with store.engine.connect() as conn:
        rows = [(int(p), str(d), bytes(b)) for p, d, b in conn.execute(q).tuples()]
        conn.rollback()
    return rows


def _snapshot(store: EventStore, position: int, digest: str, prefix: bytes) -> StoredSnapshot:
    size = header_length(prefix)
    if size > len(prefix):
        (prefix,) = _fetch(store, position, [(0, size)])
    return StoredSnapshot(position, digest, prefix[:size], partial(_fetch, store, position))


def _tied(store: EventStore, chain: list[StoredSnapshot]) -> bool:
    """Whether every snapshot's `head_hash` is the hash the log holds at its position."""
    e = schema.events
    with store.engine.connect() as conn:
        found: dict[int, str] = dict(conn.execute(select(e.c.position, e.c.hash).where(
            e.c.position.in_([s.position for s in chain]))).tuples().all())
        conn.rollback()
    return all(found.get(s.position) == s.head_hash for s in chain)


def _chain(store: EventStore, top: StoredSnapshot) -> list[StoredSnapshot]:
    """The base and deltas that `top` stands on, oldest first, each link checked by digest."""
    if top.kind == "base":
        return [top]
    if top.base is None or top.previous is None:
        raise ValueError(f"snapshot {top.position}: a delta without its base")
    stored = {(p, d): b for p, d, b in _headers(store, top.base[0], top.position - 1, (BASE_FORMAT, DELTA_FORMAT))}
    chain = [top]
    while chain[-1].kind == "delta":
        ref = chain[-1].previous
        if ref is None or ref not in stored:
            raise ValueError(f"snapshot {chain[-1].position}: the snapshot before it is gone or changed")
        chain.append(_snapshot(store, ref[0], ref[1], stored[ref]))
    if chain[-1].ref != top.base:
        raise ValueError(f"snapshot {top.position}: its chain does not end at its base")
    chain.reverse()
    return chain


def open_view(store: EventStore, at_or_before: int | None = None) -> SnapshotView | None:
    """The newest readable chain at or before the position (None: fold from the start)."""
    high = at_or_before if at_or_before is not None else 2**62
    tries = _headers(store, 0, high, (BASE_FORMAT, DELTA_FORMAT), newest=3)
    tries += _headers(store, 0, high, (BASE_FORMAT,), newest=2)  # a broken chain falls back to its base
    seen: set[int] = set()
    for position, digest, prefix in tries:
        if position in seen:
            continue
        seen.add(position)
        try:
            chain = _chain(store, _snapshot(store, position, digest, prefix))
            if _tied(store, chain):
                return SnapshotView(chain, partial(_fetch_many, store))
        except _UNREADABLE:
            continue
    return None


def load_snapshot(store: EventStore, at_or_before: int | None = None) -> Projector | None:
    """The newest readable snapshot at or before the position as a whole `Projector` (None: none)."""
    view = open_view(store, at_or_before)
    if view is None:
        return None
    with gc_paused():
        return view.projector()


# ------------------------------------------------------------------------------------------ writing


def save_snapshot(store: EventStore, position: int, recorded_at: float, head_hash: str, blob: bytes,
                  base: bool, fence: Fence | None = None) -> Ref:
    digest = digest_of(blob)
    with fenced_transaction(store.engine, fence) as conn:  # the active ledger's (ADR 0097)
        conn.execute(delete(schema.snapshots).where(schema.snapshots.c.position == position))
        conn.execute(schema.snapshots.insert().values(
            position=position, recorded_at=recorded_at, head_hash=head_hash,
            format=BASE_FORMAT if base else DELTA_FORMAT, digest=digest, state=blob))
    return position, digest


def save_base(store: EventStore, proj: Projector) -> Ref:
    """A base of `proj` (the whole state)."""
    counts = Counter(j.state for j in proj.jobs.values())
    return save_snapshot(store, proj.position, proj.recorded_at, proj.head_hash, encode_base(proj, counts), True)


def _newest_ref(store: EventStore) -> Ref | None:
    t = schema.snapshots
    with store.engine.connect() as conn:
        row = conn.execute(select(t.c.position, t.c.digest).where(t.c.format.in_((BASE_FORMAT, DELTA_FORMAT)))
                           .order_by(t.c.position.desc()).limit(1)).first()
        conn.rollback()
    return (int(row[0]), str(row[1])) if row else None


class Snapshotter:
    """Folds the log and saves a snapshot every `every` events: a base when `base_every` events have
    passed since the last base, else a delta of the jobs changed since the last snapshot. The folded
    state, the job counts and the changed jobs stay in memory between runs; when the newest stored
    snapshot is not the one this writer saved last, it starts again from the stored one."""

    def __init__(self, store: EventStore, every: int = SNAPSHOT_EVERY, base_every: int = BASE_EVERY) -> None:
        if every < 1 or base_every < 1:
            raise ValueError("snapshots: every and base_every must be at least 1")
        self.store, self.every, self.base_every = store, every, base_every
        self.proj: Projector | None = None
        self.counts: Counter[str] = Counter()
        self.changed: set[str] = set()
        self.last: Ref | None = None
        self.base: Ref | None = None

    def _sync(self) -> Projector:
        if self.proj is not None and _newest_ref(self.store) == self.last:
            return self.proj
        view = open_view(self.store)
        if view is None:
            self.proj, self.counts, self.last, self.base = Projector(), Counter(), None, None
        else:
            with gc_paused():
                self.proj = view.projector()
            self.counts = Counter(view.counts)
            self.last, self.base = view.chain[-1].ref, view.base.ref
        self.changed = set()
        return self.proj

    def _apply(self, proj: Projector, ev: Event, at: float, position: int, h: str) -> None:
        job_id = ev.payload.get("job_id")
        if ev.type in JOB_LOCAL_EVENTS and isinstance(job_id, str):
            old = proj.jobs.get(job_id)
            for _, key in proj.apply(ev, at, position, h):
                if old is not None and key == job_id:
                    self.counts[old.state] -= 1
                self.counts[proj.jobs[key].state] += 1
                self.changed.add(key)
            return
        jobs = [k for t, k in proj.apply(ev, at, position, h) if t == "j"]
        if jobs:  # rare (not job-local): count again
            self.changed.update(jobs)
            self.counts = Counter(j.state for j in proj.jobs.values())

    def _save(self, proj: Projector, fence: Fence | None) -> None:
        counts = {s: n for s, n in sorted(self.counts.items()) if n}
        if self.base is None or self.last is None or proj.position - self.base[0] >= self.base_every:
            self.last = self.base = save_snapshot(self.store, proj.position, proj.recorded_at, proj.head_hash,
                                                  encode_base(proj, counts), True, fence)
        else:
            blob = encode_delta(proj, counts, self.changed, self.base, self.last)
            self.last = save_snapshot(self.store, proj.position, proj.recorded_at, proj.head_hash, blob, False,
                                      fence)
        self.changed = set()

    def run(self, upto: int | None = None, fence: Fence | None = None) -> int:
        """Fold up to `upto` (default the head), saving the snapshots due (fenced with `fence`, ADR 0097);
        returns how many were saved."""
        proj = self._sync()
        head = self.store.head() if upto is None else upto
        saved = 0
        try:
            for position, ev, at, h in events_for_fold(self.store, proj.position, head):
                self._apply(proj, ev, at, position, h)
                if position % self.every == 0:
                    self._save(proj, fence)
                    saved += 1
        except BaseException:  # a save refused or failed: the folded state is past what is stored; read it again
            self.proj = None
            raise
        return saved


_writers: weakref.WeakKeyDictionary[EventStore, Snapshotter] = weakref.WeakKeyDictionary()


def take_snapshots(store: EventStore, every: int = SNAPSHOT_EVERY, upto: int | None = None,
                   base_every: int = BASE_EVERY, fence: Fence | None = None) -> int:
    """Save the snapshots due up to `upto` (default the head); returns how many were saved. Repeated calls
    on one store (the ledger's background thread) reuse the writer's folded state."""
    writer = _writers.get(store)
    if writer is None or (writer.every, writer.base_every) != (every, base_every):
        writer = _writers[store] = Snapshotter(store, every, base_every)
    return writer.run(upto, fence)


# ------------------------------------------------------------------------------------------ time travel


def fold_to(store: EventStore, position: int) -> Projector:
    """The projector at `position`: nearest snapshot plus the tail."""
    proj = load_snapshot(store, position) or Projector()
    with gc_paused():
        for pos, ev, at, h in events_for_fold(store, proj.position, position):
            proj.apply(ev, at, pos, h)
    return proj


def state_at_position(store: EventStore, position: int) -> StateAt:
    """The projections at `position`: the nearest snapshot chain plus the tail folded job by job
    (`StateAt`); a tail with an event that is not job-local is folded by the `Projector` instead."""
    view = open_view(store, position)
    tail = list(events_for_fold(store, view.position if view else 0, position))
    if not all(StateAt.folds(ev) for _, ev, _, _ in tail):
        return StateAt(None, fold_to(store, position))
    st = StateAt(view)
    st.prefetch(ev.payload["job_id"] for _, ev, _, _ in tail)
    for pos, ev, at, h in tail:
        st.apply(ev, at, pos, h)
    return st


# The newest recorded time at or before `at` by the recorded_at index, then the last position recorded
# at that time (the `OFFSET 0` keeps PostgreSQL on that index: it would otherwise walk the primary key
# back from the head, filtering: 100-200 ms on a million events).
def state_at(store: EventStore, at: float) -> tuple[StateAt, dict[str, Any]]:
    """The projections as of time `at` (the last event recorded at or before it)."""
    started = time.perf_counter()
    position = store.position_at(at)
    st = state_at_position(store, position)
    info = {"at": at, "position": position, "recorded_at": st.recorded_at if position else None,
            "fold_ms": round((time.perf_counter() - started) * 1000, 3)}
    return st, info
