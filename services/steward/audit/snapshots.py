"""Snapshots of the folded state, and time travel: the projections as of any past time.

A snapshot is the `Projector` at a position, marshalled column-wise (`Projector.encode`), with its
digest and a format tag that changes whenever the domain's state classes change; an unreadable or stale
snapshot is ignored and the fold starts earlier. `state_at(t)` = nearest snapshot at or before the last
event recorded at or before t, plus the tail of the log, as a `StateAt` that loads the job columns it
reads (no job is built for the counts).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import delete, select

from steward.audit.timetravel import StateAt
from steward.domain.events import EVENT_TYPES, Event
from steward.store import schema
from steward.store.eventstore import EventStore, gc_paused
from steward.store.projections import SNAPSHOT_FORMAT, Projector, SnapshotParts
from steward.store.upcasting import upcast

SNAPSHOT_EVERY = 10_000


def events_for_fold(store: EventStore, after: int, to: int | None = None) -> Iterator[Any]:
    """(position, event, recorded_at, hash) from the log, upcast to the current schema versions."""
    current = EVENT_TYPES
    for position, stream_id, type_, version, payload, at, h in store.fold_rows(after, to):
        if current.get(type_, 1) != version:
            payload = upcast(type_, version, payload)
        yield position, Event(stream_id, type_, payload), at, h


def _snapshot_blobs(store: EventStore, at_or_before: int | None) -> Iterator[bytes]:
    """The newest snapshots at or before the position whose format and digest check out, newest first."""
    t = schema.snapshots
    q = select(t.c.position, t.c.format, t.c.digest, t.c.state).order_by(t.c.position.desc())
    if at_or_before is not None:
        q = q.where(t.c.position <= at_or_before)
    with store.engine.connect() as conn:
        rows = conn.execute(q.limit(5))
        try:
            for row in rows:
                blob = bytes(row.state)
                if row.format == SNAPSHOT_FORMAT and hashlib.sha256(blob).hexdigest() == row.digest:
                    yield blob
        finally:
            rows.close()
            conn.rollback()


def load_snapshot(store: EventStore, at_or_before: int | None = None) -> Projector | None:
    """The newest readable snapshot at or before the position (None: fold from the start)."""
    for blob in _snapshot_blobs(store, at_or_before):
        try:
            with gc_paused():
                return Projector.decode(blob)
        except (ValueError, TypeError, EOFError):
            continue
    return None


def load_snapshot_parts(store: EventStore, at_or_before: int | None = None) -> SnapshotParts | None:
    """As `load_snapshot`, with the job columns left marshalled (time travel loads what it reads)."""
    for blob in _snapshot_blobs(store, at_or_before):
        try:
            return SnapshotParts.decode(blob)
        except (ValueError, TypeError, EOFError):
            continue
    return None


def save_snapshot(store: EventStore, proj: Projector) -> None:
    blob = proj.encode()
    with store.engine.begin() as conn:
        conn.execute(delete(schema.snapshots).where(schema.snapshots.c.position == proj.position))
        conn.execute(schema.snapshots.insert().values(
            position=proj.position, recorded_at=proj.recorded_at, head_hash=proj.head_hash,
            format=SNAPSHOT_FORMAT, digest=hashlib.sha256(blob).hexdigest(), state=blob))


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
