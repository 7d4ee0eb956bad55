"""Binding off the per-pod Temporal path (ADR 0088): the Kubernetes executor binds the pods of the placements it
reads from Steward's API, and the JobRun's `start_job` then finds them bound and returns at once.

Before, every Binding waited for the JobRun workflow's `start_job` activity: a placement went through the events
topic, the dispatcher, a workflow task and the executor's activity queue, behind the Temporal server's writes
(ADR 0074: 212 s in the queue, p50, with the executor idle). Now the executor also follows its own jobs' streams
in the log (`auditEvents` filtered to `job-<executor>.`, after a cursor it keeps, with the read-only token it
already holds for ADR 0054's reads; never the Kafka events topic, ADR 0036) and binds each new placement at once:

- **only its own**: a job it submitted (its id starts `<executor>.`, its manifest is on disk), placed by the log
  on this executor (`executor` in `JobPlaced`) on nodes it registered;
- **attempts fence**: only the job's latest placed attempt while the log shows it placed or running, never one
  older than an attempt this executor has a record of (`fence`); the same fence refuses an old attempt's
  `start_job`;
- **gangs all or none**: the same `_bind` as the activity's (ADR 0083); a gang's failed bind is undone and
  remembered, and the attempt's `start_job` fails with that reason (non-retryable: the JobRun reports it lost and
  the ledger requeues the job, as before). A single pod's failed bind is left to `start_job` (retried there).
- **the JobRun keeps the contract**: the record of a bind made here is `fast` until `start_job` claims it (fills
  in the grace and the command from the run, reports the start); a pod seen running before that is started from
  then (protection and charging run from when the pod ran). Timers, preemption, loss: the workflow's, unchanged.
- **nothing left unowned**: an attempt bound here that the log ends (cancelled, lost, requeued) before any
  `start_job` claims it has its pods deleted (`orphans`). At start-up `reconcile` asks Temporal only about
  claimed attempts (an unclaimed one has no JobRun yet by design).

`follow`, `fence`, `bindable` and `orphans` are pure (the rules); `PlacementFeed` is the HTTP read; `FastBinds`
does the IO, in the executor's threads, one attempt at a time (a lock per attempt shared with `start_job`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from temporalio.exceptions import ApplicationError

from steward.config import Settings
from steward.executor.attempts import AttemptRecord, AttemptStore, read_json, write_json
from steward.executor.kubernetes_api import KubeError
from steward.executor.kubernetes_pods import ATTEMPT_LABEL, PodProblem, pod_labels
from steward.executor.kubernetes_steward import StewardApi, StewardUnreachable
from steward_workflows.payloads import ContractTimings, JobRunInput

log = logging.getLogger("steward.executor.kubernetes_binds")

JOB_STREAM = "job-"
PLACED = "JobPlaced"
# events after which a job's attempt is no longer placed or running (JobStarted keeps it current)
ENDS = frozenset({"JobCancelled", "JobLost", "JobRequeued", "JobPreempted", "JobCompleted", "JobFailed"})
TYPES = (PLACED, *sorted(ENDS))
QUERY = """query($first: Int!, $after: String, $jobs: String!, $types: [String!]) {
  auditEvents(first: $first, after: $after, filter: {streamPrefix: $jobs, types: $types}) {
    edges { node { streamId type payload } } pageInfo { endCursor hasNextPage }
  }
}"""
BIND_THREADS = 8
SUPERSEDED = "StewardAttemptSuperseded"
BIND_UNDONE = "StewardBindUndone"  # the same type as the activity's (steward.executor.kubernetes)


@dataclass(frozen=True, slots=True)
class Placement:
    """A placement the log recorded for one of this executor's jobs (from its `JobPlaced`)."""

    job_id: str
    attempt: int
    executor: str
    assignments: dict[str, list[int]]
    job_class: str = "batch"


@dataclass(frozen=True, slots=True)
class Current:
    """A job's latest placed attempt, and whether the log still shows it placed or running."""

    attempt: int
    live: bool


@dataclass(slots=True)
class Book:
    """What the log said so far of this executor's jobs: each job's latest attempt, and the live placements."""

    current: dict[str, Current] = field(default_factory=dict)
    placed: dict[tuple[str, int], Placement] = field(default_factory=dict)


