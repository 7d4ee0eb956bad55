"""What the API reads: the projections as the read model in memory holds them (`steward.api.live`, fed in
order from the log), shared by every request (the figures also age with the clock). Synchronous; the
schema calls what may wait in a thread."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, or_, select

from steward.api import figures
from steward.api.live import Key, LiveModel
from steward.api.queue import PolicyOrder, PolicyQueue
from steward.audit.snapshots import events_for_fold, load_snapshot
from steward.domain.clusters import cluster_name
from steward.domain.nodes import takes_new_work
from steward.store import schema
from steward.store.eventstore import EventStore


@dataclass(frozen=True, slots=True)
class QueueItem:
    job: dict[str, Any]
    position: int
    position_in_project: int
    position_in_clusters: int | None = None
    """ADR 0073: its position among the waiting jobs that accept a cluster it accepts (None without a policy)."""
    clusters: frozenset[str] | None = None
    """The clusters it may run on (`PolicyOrder.clusters`; None without a policy)."""


@dataclass(frozen=True, slots=True)
class AsOf:
    """The figures of one window as of a log position (ADR 0075), and when (monotonic) they were computed."""

    position: int
    computed: float
    figures: list[figures.AllocationFigures]


@dataclass(slots=True)
class ReadView:
    """The projections at one head as the API reads them (a read view: not a stored snapshot of the audit,
    nor the policy's `Snapshot` of one cycle; docs/architecture.md "Names")."""

    head: int
    allocations: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    active_jobs: list[dict[str, Any]]
    parents: dict[str, str] = field(default_factory=dict)
    policy: PolicyQueue | None = None
    recorded_at: float = 0.0  # when `head` was recorded (0.0: an empty log)
    _queue: list[QueueItem] | None = None
    _queue_order: PolicyOrder | None = None
    _used: dict[str, int] | None = None
    _capacity: tuple[int, int, int, int] | None = None
    _names: dict[str, str] | None = None
    _clusters: dict[str, str] | None = None

    @property
    def capacity(self) -> int:
        return sum(int(n["gpus"]) for n in self.nodes if n["state"] != "unhealthy")

    def display_names(self) -> dict[str, str]:
        """What each node of the org tree is called (its display name, or its id: ADR 0055), once per view."""
        if self._names is None:
            self._names = {a["name"]: a.get("display_name") or a["name"] for a in self.allocations}
        return self._names

    def node_clusters(self) -> dict[str, str]:
        """Each node's cluster, as the domain names it (`cluster_name`), once per view."""
        if self._clusters is None:
            self._clusters = {n["node_id"]: cluster_name(str(n.get("cluster") or "")) for n in self.nodes}
        return self._clusters

    def queue(self) -> list[QueueItem]:
        """Waiting jobs in the order the scheduler takes them now (steward.api.queue: the policy's own
        ordering on the scheduler's view of the log), with their position overall and in their project.
        Without a policy view (a bare read view), priority then submit time."""
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
                items = [QueueItem(waiting[i], order.position[i], order.position_in_project[i],
                                   order.position_in_clusters.get(i), order.clusters.get(i))
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
        """The policy order behind `queue()` (None for a bare read view)."""
        self.queue()
        return self._queue_order

    def capacity_figures(self) -> tuple[int, int, int, int]:
        """(largest ready node, most free GPUs on one ready node, ready GPUs, free ready GPUs)."""
        if self._capacity is None:
            used = self.used_gpus()
            ready = [n for n in self.nodes if takes_new_work(str(n["state"]))]
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


def stored_deferrals(store: EventStore, job_ids: list[str], upto: int) -> dict[str, tuple[int, dict[str, Any]]]:
    """The latest `JobDeferred` explanation of each of `job_ids` recorded up to `upto`, with its position (what
    a read model started from a snapshot knows of waits deferred before it)."""
    if not job_ids:
        return {}
    t = schema.events
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    with store.engine.connect() as conn:
        for chunk in range(0, len(job_ids), 500):
            q = select(t.c.stream_id, t.c.position, t.c.payload).where(
                t.c.stream_id.in_([f"job-{j}" for j in job_ids[chunk:chunk + 500]]), t.c.type == "JobDeferred",
                t.c.position <= upto).order_by(t.c.position)
            for row in conn.execute(q):
                payload: Any = row.payload
                explanation = payload.get("explanation") if isinstance(payload, dict) else None
                if isinstance(explanation, dict):
                    out[str(row.stream_id).removeprefix("job-")] = (int(row.position), explanation)
        conn.rollback()
    return out


def stored_job(store: EventStore, job_id: str) -> dict[str, Any] | None:
    """One job's row in the store's projections (a job the read model no longer holds: ADR 0070)."""
    t = schema.proj_jobs
    with store.engine.connect() as conn:
        row = conn.execute(select(t).where(t.c.job_id == job_id)).first()
        conn.rollback()
    return None if row is None else dict(row._mapping)


def stored_jobs_page(store: EventStore, *, projects: frozenset[str] | None, states: list[str] | None,
                     project: str | None, job_class: str | None, submitted_after: float | None,
                     submitted_before: float | None, after: Key | None, upto: Key | None, limit: int,
                     job_ids: frozenset[str] | None) -> list[dict[str, Any]]:
    """The jobs page from the store's projections, newest first, keyset-paginated on (submitted_at, job_id):
    keys below `after`, at most `upto` (the read model's horizon: the jobs it no longer holds are below)."""
    if limit <= 0 or (job_ids is not None and not job_ids) or (projects is not None and not projects):
        return []
    t = schema.proj_jobs
    q = select(t).order_by(t.c.submitted_at.desc(), t.c.job_id.desc()).limit(limit)
    if projects is not None:
        q = q.where(t.c.project.in_(sorted(projects)))
    if job_ids is not None:
        q = q.where(t.c.job_id.in_(sorted(job_ids)))
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
        q = q.where(or_(t.c.submitted_at < after[0], and_(t.c.submitted_at == after[0], t.c.job_id < after[1])))
    if upto is not None:
        q = q.where(or_(t.c.submitted_at < upto[0], and_(t.c.submitted_at == upto[0], t.c.job_id <= upto[1])))
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(q)]
        conn.rollback()
    return rows


class ReadModel:
    """The API's reads, from the read model in memory (`steward.api.live.LiveModel`, fed from the log's
    tail): no store round trip per request. The feed is caught up by the API's feeder task every
    `head_ttl_s` at most, and by a request that finds it older than that (one at a time: the others read
    what is published meanwhile, never older than `floor`)."""

    def __init__(self, store: EventStore, clock: Callable[[], float] = time.time, head_ttl_s: float = 0.3,
                 figures_ttl_s: float = 5.0, reach_timeout_s: float = 2.0, live: LiveModel | None = None,
                 keep_ended: int | None = None, figures_every_s: float = 1.0) -> None:
        """`keep_ended`: how many ended jobs the read model keeps in memory (`STEWARD_API_ENDED_JOBS_KEPT`,
        ADR 0070; None: all); the older ones are read from the store's projections on demand.
        `figures_every_s`: how often, at most, the figures are computed again while the log moves (ADR 0075).
        `figures_ttl_s` is the result cache's bucket."""
        self.store = store
        self.clock = clock
        self.head_ttl_s = head_ttl_s
        self.figures_ttl_s = figures_ttl_s
        self.figures_every_s = figures_every_s
        self.reach_timeout_s = reach_timeout_s
        self._figures_lock = threading.Lock()
        self._catch_up_lock = threading.Lock()
        # the highest position a mutation through this process saw: nothing older is ever served
        self.floor = 0
        self._checked = -math.inf  # monotonic time of the last catch-up that reached the store's head
        self.live = live or LiveModel(
            lambda after: events_for_fold(store, after), start=load_snapshot(store),
            deferred=lambda job_ids, upto: stored_deferrals(store, job_ids, upto), keep_ended=keep_ended,
            stored_job=lambda job_id: stored_job(store, job_id),
            stored_page=lambda **page: stored_jobs_page(store, **page))
        self._view: ReadView | None = None
        self._figures: dict[float, AsOf] = {}
        self.policy = PolicyQueue(store, clock=clock)

    # -- the feed ---------------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """Catch the read model up with the log when it was last caught up more than `head_ttl_s` ago (or
        `force`); while another thread is catching up, return at once (its result is published whole)."""
        if not force and time.monotonic() - self._checked < self.head_ttl_s:
            return
        if not self._catch_up_lock.acquire(blocking=force or self.live.position < self.floor):
            return
        try:
            started = time.monotonic()
            self.live.catch_up()
            self._checked = started
        finally:
            self._catch_up_lock.release()

    def reach(self, position: int) -> bool:
        """Read-your-writes: the read model at `position` or later (caught up now, retried for up to
        `reach_timeout_s`); nothing older than the highest such position is served from then on.
        Blocking: call in a thread (`reached` when on the event loop)."""
        self.floor = max(self.floor, position)
        deadline = time.monotonic() + self.reach_timeout_s
        while self.live.position < position:
            self.refresh(force=True)
            if self.live.position >= position or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return self.live.position >= position

    async def reached(self, position: int) -> bool:
        """`reach` from the event loop, without a thread when the model is already there."""
        self.floor = max(self.floor, position)
        if self.live.position >= position:
            return True
        return await asyncio.to_thread(self.reach, position)

    def saw(self, position: int) -> None:
        """A mutation's outcome was recorded at `position` (`reach` without waiting)."""
        self.floor = max(self.floor, position)

    def caught_up(self) -> bool:
        """Whether the read model has caught up with the log since the process started."""
        return self._checked > -math.inf

    def head(self) -> int:
        """The position the read model is at, caught up first when older than `head_ttl_s`."""
        self.refresh()
        return self.live.position

    def fresh_head(self) -> int | None:
        """The read model's position if it was caught up within `head_ttl_s` and is not behind `floor`,
        else None (read it with `head`)."""
        position = self.live.position
        fresh = time.monotonic() - self._checked < self.head_ttl_s and position >= self.floor
        return position if fresh else None

    def known_head(self) -> int:
        """The newest position this process has folded or been told of (no IO)."""
        return max(self.live.position, self.floor)

    # -- the dashboard's reads --------------------------------------------------------------------

    def _published_view(self) -> ReadView:
        published = self.live.published
        snap = self._view
        if snap is None or snap.head != published.position:
            snap = ReadView(published.position, published.allocations, published.nodes, published.active_jobs,
                            {a["name"]: a["parent"] for a in published.allocations}, self.policy,
                            published.recorded_at)
            self._view = snap
        return snap

    def cached_view(self) -> ReadView | None:
        """The read view when it is known to be current without reading the store (caught up within
        `head_ttl_s`), else None: callable on the event loop."""
        return self._published_view() if self.fresh_head() is not None else None

    def view(self) -> ReadView:
        """The projections at the read model's position (caught up first when older than `head_ttl_s`,
        and never behind `floor`)."""
        self.refresh()
        if self.live.position < self.floor:
            self.reach(self.floor)
        return self._published_view()

    def cached_figures(self, window_s: float) -> list[figures.AllocationFigures] | None:
        """`figures(window_s)` when they need no computation (no IO), else None."""
        snap = self.cached_view()
        hit = self._figures.get(window_s)
        return hit.figures if hit is not None and snap is not None and self._current(hit, snap.head) else None

    def cached_job_counts(self) -> dict[str, int] | None:
        """`job_counts()` when it is current (no IO), else None."""
        return self.live.published.counts if self.fresh_head() is not None else None

    def _current(self, hit: AsOf, head: int) -> bool:
        """Whether figures computed as of `hit.position` may answer a read at `head`: they are at `head` or
        newer, or, while the log moves, at most `figures_every_s` old (monotonic) and not older than `floor`
        (read-your-writes: never from before a mutation this process answered)."""
        if hit.position < self.floor:
            return False
        return hit.position >= head or time.monotonic() - hit.computed < self.figures_every_s

    def figures(self, window_s: float) -> list[figures.AllocationFigures]:
        """The budget figures (`steward.api.figures.compute`, the domain's rules) as of a log position (ADR
        0075): over the window ending when that position was recorded, from every event recorded before it,
        with what runs and waits at that position. Computed once per position and shared by every request
        and principal; while the log moves, at most once per `figures_every_s` (the figures answered are then
        as of an older position, exact for the window they state, never older than `floor`)."""
        snap = self.view()
        hit = self._figures.get(window_s)
        if hit is not None and self._current(hit, snap.head):
            return hit.figures
        if not self._figures_lock.acquire(blocking=False):
            # another thread is computing them: the previous figures meanwhile (see figures_head)
            if hit is not None and hit.position >= self.floor:
                return hit.figures
            self._figures_lock.acquire()
        try:
            hit = self._figures.get(window_s)
            if hit is not None and self._current(hit, snap.head):
                return hit.figures
            snap = self._published_view()  # the newest published: what it holds is all committed
            upto = (snap.head, snap.recorded_at) if snap.head > 0 else None
            books = figures.source_for(self.store).window(self.store, window_s, upto, empty_at=self.clock())
            if books.position != snap.head:  # the store's fold is past this model: its jobs, not older ones
                self.reach(books.position)
                snap = self._published_view()
            out = figures.compute(snap.allocations, snap.active_jobs, snap.capacity, books.as_of, window_s,
                                  books.books, books.split)
            if len(self._figures) > 16:
                self._figures.clear()
            self._figures[window_s] = AsOf(books.position, time.monotonic(), out)
            return out
        finally:
            self._figures_lock.release()

    def figures_head(self, window_s: float) -> int:
        """The position the last figures for `window_s` are as of (-1: none)."""
        hit = self._figures.get(window_s)
        return hit.position if hit is not None else -1

    def job(self, job_id: str) -> dict[str, Any] | None:
        self.view()
        return self.live.job(job_id)

    def cached_accepts(self, job_id: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """`accepts(job_id)` when the read model's fold holds the job (no IO), else None."""
        job = self.live.proj.jobs.get(job_id)
        return None if job is None else (job.gpu_models, job.clusters)

    def accepts(self, job_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The GPU models and clusters a job accepts, as it was submitted (empty: any): from the read model's
        fold when it holds the job (no IO), else from the job's `JobSubmitted` (a job that left memory,
        ADR 0070; the store's projection rows do not keep them)."""
        found = self.cached_accepts(job_id)
        if found is not None:
            return found
        for rec in self.store.stream(f"job-{job_id}"):
            if rec.type == "JobSubmitted":
                return tuple(rec.payload.get("gpu_models") or ()), tuple(rec.payload.get("clusters") or ())
        return (), ()

    def jobs_page(self, *, projects: frozenset[str] | None, states: list[str] | None, project: str | None,
                  job_class: str | None, submitted_after: float | None, submitted_before: float | None,
                  after: tuple[float, str] | None, limit: int,
                  job_ids: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Newest first, keyset-paginated on (submitted_at, job_id); `job_ids` narrows to those jobs ("mine")."""
        self.view()
        return self.live.jobs_page(projects=projects, states=states, project=project, job_class=job_class,
                                   submitted_after=submitted_after, submitted_before=submitted_before,
                                   after=after, limit=limit, job_ids=job_ids)

    def deferrals(self, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """The latest `JobDeferred` explanation of each (active) job (the scheduler's reason code, the
        amount blocking, its evidence), with the position it was recorded at."""
        return self.cached_deferrals(self.view().head, job_ids) or {}

    def cached_deferrals(self, head: int, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]] | None:
        """`deferrals(job_ids)` as published at `head` or later (no IO)."""
        published = self.live.published
        if published.position < head:
            return None
        return {j: published.deferrals[j] for j in job_ids if j in published.deferrals}

    def deferrals_at(self, head: int, job_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """`deferrals(job_ids)` at `head` or later."""
        if self.live.position < head:
            self.reach(head)
        return self.cached_deferrals(min(head, self.live.position), job_ids) or {}

    def job_counts(self) -> dict[str, int]:
        """Jobs per state."""
        self.view()
        return self.live.published.counts

    def counts_head(self) -> int:
        """The position the job counts are at."""
        return self.live.position
