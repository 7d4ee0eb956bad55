"""Reads of the log for auditors (synchronous; called in a thread): the filtered event stream, the state
folded up to a position or time, and verification of the hash chain over a range."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from steward.audit.snapshots import state_at_position
from steward.audit.verify import verify
from steward.domain.state import AllocationNode, ClusterNode, Job
from steward.store import schema
from steward.store.eventstore import EventStore, RecordedEvent, row_to_recorded

SCAN_LIMIT = 20_000
VERIFY_LIMIT = 500_000


@dataclass(frozen=True, slots=True)
class EventQuery:
    stream_id: str | None = None
    stream_prefix: str | None = None
    types: tuple[str, ...] = ()
    actor: str | None = None
    since: float | None = None
    until: float | None = None


def read_events(store: EventStore, q: EventQuery, after: int, limit: int) -> tuple[list[RecordedEvent], int, bool]:
    """Up to `limit` events after position `after` that match; (events, last scanned position, more?).
    Filters on columns run in SQL; the actor (in metadata) is matched here, scanning at most SCAN_LIMIT."""
    t = schema.events
    base = select(t).order_by(t.c.position)
    if q.stream_id:
        base = base.where(t.c.stream_id == q.stream_id)
    if q.stream_prefix:
        base = base.where(t.c.stream_id.startswith(q.stream_prefix, autoescape=True))
    if q.types:
        base = base.where(t.c.type.in_(q.types))
    if q.since is not None:
        base = base.where(t.c.recorded_at >= q.since)
    if q.until is not None:
        base = base.where(t.c.recorded_at < q.until)
    out: list[RecordedEvent] = []
    scanned = after
    batch = limit + 1 if q.actor is None else 1000
    budget = SCAN_LIMIT
    with store.engine.connect() as conn:
        while budget > 0:
            rows = conn.execute(base.where(t.c.position > scanned).limit(batch)).all()
            if not rows:
                conn.rollback()
                return out, scanned, False
            for row in rows:
                rec = row_to_recorded(row)
                if q.actor is None or rec.metadata.get("actor") == q.actor:
                    if len(out) == limit:
                        conn.rollback()
                        return out, scanned, True
                    out.append(rec)
                scanned = rec.position
            budget -= len(rows)
            if len(rows) < batch:
                conn.rollback()
                return out, scanned, False
        conn.rollback()
    return out, scanned, True


@dataclass(frozen=True, slots=True)
class StatePage:
    """The state at a position as the API's `stateAt` gives it: the small tables whole, the job counts
    per state, and the first jobs by (submitted_at, job_id)."""

    position: int
    recorded_at: float | None
    allocations: list[AllocationNode]
    nodes: list[ClusterNode]
    job_counts: dict[str, int]
    jobs: list[Job]
    jobs_total: int


def state_at(store: EventStore, position: int, jobs_first: int) -> StatePage:
    """The state at `position` (`StateAt`: the nearest snapshot's parts plus the tail): the counts come
    from the snapshot's id and state columns, and only the first `jobs_first` jobs are built."""
    st = state_at_position(store, position)
    counts = st.job_counts()
    return StatePage(
        position=st.position, recorded_at=st.recorded_at if st.position else None,
        allocations=sorted(st.allocations.values(), key=lambda a: a.name),
        nodes=sorted(st.nodes.values(), key=lambda x: x.node_id),
        job_counts=counts, jobs=st.first_jobs(jobs_first), jobs_total=sum(counts.values()))


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """`to_position` is the last position checked; `truncated` says that positions of the range asked for
    (up to `asked_to`, or the head) exist past it and were not checked (a request checks at most
    `VERIFY_LIMIT`), and then `ok` is false: nothing is vouched for that was not checked."""

    from_position: int
    to_position: int
    checked: int
    ok: bool
    first_bad_position: int | None
    problem: str | None
    truncated: bool = False
    asked_to: int = 0
    head: int = 0


def verify_range(store: EventStore, from_position: int, to_position: int) -> VerifyResult:
    """Recompute every hash and link in [from, to] (at most `VERIFY_LIMIT` positions), with the auditors'
    own verifier."""
    last = min(to_position, from_position + VERIFY_LIMIT - 1)
    rep = verify(store, from_position, last, checkpoints=False)
    reached = int(rep["head"])  # the last position checked: `last`, or the log's end before it
    head = store.head()  # read after the check: a live log may have grown since
    truncated = last < to_position and head > last
    problem = f"{rep['problem']}: {rep.get('detail', '')}".rstrip(": ") if not rep["ok"] else None
    if truncated and problem is None:
        problem = (f"not checked past position {reached:,}: a request checks at most {VERIFY_LIMIT:,} positions; "
                   f"ask again from position {reached + 1:,}")
    return VerifyResult(from_position, reached, int(rep["events"]), bool(rep["ok"]) and not truncated,
                        rep.get("first_bad_position"), problem, truncated, to_position, head)
