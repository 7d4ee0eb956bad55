"""What the API reads: the projections, taken once per store head and shared by every request until the
head moves (the figures also age with the clock). Synchronous; the schema calls it in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import or_, select

from steward.api import figures
from steward.api.queue import PolicyOrder, PolicyQueue
from steward.store import schema
from steward.store.eventstore import EventStore

ACTIVE = ("QUEUED", "PREEMPTED", "PLACED", "RUNNING")


@dataclass(frozen=True, slots=True)
class QueueItem:
    job: dict[str, Any]
    position: int
    position_in_project: int


@dataclass(slots=True)
class Snapshot:
    head: int
    allocations: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    active_jobs: list[dict[str, Any]]
    parents: dict[str, str] = field(default_factory=dict)
    policy: PolicyQueue | None = None
    _queue: list[QueueItem] | None = None
    _queue_order: PolicyOrder | None = None
    _used: dict[str, int] | None = None
    _capacity: tuple[int, int, int, int] | None = None

    @property
    def capacity(self) -> int:
        return sum(int(n["gpus"]) for n in self.nodes if n["state"] != "unhealthy")

    def queue(self) -> list[QueueItem]:
        """Waiting jobs in the order the scheduler takes them now (steward.api.queue: the policy's own
        ordering on the scheduler's view of the log), with their position overall and in their project.
        Without a policy view (a bare snapshot), priority then submit time."""
        order = self.policy.order(self.head) if self.policy is not None else None
        if self._queue is None or order is not self._queue_order:
            waiting = {j["job_id"]: j for j in self.active_jobs if j["state"] == "QUEUED"}
            if order is None:
                ranked = sorted(waiting.values(), key=lambda j: (-j["priority"], j["submitted_at"], j["job_id"]))
                per_project: dict[str, int] = {}
                items = []
                for i, j in enumerate(ranked, 1):
                    per_project[j["project"]] = per_project.get(j["project"], 0) + 1
                    items.append(QueueItem(j, i, per_project[j["project"]]))
            else:
                items = [QueueItem(waiting[i], order.position[i], order.position_in_project[i])
                         for i in order.jobs if i in waiting]
            self._queue, self._queue_order = items, order
        return self._queue

    def queue_cached(self) -> list[QueueItem] | None:
        """`queue()` when it needs no recomputation (no IO, no policy run: callable on the event loop),
        else None."""
        if self._queue is None:
            return None
        if self.policy is None:
            return self._queue
        order = self.policy.cached(self.head)
        return self._queue if order is not None and order is self._queue_order else None

    def policy_order(self) -> PolicyOrder | None:
        """The policy order behind `queue()` (None for a bare snapshot)."""
        self.queue()
        return self._queue_order

    def capacity_figures(self) -> tuple[int, int, int, int]:
        """(largest ready node, most free GPUs on one ready node, ready GPUs, free ready GPUs)."""
        if self._capacity is None:
            used = self.used_gpus()
            ready = [n for n in self.nodes if n["state"] == "ready"]
            free = [int(n["gpus"]) - used.get(n["node_id"], 0) for n in ready]
            self._capacity = (max((int(n["gpus"]) for n in ready), default=0), max(free, default=0),
                              sum(int(n["gpus"]) for n in ready), sum(free))
        return self._capacity

    def used_gpus(self) -> dict[str, int]:
        if self._used is None:
            used: dict[str, int] = {}
            for j in self.active_jobs:
                if j["state"] in ("PLACED", "RUNNING"):
                    for node, gpus in (j["assignments"] or {}).items():
                        used[node] = used.get(node, 0) + len(gpus)
            self._used = used
        return self._used


class ReadModel:
    def __init__(self, store: EventStore, clock: Callable[[], float] = time.time, head_ttl_s: float = 0.05,
                 figures_ttl_s: float = 5.0) -> None:
        self.store = store
        self.clock = clock
        self.head_ttl_s = head_ttl_s
        self.figures_ttl_s = figures_ttl_s
        self._lock = threading.Lock()  # the snapshot's
        self._figures_lock = threading.Lock()
        self._counts_lock = threading.Lock()
        # the highest position a mutation through this process saw: nothing older is ever served
        self.floor = 0
        self._head: tuple[float, int] = (-1.0, -1)
        self._snapshot: Snapshot | None = None
        self._figures: dict[float, tuple[int, float, list[figures.AllocationFigures]]] = {}
        self._counts: tuple[int, dict[str, int]] | None = None
        self._deferrals: tuple[int, tuple[str, ...], dict[str, tuple[int, dict[str, Any]]]] | None = None
        self.policy = PolicyQueue(store, clock=clock)

    def head(self) -> int:
        now = time.monotonic()
        checked, head = self._head
        if now - checked < self.head_ttl_s:
            return head
        head = self.store.head()
        self._head = (now, head)
        return head

    def fresh_head(self) -> int | None:
        """The head if it was read from the store within `head_ttl_s`, else None (read it with `head`)."""
        checked, head = self._head
        return head if time.monotonic() - checked < self.head_ttl_s else None

    def saw(self, position: int) -> None:
        """A mutation's outcome was recorded at `position`: read-your-writes from here on."""
        self.floor = max(self.floor, position)
        if position > self._head[1]:
            self._head = (-1.0, position)

    def cached_snapshot(self) -> Snapshot | None:
        """The snapshot when it is known to be current without asking the store (the head was read within
        `head_ttl_s` and the snapshot is at least there), else None: callable on the event loop, so a
        request does not hop to a thread for an answer already in memory."""
        head = self.fresh_head()
        snap = self._snapshot
        return snap if head is not None and snap is not None and snap.head >= head else None

    def cached_figures(self, window_s: float) -> list[figures.AllocationFigures] | None:
        """`figures(window_s)` when it is cached and current (no IO), else None."""
        snap = self.cached_snapshot()
        hit = self._figures.get(window_s)
        if snap is not None and hit is not None and hit[0] == snap.head and self.clock() - hit[1] < self.figures_ttl_s:
            return hit[2]
        return None

    def cached_job_counts(self) -> dict[str, int] | None:
        """`job_counts()` when it is current (no IO), else None."""
        head = self.fresh_head()
        hit = self._counts
        return hit[1] if head is not None and hit is not None and hit[0] >= head else None

    def snapshot(self) -> Snapshot:
        """The projections at the head; while another thread is already reading a newer one, the previous
        snapshot (never older than `floor`): under a stream of appends, requests do not queue behind
        each other's reloads. A caller that may cache its answer compares `.head` with `known_head()`."""
        head = self.head()
        snap = self._snapshot
        if snap is not None and snap.head >= head:
            return snap
        if not self._lock.acquire(blocking=False):
            if snap is not None and snap.head >= self.floor:
                return snap
            self._lock.acquire()
        try:
            snap = self._snapshot
            if snap is not None and snap.head >= head:
                return snap
            with self.store.engine.connect() as conn:
                allocations = [dict(r._mapping) for r in conn.execute(
                    select(schema.proj_allocations).order_by(schema.proj_allocations.c.name))]
                nodes = [dict(r._mapping) for r in conn.execute(
                    select(schema.proj_nodes).order_by(schema.proj_nodes.c.node_id))]
                jobs = [dict(r._mapping) for r in conn.execute(
                    select(schema.proj_jobs).where(schema.proj_jobs.c.state.in_(ACTIVE)))]
                conn.rollback()
            snap = Snapshot(head, allocations, nodes, jobs, {a["name"]: a["parent"] for a in allocations},
                            self.policy)
            self._snapshot = snap
            return snap
        finally:
            self._lock.release()

    def known_head(self) -> int:
        """The newest head this process has read or been told of (no IO)."""
        return self._head[1]

    def figures(self, window_s: float) -> list[figures.AllocationFigures]:
        snap = self.snapshot()
        now = self.clock()
        hit = self._figures.get(window_s)
        if hit is not None and hit[0] == snap.head and now - hit[1] < self.figures_ttl_s:
            return hit[2]
        if not self._figures_lock.acquire(blocking=False):
            # another thread is computing them: the previous figures meanwhile (see figures_head)
            if hit is not None and hit[0] >= self.floor:
                return hit[2]
            self._figures_lock.acquire()
        try:
            hit = self._figures.get(window_s)
            if hit is not None and hit[0] == snap.head and now - hit[1] < self.figures_ttl_s:
                return hit[2]
            q = select(schema.proj_jobs.c.project, schema.proj_jobs.c.state, schema.proj_jobs.c.gpus,
                       schema.proj_jobs.c.submitted_at, schema.proj_jobs.c.started_at,
                       schema.proj_jobs.c.ended_at).where(
                or_(schema.proj_jobs.c.ended_at.is_(None), schema.proj_jobs.c.ended_at >= now - window_s))
            with self.store.engine.connect() as conn:
                rows = [dict(r._mapping) for r in conn.execute(q)]
                conn.rollback()
            out = figures.compute(snap.allocations, rows, snap.capacity, now, window_s)
            if len(self._figures) > 16:
                self._figures.clear()
            self._figures[window_s] = (snap.head, now, out)
            return out
        finally:
            self._figures_lock.release()

    def figures_head(self, window_s: float) -> int:
        """The head the last figures for `window_s` were computed at (-1: none)."""
        hit = self._figures.get(window_s)
        return hit[0] if hit is not None else -1

    # -- rows that are not cached ----------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, Any] | None:
        with self.store.engine.connect() as conn:
            row = conn.execute(select(schema.proj_jobs).where(schema.proj_jobs.c.job_id == job_id)).first()
            conn.rollback()
        return dict(row._mapping) if row else None

    def jobs_page(self, *, projects: frozenset[str] | None, states: list[str] | None, project: str | None,
                  job_class: str | None, submitted_after: float | None, submitted_before: float | None,
                  after: tuple[float, str] | None, limit: int) -> list[dict[str, Any]]:
        """Newest first, keyset-paginated on (submitted_at, job_id)."""
        t = schema.proj_jobs
        q = select(t).order_by(t.c.submitted_at.desc(), t.c.job_id.desc()).limit(limit)
        if projects is not None:
            q = q.where(t.c.project.in_(sorted(projects)))
        if states:
            q = q.where(t.c.state.in_(states))
        if project:
            q = q.where(t.c.project == project)
        if job_class:
            q = q.where(t.c.job_class == job_class)
        if submitted_after is not None:
            q = q.where(t.c.submitted_at >= submitted_after)
        if submitted_before is not None:
            q = q.where(t.c.submitted_at < submitted_before)
        if after is not None:
            ts, jid = after
            q = q.where(or_(t.c.submitted_at < ts, (t.c.submitted_at == ts) & (t.c.job_id < jid)))
        with self.store.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q)]
            conn.rollback()
        return rows

    def deferrals(self, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """The latest `JobDeferred` explanation of each job (the scheduler's reason code, the amount
        blocking, its evidence), with the position it was recorded at."""
        if not job_ids:
            return {}
        t = schema.events
        q = select(t.c.stream_id, t.c.position, t.c.payload).where(
            t.c.stream_id.in_([f"job-{j}" for j in job_ids]), t.c.type == "JobDeferred").order_by(t.c.position)
        with self.store.engine.connect() as conn:
            rows = conn.execute(q).all()
            conn.rollback()
        out: dict[str, tuple[int, dict[str, Any]]] = {}
        for row in rows:
            payload: Any = row.payload
            explanation = payload.get("explanation") if isinstance(payload, dict) else None
            if isinstance(explanation, dict):
                out[str(row.stream_id).removeprefix("job-")] = (int(row.position), explanation)
        return out

    def cached_deferrals(self, head: int, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]] | None:
        """`deferrals(job_ids)` as last read at `head` for the same jobs (no IO), else None."""
        hit = self._deferrals
        return hit[2] if hit is not None and hit[0] == head and hit[1] == tuple(job_ids) else None

    def deferrals_at(self, head: int, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """`deferrals(job_ids)`, remembered for `head` (the queue's first page is asked for again and
        again until the log moves)."""
        out = self.deferrals(job_ids)
        self._deferrals = (head, tuple(job_ids), out)
        return out

    def job_counts(self) -> dict[str, int]:
        """Jobs per state, once per head."""
        from sqlalchemy import func

        head = self.head()
        hit = self._counts
        if hit is not None and hit[0] >= head:
            return hit[1]
        if not self._counts_lock.acquire(blocking=False):
            if hit is not None and hit[0] >= self.floor:
                return hit[1]  # another thread is counting: the previous counts meanwhile (counts_head)
            self._counts_lock.acquire()
        try:
            t = schema.proj_jobs
            with self.store.engine.connect() as conn:
                rows = conn.execute(select(t.c.state, func.count()).group_by(t.c.state)).all()
                conn.rollback()
            counts = {r[0]: int(r[1]) for r in rows}
            self._counts = (head, counts)
            return counts
        finally:
            self._counts_lock.release()

    def counts_head(self) -> int:
        """The head the last job counts were read at (-1: none)."""
        return self._counts[0] if self._counts is not None else -1
