"""The read model in memory: the ledger's projections folded from the log's tail, in order, by the same
`Projector` the ledger and the rebuild use (one home for the fold), published after each batch as
immutable pieces the requests read without a store round trip (ADR 0047).

One feeder per API process: `catch_up` reads the events after the last folded position (one indexed range
query; nothing when the log has not moved) and folds them under a lock; readers never take that lock.
What a request reads was published whole at one position: the active jobs' rows, the nodes and
allocations, the job counts per state and the scheduler's latest deferral of each waiting job. A single
job is looked up in the projector's job table (a dict read: atomic), so it may be newer than the
published position, never older. The jobs list walks the job ids in submission order, kept sorted in
place (a short lock of its own, taken a chunk at a time by readers), so a batch costs what it changed,
not the history.

Retention (ADR 0070): the model keeps every job that has not ended and the newest `keep_ended` ended jobs
(in the order they ended); an older ended job leaves memory (its count per state stays: an ended job's
state never changes again) and is read from the store's projections on demand (`stored_job`,
`stored_page`), which are at least as new as the model. The jobs list reads the jobs submitted after the
newest job that left (`horizon`) from memory and the rest from the store.

Read-your-writes is `ReadModel.reach`'s: a mutation's answer waits until the fold is at its position."""

from __future__ import annotations

import bisect
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from steward.domain.events import Event
from steward.domain.state import TERMINAL_STATES, Job
from steward.store.projector import Projector, allocation_row, job_row, node_row

ACTIVE = frozenset({"QUEUED", "PREEMPTED", "PLACED", "RUNNING"})
Fold = Iterable[tuple[int, Event, float, str]]
Key = tuple[float, str]  # (submitted_at, job_id): the jobs list's order
CHUNK = 256  # job ids a reader copies from the order per hold of its lock


class StoredPage(Protocol):
    """The jobs page from the store's projections (`ReadModel.jobs_page`'s filters), newest first, with
    keys below `after` (exclusive) and at most `upto` (inclusive)."""

    def __call__(self, *, projects: frozenset[str] | None, states: list[str] | None, project: str | None,
                 job_class: str | None, submitted_after: float | None, submitted_before: float | None,
                 after: Key | None, upto: Key | None, limit: int,
                 job_ids: frozenset[str] | None) -> list[dict[str, Any]]: ...


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
    recorded_at: float = 0.0  # when `position` was recorded (0.0: an empty log): what the figures run to (ADR 0075)


def _changed_jobs(keys: Iterable[tuple[str, str]]) -> Iterator[str]:
    return (k for kind, k in keys if kind == "j")


