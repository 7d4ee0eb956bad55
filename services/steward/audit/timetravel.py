"""The projections as of a past position, answered without building every job.

`StateAt` is a snapshot's parts (`SnapshotParts`: the header with allocations, nodes and GPU use; the
jobs' id and state columns and row blocks read from the stored blob only when needed) plus the jobs that
the log's tail changed after the snapshot (folded by the domain's `evolve_job`, each on the one job it
names, found by binary search in the ids and read from its row block). The job counts need the ids and
states only; every job is built only when asked for (`rows`, `state`, `jobs`). Equal to the reference
fold by construction, and checked against it at every position (tests/unit/store/contract.py).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
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

_SUBMITTED_AT = JOB_FIELDS.index("submitted_at")


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
        self.snapshot_position = parts.position if parts else None
        self._id_list: list[str] | None = None

    # -- the snapshot's parts, read on first use --

    def _ids(self) -> list[str]:
        if self._id_list is None:
            self._id_list = self._parts.ids() if self._parts else []
        return self._id_list

    def _index(self, job_id: str) -> int | None:
        ids = self._ids()
        i = bisect_left(ids, job_id)
        return i if i < len(ids) and ids[i] == job_id else None

    def _row(self, job_id: str) -> tuple[Any, ...] | None:
        i = self._index(job_id)
        if i is None or self._parts is None:
            return None
        size = self._parts.block_size
        return self._parts.blocks([i // size])[0][i % size]

    def job(self, job_id: str) -> Job | None:
        if job_id in self.changed:
            return self.changed[job_id]
        row = self._row(job_id)
        return None if row is None else Job(*row[:-1])

    def prefetch(self, job_ids: Iterable[str]) -> None:
        """Read the row blocks holding these jobs in one fetch (before folding a tail that names them)."""
        if self._parts is None:
            return
        found = (self._index(j) for j in job_ids)
        self._parts.blocks(sorted({i // self._parts.block_size for i in found if i is not None}))

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
        """Jobs per state (reads the ids and the states only, plus the tail's jobs)."""
        states = self._parts.states() if self._parts else []
        counts = Counter(states)
        for job_id, job in self.changed.items():
            i = self._index(job_id)
            if i is not None:
                counts[states[i]] -= 1
            counts[job.state] += 1
        return {s: n for s, n in sorted(counts.items()) if n}

    def _all_rows(self) -> Iterator[tuple[Any, ...]]:
        if self._parts is not None:
            for rows in self._parts.blocks(range(self._parts.block_count)):
                yield from rows

    def jobs(self) -> dict[str, Job]:
        """Every job (reads every row block)."""
        out = {row[0]: Job(*row[:-1]) for row in self._all_rows()}
        out.update(self.changed)
        return out

    def first_jobs(self, n: int) -> list[Job]:
        """The first `n` jobs by (submitted_at, job_id): reads every row block but builds only the `n`
        jobs it returns (the API's `stateAt` page)."""
        if n <= 0:
            return []
        sub, changed = _SUBMITTED_AT, self.changed
        rows = (r for r in self._all_rows() if r[0] not in changed)
        best = [Job(*r[:-1]) for r in heapq.nsmallest(n, rows, key=lambda r: (r[sub], r[0]))]
        return heapq.nsmallest(n, [*best, *changed.values()], key=lambda j: (j.submitted_at, j.job_id))

    def job_positions(self) -> dict[str, int]:
        out = {row[0]: row[-1] for row in self._all_rows()}
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
