"""The projections as of a past position, answered without building every job.

`StateAt` is a snapshot chain (`SnapshotView`: a base and the deltas after it; the job counts in the
newest header, a job's row read from the newest delta naming it or from the one base block holding it)
plus the jobs that the log's tail changed after the snapshot (folded by the domain's `evolve_job`, each
on the one job it names). The job counts need no job row but those of the tail's jobs; every job is
built only when asked for (`rows`, `state`, `jobs`). Equal to the reference fold by construction, and
checked against it at every position (tests/unit/store/contract.py).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from steward.domain.events import Event
from steward.domain.state import Job, LedgerState, evolve_job
from steward.store.projections import (
    JOB_LOCAL_EVENTS,
    Projector,
    allocation_row,
    job_row,
    node_row,
)
from steward.store.snapshotparts import STATE, SUBMITTED_AT, SnapshotView


class StateAt:
    """The ledger's state at `position`: a snapshot chain and the tail's jobs on top."""

    def __init__(self, view: SnapshotView | None, proj: Projector | None = None) -> None:
        if view is None:  # no snapshot: everything from a folded projector
            base = proj or Projector()
            self.allocations, self.nodes = base.allocations, base.nodes
            self.used, self.policy, self.namespaces = base.used, base.policy, base.namespaces
            self.positions = {k: p for k, p in base.positions.items() if k[0] != "j"}
            self.position, self.recorded_at, self.head_hash = base.position, base.recorded_at, base.head_hash
            self.changed: dict[str, Job] = dict(base.jobs)
            self.changed_at: dict[str, int] = {k: p for (t, k), p in base.positions.items() if t == "j"}
        else:
            self.allocations, self.nodes = view.allocations, view.nodes
            self.used, self.policy, self.namespaces = view.used, view.policy, view.namespaces
            self.positions = view.positions
            self.position, self.recorded_at, self.head_hash = view.position, view.recorded_at, view.head_hash
            self.changed, self.changed_at = {}, {}
        self._view = view
        self.snapshot_position = view.position if view else None

    # -- the snapshot's rows, read on first use --

    def _row(self, job_id: str) -> tuple[Any, ...] | None:
        return None if self._view is None else self._view.lookup([job_id])[job_id]

    def job(self, job_id: str) -> Job | None:
        if job_id in self.changed:
            return self.changed[job_id]
        row = self._row(job_id)
        return None if row is None else Job(*row[:-1])

    def prefetch(self, job_ids: Iterable[str]) -> None:
        """Read the rows of these jobs in as few fetches as possible (before folding a tail that names them)."""
        if self._view is not None:
            self._view.lookup(job_ids)

    # -- folding the tail --

    @staticmethod
    def folds(event: Event) -> bool:
        """Whether `apply` can fold this event (job-local: it reads and changes one job and the GPU use)."""
        return event.type in JOB_LOCAL_EVENTS and isinstance(event.payload.get("job_id"), str)

    def apply(self, event: Event, at: float, position: int, event_hash: str | None = None) -> None:
        """Fold one job-local event (as `Projector._apply_job_local`); others raise ValueError."""
        if not self.folds(event):
            raise ValueError(f"time travel folds job-local events only, not {event.type}")
        job_id = event.payload["job_id"]
        step = evolve_job(self.job(job_id), self.used, event, at)
        if step is not None:
            job, self.used = step
            self.changed[job.job_id] = job
            self.changed_at[job.job_id] = position
        self.position, self.recorded_at = position, at
        if event_hash is not None:
            self.head_hash = event_hash

    # -- answers --

    def job_counts(self) -> dict[str, int]:
        """Jobs per state (the snapshot's counts, corrected by the tail's jobs)."""
        counts: Counter[str] = Counter(self._view.counts if self._view else {})
        for job_id, job in self.changed.items():
            row = self._row(job_id)
            if row is not None:
                counts[row[STATE]] -= 1
            counts[job.state] += 1
        return {s: n for s, n in sorted(counts.items()) if n}

    def _all_rows(self) -> Iterator[tuple[Any, ...]]:
        if self._view is not None:
            yield from self._view.rows()

    def jobs(self) -> dict[str, Job]:
        """Every job (reads every row block)."""
        out = {row[0]: Job(*row[:-1]) for row in self._all_rows()}
        out.update(self.changed)
        return out

    def first_jobs(self, n: int) -> list[Job]:
        """The first `n` jobs by (submitted_at, job_id), building only those (the API's `stateAt` page):
        from the base's first rows and the deltas when they reach `n`, else from every row block."""
        if n <= 0:
            return []
        sub, changed = SUBMITTED_AT, self.changed
        rows = self._view.first_rows(n, set(changed)) if self._view is not None else []
        if rows is None:
            rows = [r for r in self._all_rows() if r[0] not in changed]
        best = [Job(*r[:-1]) for r in heapq.nsmallest(n, rows, key=lambda r: (r[sub], r[0]))]
        return heapq.nsmallest(n, [*best, *changed.values()], key=lambda j: (j.submitted_at, j.job_id))

    def job_positions(self) -> dict[str, int]:
        out = {row[0]: row[-1] for row in self._all_rows()}
        out.update(self.changed_at)
        return out

    def state(self) -> LedgerState:
        return LedgerState(dict(self.allocations), dict(self.nodes), self.jobs(), dict(self.used), dict(self.policy),
                           dict(self.namespaces))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The projection rows, as `Projector.rows` gives them."""
        pos, jobs, job_pos = self.positions, self.jobs(), self.job_positions()
        return {
            "proj_allocations": [allocation_row(a, pos[("a", n)]) for n, a in sorted(self.allocations.items())],
            "proj_nodes": [node_row(x, pos[("n", n)]) for n, x in sorted(self.nodes.items())],
            "proj_jobs": [job_row(j, job_pos[k]) for k, j in sorted(jobs.items())],
        }