class LiveModel:
    """The projections of the log up to `position`, kept in memory (see the module's docstring)."""

    def __init__(self, read_after: Callable[[int], Fold], start: Projector | None = None,
                 deferred: Callable[[list[str], int], dict[str, tuple[int, dict[str, Any]]]] | None = None,
                 *, keep_ended: int | None = None, stored_job: Callable[[str], dict[str, Any] | None] | None = None,
                 stored_page: StoredPage | None = None) -> None:
        """`start`: a stored state (a snapshot) to follow the log from; `deferred(job_ids, position)` then
        gives the latest `JobDeferred` of each of its waiting jobs up to its position, which a snapshot's
        projections do not hold (without it, a job deferred before the snapshot showed no reason).
        `keep_ended`: how many ended jobs stay in memory (None: all); the older ones are read with
        `stored_job` and `stored_page` (both required with a `keep_ended`)."""
        if keep_ended is not None and (keep_ended < 0 or stored_job is None or stored_page is None):
            raise ValueError("keep_ended needs a count of 0 or more and the store's stored_job and stored_page")
        self.read_after = read_after
        self.keep_ended = keep_ended
        self.stored_job = stored_job
        self.stored_page = stored_page
        self.proj = start or Projector()
        self._fold_lock = threading.Lock()
        self._order_lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}  # active jobs' rows
        self._counts: Counter[str] = Counter()
        self._deferrals: dict[str, tuple[int, dict[str, Any]]] = {}
        self._order: list[Key] = []  # (submitted_at, job_id) of the jobs in memory, oldest first
        self._known: dict[str, tuple[str, float]] = {}  # job id -> (state, submitted_at) as indexed
        self._ended: OrderedDict[str, None] = OrderedDict()  # ended jobs in memory, in the order they ended
        # the largest key of a job that left memory: every job with a larger key is in memory (None: none left)
        self.horizon: Key | None = None
        self.evicted = 0
        ended = sorted(((j.ended_at or 0.0, k) for k, j in self.proj.jobs.items() if j.state in TERMINAL_STATES))
        for _, job_id in ended:
            self._ended[job_id] = None
        for job_id, job in self.proj.jobs.items():
            self._index(job_id, job, ordered=False)
        self._order.sort()
        self._evict()
        if start is not None and deferred is not None and self._rows:
            self._deferrals.update(deferred(sorted(self._rows), self.proj.position))
        self.published = self._publish(None)

    @property
    def position(self) -> int:
        return self.published.position

    def job(self, job_id: str) -> dict[str, Any] | None:
        """One job's row (any state), at the published position or newer: from memory, or from the store
        when some ended jobs have left memory and this one is not in it."""
        job = self.proj.jobs.get(job_id)
        if job is not None:
            return job_row(job, self.proj.positions.get(("j", job_id), 0))
        if self.horizon is not None and self.stored_job is not None:
            return self.stored_job(job_id)
        return None

    def catch_up(self) -> int:
        """Fold the events recorded since `position`; returns how many were folded."""
        with self._fold_lock:
            folded = 0
            proj = self.proj
            kinds: set[str] = set()
            for position, event, at, event_hash in self.read_after(proj.position):
                if position <= proj.position:
                    continue
                changed = proj.apply(event, at, position, event_hash)
                for kind, key in changed:
                    kinds.add(kind)
                    if kind == "j":
                        self._index(key, proj.jobs.get(key))
                if event.type == "JobDeferred":
                    self._defer(position, event)
                folded += 1
            if folded:
                self._evict()
                self.published = self._publish(kinds)
            return folded

    def size(self) -> dict[str, int]:
        """How many entries each of the model's per-job tables holds (the retention's bound: tests, bench)."""
        return {"jobs": len(self.proj.jobs), "positions": sum(1 for k in self.proj.positions if k[0] == "j"),
                "order": len(self._order), "known": len(self._known), "ended": len(self._ended),
                "active_rows": len(self._rows), "deferrals": len(self._deferrals)}

    # -- the published pieces ---------------------------------------------------------------------

    def _index(self, job_id: str, new: Job | None, ordered: bool = True) -> None:
        """Move one job's entries in the indexes from what they last knew of it to `new` (None: gone); the
        order is kept sorted in place unless `ordered` is False (sorted afterwards)."""
        old = self._known.get(job_id)
        if old is not None:
            self._counts[old[0]] -= 1
            if not self._counts[old[0]]:
                del self._counts[old[0]]
        if new is None:
            self._rows.pop(job_id, None)
            self._deferrals.pop(job_id, None)
            self._ended.pop(job_id, None)
            if old is not None:
                del self._known[job_id]
                self._unorder((old[1], job_id))
            return
        self._counts[new.state] += 1
        if old is None:
            key = (new.submitted_at, job_id)
            with self._order_lock:
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
        if ordered and new.state in TERMINAL_STATES and (old is None or old[0] not in TERMINAL_STATES):
            self._ended[job_id] = None

    def _defer(self, position: int, event: Event) -> None:
        job_id = event.payload.get("job_id")
        explanation = event.payload.get("explanation")
        if isinstance(job_id, str) and isinstance(explanation, dict) and job_id in self._rows:  # an active job
            self._deferrals[job_id] = (position, explanation)

    def _unorder(self, key: Key) -> None:
        with self._order_lock:
            i = bisect.bisect_left(self._order, key)
            if i < len(self._order) and self._order[i] == key:
                del self._order[i]

    def _evict(self) -> None:
        """The ended jobs beyond `keep_ended` leave memory, oldest ended first. Their counts stay (an ended
        job's state never changes again: `TERMINAL_STATES`), and later events naming them change nothing
        here (the fold ignores a job it does not hold; the store's projections have them)."""
        keep = self.keep_ended
        if keep is None:
            return
        proj = self.proj
        while len(self._ended) > keep:
            job_id, _ = self._ended.popitem(last=False)
            known = self._known.pop(job_id, None)
            proj.jobs.pop(job_id, None)
            proj.positions.pop(("j", job_id), None)
            self._rows.pop(job_id, None)
            self._deferrals.pop(job_id, None)
            if known is not None:
                key = (known[1], job_id)
                self._unorder(key)
                if self.horizon is None or key > self.horizon:
                    self.horizon = key
            self.evicted += 1

    def _publish(self, kinds: set[str] | None) -> Published:
        """The pieces at the projector's position; `kinds`: the kinds of rows the batch changed (None:
        any), so a batch that touched only jobs reuses the previous allocations and nodes as they are."""
        proj = self.proj
        pos = proj.positions
        previous = getattr(self, "published", None)
        allocations = previous.allocations if previous is not None and kinds is not None and "a" not in kinds \
            else [allocation_row(a, pos.get(("a", n), 0)) for n, a in sorted(proj.allocations.items())]
        nodes = previous.nodes if previous is not None and kinds is not None and "n" not in kinds \
            else [node_row(x, pos.get(("n", n), 0)) for n, x in sorted(proj.nodes.items())]
        return Published(
            position=proj.position,
            allocations=allocations,
            nodes=nodes,
            active_jobs=list(self._rows.values()),
            counts=dict(self._counts),
            deferrals=dict(self._deferrals),
            recorded_at=proj.recorded_at,
        )

    # -- the jobs list ----------------------------------------------------------------------------

    def jobs_page(self, *, projects: frozenset[str] | None, states: list[str] | None, project: str | None,
                  job_class: str | None, submitted_after: float | None, submitted_before: float | None,
                  after: Key | None, limit: int,
                  job_ids: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Newest first, keyset-paginated on (submitted_at, job_id): the rows `ReadModel.jobs_page` read
        from the store before, from memory down to the retention's `horizon` and from the store below it;
        `job_ids` narrows to those jobs ("mine")."""
        wanted = frozenset(states) if states else None
        jobs, positions = self.proj.jobs, self.proj.positions
        out: list[dict[str, Any]] = []
        keys: list[Key] = []  # the key of each row of `out`
        cursor: Key | None = after
        if submitted_before is not None and (cursor is None or (submitted_before, "") < cursor):
            cursor = (submitted_before, "")
        horizon = self.horizon
        walking, older = True, True  # older: jobs submitted before the walk's end may still be wanted
        while walking and len(out) < limit:
            with self._order_lock:
                order = self._order
                end = len(order) if cursor is None else bisect.bisect_left(order, cursor)
                low = 0 if horizon is None else bisect.bisect_right(order, horizon)
                chunk = order[max(low, end - CHUNK):end] if end > low else []
            if not chunk:
                break
            cursor = chunk[0]
            for at, job_id in reversed(chunk):
                if submitted_after is not None and at < submitted_after:
                    walking = older = False
                    break
                job = jobs.get(job_id)
                if job is None or (job_ids is not None and job_id not in job_ids) \
                        or (projects is not None and job.project not in projects) \
                        or (wanted is not None and job.state not in wanted) \
                        or (project and job.project != project) or (job_class and job.job_class != job_class):
                    continue
                out.append(job_row(job, positions.get(("j", job_id), 0)))
                keys.append((at, job_id))
                if len(out) >= limit:
                    walking = False
                    break
        now_horizon = self.horizon
        if now_horizon is None or self.stored_page is None:
            return out
        # jobs at or below the horizon are read from the store (which is complete and at least as new); a
        # job that left memory while this walked is among them (rows at or below it are dropped here)
        dropped = False
        while keys and keys[-1] <= now_horizon:
            keys.pop()
            out.pop()
            dropped = True
        if len(out) >= limit or not (older or dropped):
            return out
        below = keys[-1] if keys else after
        if submitted_before is not None and (below is None or (submitted_before, "") < below):
            below = (submitted_before, "")
        rest = self.stored_page(projects=projects, states=states, project=project, job_class=job_class,
                                submitted_after=submitted_after, submitted_before=submitted_before, after=below,
                                upto=now_horizon, limit=limit - len(out), job_ids=job_ids)
        return out + rest
