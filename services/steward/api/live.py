"""The read model in memory: the ledger's projections folded from the log's tail, in order, by the same
`Projector` the ledger and the rebuild use (one home for the fold), published after each batch as
immutable pieces the requests read without a store round trip (ADR 0047).

One feeder per API process: `catch_up` reads the events after the last folded position (one indexed range
query; nothing when the log has not moved) and folds them under a lock; readers never take that lock.
What a request reads was published whole at one position: the active jobs' rows, the nodes and
allocations, the job counts per state, the scheduler's latest deferral of each waiting job, and the
job ids in submission order (for the jobs list). A single job is looked up in the projector's job table
(a dict read: atomic), so it may be newer than the published position, never older.

Read-your-writes is `ReadModel.reach`'s: a mutation's answer waits until the fold is at its position."""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from steward.domain.events import Event
from steward.domain.state import Job
from steward.store.projector import Projector, allocation_row, job_row, node_row

ACTIVE = frozenset({"QUEUED", "PREEMPTED", "PLACED", "RUNNING"})
Fold = Iterable[tuple[int, Event, float, str]]


@dataclass(frozen=True, slots=True)
class Published:
    """What the read model holds at one position; never changed once published."""

    position: int
    allocations: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    active_jobs: list[dict[str, Any]]
    counts: dict[str, int]
    # job id -> (position, explanation) of its latest `JobDeferred`, for the jobs still waiting
    deferrals: dict[str, tuple[int, dict[str, Any]]]
    order: list[tuple[float, str]] = field(repr=False)  # (submitted_at, job_id), oldest first


def _changed_jobs(keys: Iterable[tuple[str, str]]) -> Iterator[str]:
    return (k for kind, k in keys if kind == "j")


class LiveModel:
    """The projections of the log up to `position`, kept in memory (see the module's docstring)."""

    def __init__(self, read_after: Callable[[int], Fold], start: Projector | None = None,
                 deferred: Callable[[list[str], int], dict[str, tuple[int, dict[str, Any]]]] | None = None) -> None:
        """`start`: a stored state (a snapshot) to follow the log from; `deferred(job_ids, position)` then
        gives the latest `JobDeferred` of each of its waiting jobs up to its position, which a snapshot's
        projections do not hold (without it, a job deferred before the snapshot showed no reason)."""
        self.read_after = read_after
        self.proj = start or Projector()
        self._fold_lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}  # active jobs' rows
        self._counts: Counter[str] = Counter()
        self._deferrals: dict[str, tuple[int, dict[str, Any]]] = {}
        self._order: list[tuple[float, str]] = []
        self._known: dict[str, tuple[str, float]] = {}  # job id -> (state, submitted_at) as indexed
        for job_id, job in self.proj.jobs.items():
            self._index(job_id, job, ordered=False)
        self._order.sort()
        if start is not None and deferred is not None and self._rows:
            self._deferrals.update(deferred(sorted(self._rows), self.proj.position))
        self.published = self._publish()

    @property
    def position(self) -> int:
        return self.published.position

    def job(self, job_id: str) -> dict[str, Any] | None:
        """One job's row (any state), at the published position or newer."""
        job = self.proj.jobs.get(job_id)
        return None if job is None else job_row(job, self.proj.positions.get(("j", job_id), 0))

    def catch_up(self) -> int:
        """Fold the events recorded since `position`; returns how many were folded."""
        with self._fold_lock:
            folded = 0
            proj = self.proj
            for position, event, at, event_hash in self.read_after(proj.position):
                if position <= proj.position:
                    continue
                changed = proj.apply(event, at, position, event_hash)
                for job_id in _changed_jobs(changed):
                    self._index(job_id, proj.jobs.get(job_id))
                if event.type == "JobDeferred":
                    self._defer(position, event)
                folded += 1
            if folded:
                self.published = self._publish()
            return folded

    # -- the published pieces ---------------------------------------------------------------------

    def _index(self, job_id: str, new: Job | None, ordered: bool = True) -> None:
        """Move one job's entries in the indexes from what they last knew of it to `new` (None: gone); the
        order is kept sorted in place (published as a copy) unless `ordered` is False (sorted afterwards)."""
        old = self._known.get(job_id)
        if old is not None:
            self._counts[old[0]] -= 1
            if not self._counts[old[0]]:
                del self._counts[old[0]]
        if new is None:
            self._rows.pop(job_id, None)
            self._deferrals.pop(job_id, None)
            if old is not None:
                del self._known[job_id]
                i = bisect.bisect_left(self._order, (old[1], job_id))
                if i < len(self._order) and self._order[i][1] == job_id:
                    del self._order[i]
            return
        self._counts[new.state] += 1
        if old is None:
            key = (new.submitted_at, job_id)
            order = self._order
            if not ordered or not order or order[-1] < key:
                order.append(key)
            else:
                bisect.insort(order, key)
        self._known[job_id] = (new.state, old[1] if old is not None else new.submitted_at)
        if new.state in ACTIVE:
            self._rows[job_id] = job_row(new, self.proj.positions.get(("j", job_id), 0))
        else:
            self._rows.pop(job_id, None)
        if new.state not in ACTIVE:
            self._deferrals.pop(job_id, None)  # kept while the job may wait again (a requeue)

    def _defer(self, position: int, event: Event) -> None:
        job_id = event.payload.get("job_id")
        explanation = event.payload.get("explanation")
        if isinstance(job_id, str) and isinstance(explanation, dict) and job_id in self._rows:  # an active job
            self._deferrals[job_id] = (position, explanation)

    def _publish(self) -> Published:
        proj = self.proj
        pos = proj.positions
        return Published(
            position=proj.position,
            allocations=[allocation_row(a, pos.get(("a", n), 0)) for n, a in sorted(proj.allocations.items())],
            nodes=[node_row(x, pos.get(("n", n), 0)) for n, x in sorted(proj.nodes.items())],
            active_jobs=list(self._rows.values()),
            counts=dict(self._counts),
            deferrals=dict(self._deferrals),
            order=list(self._order),
        )

    # -- the jobs list ----------------------------------------------------------------------------

    def jobs_page(self, *, projects: frozenset[str] | None, states: list[str] | None, project: str | None,
                  job_class: str | None, submitted_after: float | None, submitted_before: float | None,
                  after: tuple[float, str] | None, limit: int,
                  job_ids: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Newest first, keyset-paginated on (submitted_at, job_id): the rows `ReadModel.jobs_page` reads
        from the store, from memory; `job_ids` narrows to those jobs ("mine")."""
        published = self.published
        order = published.order
        end = len(order)
        if after is not None:
            end = bisect.bisect_left(order, after)
        if submitted_before is not None:
            end = min(end, bisect.bisect_left(order, (submitted_before, "")))
        wanted = frozenset(states) if states else None
        jobs, positions = self.proj.jobs, self.proj.positions
        out: list[dict[str, Any]] = []
        for i in range(end - 1, -1, -1):
            at, job_id = order[i]
            if submitted_after is not None and at < submitted_after:
                break
            job = jobs.get(job_id)
            if job is None or (job_ids is not None and job_id not in job_ids) \
                    or (projects is not None and job.project not in projects) \
                    or (wanted is not None and job.state not in wanted) \
                    or (project and job.project != project) or (job_class and job.job_class != job_class):
                continue
            out.append(job_row(job, positions.get(("j", job_id), 0)))
            if len(out) >= limit:
                break
        return out
