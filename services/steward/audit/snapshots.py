"""Snapshots of the folded state, and time travel: the projections as of any past time.

A snapshot is the `Projector` at a position, marshalled column-wise (`Projector.encode`), with its
digest and a format tag that changes whenever the domain's state classes change; an unreadable or stale
snapshot is ignored and the fold starts earlier. `state_at(t)` = nearest snapshot at or before the last
event recorded at or before t, plus the tail of the log, as a `StateAt` that loads the job columns it
reads (no job is built for the counts).
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from sqlalchemy import delete, func, select

from steward.audit.timetravel import StateAt
from steward.domain.events import EVENT_TYPES, Event
from steward.store import schema
from steward.store.eventstore import EventStore, gc_paused
from steward.store.projections import SNAPSHOT_FORMAT, Projector, SnapshotParts, snapshot_digest, snapshot_header_length
from steward.store.upcasting import upcast

SNAPSHOT_EVERY = 10_000


def events_for_fold(store: EventStore, after: int, to: int | None = None) -> Iterator[Any]:
    """(position, event, recorded_at, hash) from the log, upcast to the current schema versions."""
    current = EVENT_TYPES
    for position, stream_id, type_, version, payload, at, h in store.fold_rows(after, to):
        if current.get(type_, 1) != version:
            payload = upcast(type_, version, payload)
        yield position, Event(stream_id, type_, payload), at, h


def _candidates(store: EventStore, at_or_before: int | None) -> list[tuple[int, str]]:
    """(position, digest) of the newest snapshots of the current format at or before the position."""
    t = schema.snapshots
    q = select(t.c.position, t.c.digest).where(t.c.format == SNAPSHOT_FORMAT).order_by(t.c.position.desc())
    if at_or_before is not None:
        q = q.where(t.c.position <= at_or_before)
    with store.engine.connect() as conn:
        rows = [(int(r.position), str(r.digest)) for r in conn.execute(q.limit(5))]
        conn.rollback()
    return rows


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


def load_snapshot(store: EventStore, at_or_before: int | None = None) -> Projector | None:
    """The newest readable snapshot at or before the position (None: fold from the start)."""
    for position, digest in _candidates(store, at_or_before):
        with store.engine.connect() as conn:
            blob = bytes(conn.execute(select(schema.snapshots.c.state)
                                      .where(schema.snapshots.c.position == position)).scalar_one())
            conn.rollback()
        try:
            if snapshot_digest(blob) != digest:
                continue
            with gc_paused():
                return Projector.decode(blob)
        except (ValueError, TypeError, EOFError, struct.error):
            continue
    return None


def load_snapshot_parts(store: EventStore, at_or_before: int | None = None) -> SnapshotParts | None:
    """As `load_snapshot`, reading the header only: the job parts are read when asked for."""
    for position, digest in _candidates(store, at_or_before):
        try:
            (prefix,) = _fetch(store, position, [(0, 65_536)])
            size = snapshot_header_length(prefix)
            if size > len(prefix):
                (prefix,) = _fetch(store, position, [(0, size)])
            head = prefix[:size]
            if hashlib.sha256(head).hexdigest() != digest:
                continue
            return SnapshotParts.decode(head, partial(_fetch, store, position))
        except (ValueError, TypeError, EOFError, struct.error):
            continue
    return None


def save_snapshot(store: EventStore, proj: Projector) -> None:
    blob = proj.encode()
    with store.engine.begin() as conn:
        conn.execute(delete(schema.snapshots).where(schema.snapshots.c.position == proj.position))
        conn.execute(schema.snapshots.insert().values(
            position=proj.position, recorded_at=proj.recorded_at, head_hash=proj.head_hash,
            format=SNAPSHOT_FORMAT, digest=snapshot_digest(blob), state=blob))


def take_snapshots(store: EventStore, every: int = SNAPSHOT_EVERY, upto: int | None = None) -> int:
    """Fold from the newest snapshot and save one every `every` events; returns how many were saved."""
    proj = load_snapshot(store) or Projector()
    head = store.head() if upto is None else upto
    saved = 0
    for position, ev, at, h in events_for_fold(store, proj.position, head):
        proj.apply(ev, at, position, h)
        if position % every == 0:
            save_snapshot(store, proj)
            saved += 1
    return saved


def fold_to(store: EventStore, position: int) -> Projector:
    """The projector at `position`: nearest snapshot plus the tail."""
    proj = load_snapshot(store, position) or Projector()
    with gc_paused():
        for pos, ev, at, h in events_for_fold(store, proj.position, position):
            proj.apply(ev, at, pos, h)
    return proj


def state_at_position(store: EventStore, position: int) -> StateAt:
    """The projections at `position`: the nearest snapshot's parts plus the tail folded job by job
    (`StateAt`); a tail with an event that is not job-local is folded by the `Projector` instead."""
    parts = load_snapshot_parts(store, position)
    tail = list(events_for_fold(store, parts.position if parts else 0, position))
    if not all(StateAt.folds(ev) for _, ev, _, _ in tail):
        return StateAt(None, fold_to(store, position))
    st = StateAt(parts)
    st.prefetch(ev.payload["job_id"] for _, ev, _, _ in tail)
    for pos, ev, at, h in tail:
        st.apply(ev, at, pos, h)
    return st


def state_at(store: EventStore, at: float) -> tuple[StateAt, dict[str, Any]]:
    """The projections as of time `at` (the last event recorded at or before it)."""
    started = time.perf_counter()
    position = store.position_at(at)
    st = state_at_position(store, position)
    info = {"at": at, "position": position, "recorded_at": st.recorded_at if position else None,
            "fold_ms": round((time.perf_counter() - started) * 1000, 3)}
    return st, info