def follow(book: Book, events: Iterable[Mapping[str, Any]]) -> list[Placement]:
    """Fold events of jobs' streams (the API's `streamId`, `type`, `payload`, in log order) into `book`; the
    placements they recorded, in order (a placement already ended by a later event of the same read is not
    among them)."""
    new: list[Placement] = []
    for event in events:
        stream = str(event.get("streamId") or "")
        if not stream.startswith(JOB_STREAM):
            continue
        job_id, kind, p = stream[len(JOB_STREAM):], str(event.get("type") or ""), event.get("payload") or {}
        if kind == PLACED:
            try:
                attempt = int(p["attempt"])
                assignments = {str(n): [int(g) for g in gs] for n, gs in dict(p["assignments"]).items()}
            except (KeyError, TypeError, ValueError):
                continue
            seen = book.current.get(job_id)
            if seen is not None and (attempt < seen.attempt or (attempt == seen.attempt and not seen.live)):
                continue  # a stale read (an old attempt, or one ended): the log never goes back
            for old in [k for k in book.placed if k[0] == job_id]:
                del book.placed[old]
            placement = Placement(job_id, attempt, str(p.get("executor") or ""), assignments,
                                  str(p.get("job_class") or "batch"))
            book.current[job_id] = Current(attempt, True)
            book.placed[(job_id, attempt)] = placement
            new.append(placement)
        elif kind in ENDS:
            now = book.current.get(job_id)
            try:
                attempt = int(p.get("attempt") or (now.attempt if now is not None else 0))
            except (TypeError, ValueError):
                continue
            if now is None and attempt > 0:  # placed before this process read (a restart): ended all the same
                book.current[job_id] = Current(attempt, False)
            elif now is not None and attempt >= now.attempt:
                book.current[job_id] = Current(now.attempt, False)
                book.placed.pop((job_id, now.attempt), None)
    return [p for p in new if (p.job_id, p.attempt) in book.placed]


def fence(attempt: int, recorded: Iterable[int]) -> str | None:
    """Why an attempt must not be bound given the attempts this executor has records of (None: it may): never an
    old attempt beside a newer one."""
    newer = [a for a in recorded if a > attempt]
    if newer:
        return f"attempt {max(newer)} is newer"
    return None


def bindable(p: Placement, executor_id: str, nodes: Iterable[str], current: Current | None,
             recorded: Iterable[int], submitted: bool) -> str | None:
    """Why the executor does not bind `p` itself (None: it binds it): not a job it submitted, placed by the log on
    another executor or on a node it did not register, no longer the job's live attempt, or fenced."""
    if not p.job_id.startswith(f"{executor_id}.") or not submitted:
        return "not a job this executor submitted"
    if p.executor != executor_id:
        return f"placed on executor {p.executor!r}"
    foreign = sorted(set(p.assignments) - set(nodes))
    if foreign or not p.assignments:
        return f"placed on nodes this executor did not register: {', '.join(foreign) or 'none'}"
    if current is None or current != Current(p.attempt, True):
        return "no longer the job's live attempt"
    recorded = list(recorded)
    if p.attempt in recorded:
        return "bound already"
    return fence(p.attempt, recorded)


def orphans(unclaimed: Iterable[tuple[str, int]], current: Mapping[str, Current]) -> list[tuple[str, int]]:
    """The attempts bound here and not claimed by a `start_job` that the log no longer shows placed or running (a
    job cancelled, lost or requeued before its JobRun began): their pods must go. A job the log said nothing of is
    left (the read has not reached it)."""
    out = []
    for job_id, attempt in unclaimed:
        now = current.get(job_id)
        if now is not None and now != Current(attempt, True):
            out.append((job_id, attempt))
    return out


def claimed(rec: AttemptRecord) -> bool:
    """Whether a `start_job` has taken the attempt (every attempt bound by one; a fast bind once claimed)."""
    return not rec.extra.get("fast") or bool(rec.extra.get("claimed"))


FeedUnreachable = StewardUnreachable  # the API did not answer the placements read (one line saying why)


