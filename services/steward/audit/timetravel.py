"""The projections as of a past position, answered without building every job.

`StateAt` is a snapshot's parts (`SnapshotParts`: allocations, nodes and GPU use decoded; the jobs still
one marshalled column per field, sorted by id) plus the jobs that the log's tail changed after the
snapshot (folded by the domain's `evolve_job`, each on the one job it names, read from the columns by
binary search). The job counts need only the `state` column; the whole job table is materialised only
when asked for (`rows`, `state`, `jobs`). Equal to the reference fold by construction, and checked
against it at random positions (tests/unit/store/contract.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Any

from steward.domain.events import Event
from steward.domain.state import Job, LedgerState, evolve_job
from steward.store.projections import (
    JOB_FIELDS,
    JOB_LOCAL_EVENTS,
    Projector,
    SnapshotParts,
    allocation_row,
    job_row,
    node_row,
)

_STATE = JOB_FIELDS.index("state")
_POSITION = len(JOB_FIELDS)


class StateAt:
    """The ledger's state at `position`: a snapshot's columns and the tail's jobs on top."""

    def __init__(self, parts: SnapshotParts | None, proj: Projector | None = None) -> None:
        if parts is None:  # no snapshot: everything from a folded projector (no columns)
            base = proj or Projector()
            self.allocations, self.nodes = base.allocations, base.nodes
            self.used, self.policy = base.used, base.policy
            self.positions = {k: p for k, p in base.positions.items() if k[0] != "j"}
            self.position, self.recorded_at, self.head_hash = base.position, base.recorded_at, base.head_hash
            self.changed: dict[str, Job] = dict(base.jobs)
            self.changed_at: dict[str, int] = {k: p for (t, k), p in base.positions.items() if t == "j"}
        else:
            self.allocations, self.nodes = parts.allocations, parts.nodes
            self.used, self.policy = parts.used, parts.policy
            self.positions = parts.positions
            self.position, self.recorded_at, self.head_hash = parts.position, parts.recorded_at, parts.head_hash
            self.changed, self.changed_at = {}, {}
        self._parts = parts
        self._columns: dict[int, list[Any]] = {}

    # -- the snapshot's columns, loaded on first use --

    def _column(self, index: int) -> list[Any]:
        if self._parts is None:
            return []
        col = self._columns.get(index)
        if col is None:
            col = self._columns[index] = self._parts.column(index)
        return col

    def _index(self, job_id: str) -> int | None:
        ids = self._column(0)
        i = bisect_left(ids, job_id)
        return i if i < len(ids) and ids[i] == job_id else None

    def job(self, job_id: str) -> Job | None:
        if job_id in self.changed:
            return self.changed[job_id]
        i = self._index(job_id)
        if i is None:
            return None
        return Job(*(self._column(c)[i] for c in range(len(JOB_FIELDS))))

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
        """Jobs per state (reads the `state` column only, plus the tail's jobs)."""
        counts = Counter(self._column(_STATE))
        states = self._column(_STATE)
        for job_id, job in self.changed.items():
            i = self._index(job_id)
            if i is not None:
                counts[states[i]] -= 1
            counts[job.state] += 1
        return {s: n for s, n in sorted(counts.items()) if n}

    def jobs(self) -> dict[str, Job]:
        """Every job (materialises the columns)."""
        columns = [self._column(c) for c in range(len(JOB_FIELDS))]
        out = dict(zip(columns[0], map(Job, *columns), strict=True)) if columns[0] else {}
        out.update(self.changed)
        return out

    def job_positions(self) -> dict[str, int]:
        out = dict(zip(self._column(0), self._column(_POSITION), strict=True))
        out.update(self.changed_at)
        return out

    def state(self) -> LedgerState:
        return LedgerState(dict(self.allocations), dict(self.nodes), self.jobs(), dict(self.used), dict(self.policy))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """The projection rows, as `Projector.rows` gives them."""
        pos, jobs, job_pos = self.positions, self.jobs(), self.job_positions()
        return {
            "proj_allocations": [allocation_row(a, pos[("a", n)]) for n, a in sorted(self.allocations.items())],
            "proj_nodes": [node_row(x, pos[("n", n)]) for n, x in sorted(self.nodes.items())],
            "proj_jobs": [job_row(j, job_pos[k]) for k, j in sorted(jobs.items())],
        }