class PlacementFeed:
    """This executor's jobs' placements and ends from the API (`auditEvents`), after a cursor, `first` events a page,
    up to `pages` pages a read, through the executor's one connection to the API (`StewardApi`: its URL, token file,
    executor id and HTTP client)."""

    def __init__(self, api: StewardApi, first: int = 500, pages: int = 20) -> None:
        self.api = api
        self.first = first
        self.pages = pages

    def read(self, after: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """The events after `after` (up to `pages` pages) and the cursor to read on from."""
        events: list[dict[str, Any]] = []
        for _ in range(self.pages):
            variables = {"first": self.first, "after": after, "jobs": f"{JOB_STREAM}{self.api.executor_id}.",
                         "types": list(TYPES)}
            data = self.api.ask(QUERY, variables)
            page = data.get("auditEvents") or {}
            events += [e["node"] for e in page.get("edges") or [] if e.get("node")]
            info = page.get("pageInfo") or {}
            after = info.get("endCursor") or after
            if not info.get("hasNextPage"):
                break
        return events, after


class Binder(Protocol):
    """What `FastBinds` uses of the Kubernetes executor (steward.executor.kubernetes.KubernetesExecutor)."""

    settings: Settings
    root: Path
    attempts: AttemptStore
    _open_attempts: set[tuple[str, int]]
    _changed: asyncio.Event

    @property
    def registered(self) -> Mapping[str, Any]: ...

    def manifest(self, job_id: str) -> dict[str, Any] | None: ...

    def _bind(self, run: JobRunInput) -> AttemptRecord: ...

    def pods_of(self, rec: AttemptRecord) -> list[dict[str, Any] | None]: ...

    def pods_viewed(self) -> Mapping[str, Mapping[str, Any]]: ...

    def delete_pods(self, rec: AttemptRecord, grace_s: int, reason: str) -> bool: ...


Reader = Callable[[str | None], tuple[list[dict[str, Any]], str | None]]


class FastBinds:
    """The executor's binds from the placements it reads (see the module's doc)."""

    def __init__(self, executor: Binder, read: Reader | None = None) -> None:
        self.executor = executor
        self.read = read
        self.path = executor.root / "binds.json"
        saved = read_json(self.path) or {}
        self.cursor: str | None = saved.get("cursor")
        self.failed: dict[str, str] = dict(saved.get("failed") or {})  # "<job>/<attempt>" -> the gang's failure
        self.book = Book()
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self.bound = 0  # binds made here (a figure for the logs and the tests)

    # -- one attempt at a time, shared with start_job ------------------------------------------------

    @contextlib.contextmanager
    def _lock(self, job_id: str, attempt: int) -> Any:
        with self._guard:
            lock = self._locks.setdefault((job_id, attempt), threading.Lock())
        with lock:
            yield

    def _recorded(self, job_id: str) -> list[int]:
        try:
            folder = self.executor.attempts.job_dir(job_id)
        except Exception:  # an id that is no path (UnsafePath): nothing recorded
            return []
        out = []
        for path in folder.glob("attempt-*.json"):
            with contextlib.suppress(ValueError):
                out.append(int(path.stem.removeprefix("attempt-")))
        return out

    def _save(self) -> None:
        write_json(self.path, {"cursor": self.cursor, "failed": self.failed})

    def for_start(self, run: JobRunInput) -> AttemptRecord:
        """`start_job`'s record of the attempt (blocking; in a thread): a bind made here claimed (the run's grace,
        command and class filled in), a gang's failed bind here raised again, an attempt older than one recorded
        refused; otherwise bound now as before."""
        with self._lock(run.job_id, run.attempt):
            ex = self.executor
            why = fence(run.attempt, self._recorded(run.job_id))
            if why:  # never an old attempt beside a newer one, even one this executor bound or started
                raise ApplicationError(f"job {run.job_id} attempt {run.attempt} not started: {why}", type=SUPERSEDED,
                                       non_retryable=True)
            rec = ex.attempts.load(run.job_id, run.attempt)
            if rec is not None:
                if claimed(rec):
                    return rec
                return ex.attempts.update(rec, command=list(run.command), job_class=run.job_class,
                                          extra=rec.extra | {"grace_s": run.timings.grace_s, "claimed": True})
            failure = self.failed.get(f"{run.job_id}/{run.attempt}")
            if failure:
                raise ApplicationError(failure, type=BIND_UNDONE, non_retryable=True)
            return ex._bind(run)

    # -- the executor's own binds ------------------------------------------------------------------

    def bind(self, p: Placement) -> str:
        """Bind one placement's pods unless a start did (blocking). What happened, in a word."""
        ex = self.executor
        with self._lock(p.job_id, p.attempt):
            why = bindable(p, ex.settings.executor_id, ex.registered, self.book.current.get(p.job_id),
                           self._recorded(p.job_id), ex.manifest(p.job_id) is not None)
            if why:
                return why
            run = JobRunInput(p.job_id, p.attempt, p.executor, [], dict(p.assignments), job_class=p.job_class,
                              timings=ContractTimings())
            try:
                rec = ex._bind(run)
            except ApplicationError as err:
                if err.type == BIND_UNDONE:  # the gang's binds were undone: its start fails with this reason
                    self.failed[f"{p.job_id}/{p.attempt}"] = err.message
                    self._save()
                log.warning("job %s attempt %s not bound here (its start will try or report it): %s", p.job_id,
                            p.attempt, err.message)
                return "failed"
            except (KubeError, PodProblem) as err:
                log.warning("job %s attempt %s not bound here (its start will try): %s", p.job_id, p.attempt, err)
                return "failed"
            extra = {k: v for k, v in rec.extra.items() if k != "grace_s"} | {"fast": True}
            ex.attempts.update(rec, extra=extra)
            self.bound += 1
            return "bound"

    def unclaimed(self) -> list[AttemptRecord]:
        ex = self.executor
        return [r for job_id, attempt in sorted(ex._open_attempts)
                if (r := ex.attempts.load(job_id, attempt)) is not None and not claimed(r)]

    def mark_running(self, view: Mapping[str, Mapping[str, Any]], now: float) -> int:
        """Unclaimed binds whose pods the last round's list shows past Pending: started from now (the time a
        `start_job` reports, so protection and charging run from when the pods ran). How many."""
        marked = 0
        for rec in self.unclaimed():
            pods = [view.get(k) for k in rec.extra.get("pods") or []]
            if rec.started_at or not pods or any(p is None for p in pods):
                continue
            if all(p is not None and p.get("status", {}).get("phase") not in (None, "Pending") for p in pods):
                with self._lock(rec.job_id, rec.attempt):
                    current = self.executor.attempts.load(rec.job_id, rec.attempt)
                    if current is not None and not current.started_at:
                        self.executor.attempts.update(current, started_at=now)
                        marked += 1
        return marked

    def sweep(self) -> list[tuple[str, int]]:
        """Delete the pods of unclaimed binds the log has ended (`orphans`). The attempts swept."""
        recs = {(r.job_id, r.attempt): r for r in self.unclaimed()}
        gone = []
        for ident in orphans(recs, self.book.current):
            with self._lock(*ident):
                rec = self.executor.attempts.load(*ident)
                if rec is None or claimed(rec):
                    continue
                rec = self.executor.attempts.update(rec, killed=True, extra=rec.extra | {"claimed": True,
                                                                                         "swept": True})
                with contextlib.suppress(KubeError):  # only this attempt's pods: a newer one's may have their names
                    pods = [k for k, p in zip(rec.extra.get("pods") or [], self.executor.pods_of(rec), strict=True)
                            if p is not None and pod_labels(p).get(ATTEMPT_LABEL) == str(rec.attempt)]
                    self.executor.delete_pods(replace(rec, extra=rec.extra | {"pods": pods}), 0,
                                              f"Steward's log ended job {rec.job_id} attempt {rec.attempt} before "
                                              "it started; its pods are deleted")
                log.info("job %s attempt %s: ended in the log before its start; pods deleted", *ident)
                gone.append(ident)
        waiting = {job_id for job_id, _ in recs} - {job_id for job_id, _ in gone}
        for job_id in [j for j, c in self.book.current.items() if not c.live and j not in waiting]:
            del self.book.current[job_id]  # ended and nothing of it left to delete: the book stays small
        return gone

    def step(self, pool: ThreadPoolExecutor | None = None) -> dict[str, int]:
        """One read of the log after the cursor: new placements bound (by `pool`'s threads when given), running
        pods marked, orphans swept. Counts of what happened."""
        if self.read is None:
            return {}
        events, cursor = self.read(self.cursor)
        new = follow(self.book, events)
        mine = [p for p in new if p.executor == self.executor.settings.executor_id]
        outcomes = list(pool.map(self.bind, mine)) if pool is not None and len(mine) > 1 else \
            [self.bind(p) for p in mine]
        if cursor != self.cursor:
            self.cursor = cursor
            self._save()
        marked = self.mark_running(self.executor.pods_viewed(), time.time())
        swept = self.sweep()
        return {"read": len(events), "bound": outcomes.count("bound"), "failed": outcomes.count("failed"),
                "started": marked, "swept": len(swept)}

    async def run(self, stop: asyncio.Event, every_s: float) -> None:
        """`step` every `every_s` until `stop` (a failed read is logged and tried again)."""
        if self.read is None:  # no API to read placements from: every bind is its start's
            return
        with ThreadPoolExecutor(max_workers=BIND_THREADS, thread_name_prefix="k8s-bind") as pool:
            while not stop.is_set():
                try:
                    done = await asyncio.to_thread(self.step, pool)
                    if done["bound"] or done["failed"] or done["swept"]:
                        log.info("placements read: %s", ", ".join(f"{k} {v}" for k, v in done.items()))
                        self.executor._changed.set()
                except FeedUnreachable as err:
                    log.warning("placements not read (their starts bind them): %s", err)
                except Exception:
                    log.exception("placements not bound")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=every_s)

