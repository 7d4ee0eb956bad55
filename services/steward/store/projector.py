"""The projector: the ledger state folded event by event (the pure domain `evolve`, handed only the job an
event names for the job-local event types, so a fold costs O(1) per event instead of copying every job),
with the position of the last event that changed each projection row, and the rows a batch changed
(`capture`). Pure (the SQL is in `steward.store.projections`); the ledger runs it for every event, so it
is compiled with mypyc (ADR 0020)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from steward.domain.events import Event
from steward.domain.state import JOB_LOCAL_EVENTS as STATE_JOB_LOCAL_EVENTS
from steward.domain.state import AllocationNode, ClusterNode, Job, LedgerState, evolve, evolve_job

# Event types whose `evolve` reads and changes only the job named by `payload["job_id"]` (besides the
# GPU use): they are folded by the domain's `evolve_job` on that job alone. Any other type is folded on
# the whole state (correct for anything `evolve` does, at the cost of its dict copies).
JOB_LOCAL_EVENTS = STATE_JOB_LOCAL_EVENTS

Key = tuple[str, str]  # ("a" | "n" | "j", key)


def _changed(before: dict[str, Any], after: dict[str, Any], kind: str) -> list[Key]:
    if after is before:
        return []
    out = [(kind, k) for k, v in after.items() if before.get(k) is not v]
    out += [(kind, k) for k in before if k not in after]
    return out


@dataclass(slots=True)
class Projector:
    """The ledger state folded event by event, with the position of the last event that changed each
    row (for the projections)."""

    allocations: dict[str, AllocationNode] = field(default_factory=dict)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    namespaces: dict[tuple[str, str], str] = field(default_factory=dict)
    positions: dict[Key, int] = field(default_factory=dict)
    position: int = 0
    recorded_at: float = 0.0
    head_hash: str = "0" * 64
    # open undo frames, oldest first: (scalars before the batch, jobs before, positions before)
    _frames: list[tuple[Any, dict[str, Job | None], dict[Key, int | None]]] = field(default_factory=list)

    def view(self) -> LedgerState:
        """The whole state without copying (for the pure, read-only `decide`)."""
        return LedgerState(self.allocations, self.nodes, self.jobs, self.used, self.policy, self.namespaces)

    def begin(self) -> None:
        """Start recording what `apply` changes in a new undo frame, so that `rollback` can undo a failed
        batch. Frames stack: the ledger decides the next batch while the one before commits."""
        self._frames.append(((self.allocations, self.nodes, self.used, self.policy, self.namespaces, self.position,
                              self.recorded_at, self.head_hash), {}, {}))

    def rollback(self) -> None:
        """Undo every open frame, newest first (the batches after a failed one were decided on it)."""
        while self._frames:
            self.rollback_newest()

    def rollback_newest(self) -> None:
        """Undo the newest open frame only (a batch that failed while being decided)."""
        if self._frames:
            undo, undo_jobs, undo_positions = self._frames.pop()
            (self.allocations, self.nodes, self.used, self.policy, self.namespaces, self.position,
             self.recorded_at, self.head_hash) = undo
            for job_id, job in undo_jobs.items():
                if job is None:
                    self.jobs.pop(job_id, None)
                else:
                    self.jobs[job_id] = job
            for key, pos in undo_positions.items():
                if pos is None:
                    self.positions.pop(key, None)
                else:
                    self.positions[key] = pos

    def commit(self) -> None:
        """The oldest open frame's batch is durable: forget how to undo it."""
        if self._frames:
            self._frames.pop(0)

    def apply(self, event: Event, at: float, position: int, event_hash: str | None = None) -> list[Key]:
        """Fold one recorded event; returns the rows it changed."""
        payload = event.payload
        job_id = payload.get("job_id")
        if event.type in JOB_LOCAL_EVENTS and isinstance(job_id, str):
            changed = self._apply_job_local(event, at, position, job_id)
        else:
            changed = self._apply_whole(event, at, position)
        self.position, self.recorded_at = position, at
        if event_hash is not None:
            self.head_hash = event_hash
        return changed

    def _apply_job_local(self, event: Event, at: float, position: int, job_id: str) -> list[Key]:
        old = self.jobs.get(job_id)
        step = evolve_job(old, self.used, event, at)
        if step is None:
            return []
        job, self.used = step
        key = ("j", job.job_id)
        if self._frames:
            _, undo_jobs, undo_positions = self._frames[-1]
            if key not in undo_positions:
                undo_positions[key] = self.positions.get(key)
            if job.job_id not in undo_jobs:
                undo_jobs[job.job_id] = self.jobs.get(job.job_id)
        self.jobs[job.job_id] = job
        self.positions[key] = position
        return [key]

    def _apply_whole(self, event: Event, at: float, position: int) -> list[Key]:
        after = evolve(self.view(), event, at)
        new_jobs = after.jobs
        changed = _changed(self.jobs, new_jobs, "j")
        changed += _changed(self.allocations, after.allocations, "a")
        changed += _changed(self.nodes, after.nodes, "n")
        recording = bool(self._frames)
        undo_jobs, undo_positions = (self._frames[-1][1], self._frames[-1][2]) if recording else ({}, {})
        for kind, key in changed:
            if recording and (kind, key) not in undo_positions:
                undo_positions[(kind, key)] = self.positions.get((kind, key))
            if kind == "j":
                if recording and key not in undo_jobs:
                    undo_jobs[key] = self.jobs.get(key)
                if key in new_jobs:
                    self.jobs[key] = new_jobs[key]
                    self.positions[("j", key)] = position
                else:
                    self.jobs.pop(key, None)
                    self.positions.pop(("j", key), None)
            else:
                table = after.allocations if kind == "a" else after.nodes
                if key in table:
                    self.positions[(kind, key)] = position
                else:
                    self.positions.pop((kind, key), None)
        self.allocations, self.nodes, self.used, self.policy = after.allocations, after.nodes, after.used, after.policy
        self.namespaces = after.namespaces
        return changed

    def state(self) -> LedgerState:
        return LedgerState(dict(self.allocations), dict(self.nodes), dict(self.jobs), dict(self.used),
                           dict(self.policy), dict(self.namespaces))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        pos = self.positions
        return {
            "proj_allocations": [allocation_row(a, pos[("a", n)]) for n, a in sorted(self.allocations.items())],
            "proj_nodes": [node_row(x, pos[("n", n)]) for n, x in sorted(self.nodes.items())],
            "proj_jobs": [job_row(j, pos[("j", k)]) for k, j in sorted(self.jobs.items())],
        }


def fold_events(events: Iterable[tuple[int, Event, float]], start: Projector | None = None) -> Projector:
    proj = start or Projector()
    for position, ev, at in events:
        proj.apply(ev, at, position)
    return proj


# ------------------------------------------------------------------------------------ rebuild + checksums


def job_row(job: Job, position: int) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "project": job.project,
        "state": job.state,
        "gpus": job.gpus,
        "min_runtime_s": job.min_runtime_s,
        "resumable": int(job.resumable),
        "job_class": job.job_class,
        "priority": job.priority,
        "command": list(job.command),
        "submitted_at": job.submitted_at,
        "attempt": job.attempt,
        "assignments": {n: list(g) for n, g in job.assignments},
        "funded": int(job.funded),
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "exit_code": job.exit_code,
        "position": position,
        # the contract times of the current attempt as its events recorded them (JobStarted.protected_until,
        # SessionOpened.cap_at and warnings_at; cut short by SessionCapReached/ProtectionRevoked), None while
        # the job waits for an attempt: read, never computed here (DESIGN.md "The time-slicing contract")
        "protected_until": job.protected_until,
        "session_cap_at": job.session_cap_at,
        "session_warnings_at": None if job.session_warnings_at is None else list(job.session_warnings_at),
        # where a running session's current attempt can be reached, as it published it (SessionAddressPublished)
        "session_address": job.session_address,
    }


def node_row(node: ClusterNode, position: int) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "gpus": node.gpus,
        "gpu_model": node.gpu_model,
        "path": list(node.path),
        "executor": node.executor,
        "state": node.state,
        "position": position,
        "foreign_gpus": node.foreign_gpus,
        "cluster": node.cluster,
    }


def allocation_row(a: AllocationNode, position: int) -> dict[str, Any]:
    return {"name": a.name, "parent": a.parent, "share": a.share, "position": position,
            "debug_quota_gpus": a.debug_quota_gpus, "display_name": a.display_name, "pin": a.pin}


@dataclass(frozen=True, slots=True)
class ChangedRows:
    """The projection rows a batch changed, as they were at the end of that batch: (key, record or None
    when the row is gone, position) per table. Records are frozen, so holding them is a snapshot; the
    ledger writes these while it decides the next batch."""

    allocations: list[tuple[str, AllocationNode | None, int]]
    nodes: list[tuple[str, ClusterNode | None, int]]
    jobs: list[tuple[str, Job | None, int]]
    # job rows the projection did not hold before this batch (so no earlier batch left a row to replace:
    # the writer skips their DELETE, ADR 0022); empty when unknown (every row is replaced)
    new_jobs: frozenset[str] = frozenset()


def capture(proj: Projector, changed: Iterable[tuple[str, str]]) -> ChangedRows:
    """The rows `changed` as they are now. Called for the batch of the newest open frame (`begin`), it also
    names the jobs that frame found absent: absent after every earlier batch, including those still being
    written, which are committed before this one or not at all (a failed batch aborts the ones after it)."""
    keys: dict[str, set[str]] = {"a": set(), "n": set(), "j": set()}
    for kind, key in changed:
        keys[kind].add(key)
    pos = proj.positions
    allocations, nodes, jobs = proj.allocations, proj.nodes, proj.jobs
    new_jobs: frozenset[str] = frozenset()
    if proj._frames:
        before = proj._frames[-1][1]  # job id -> the job before this batch (None: absent)
        new_jobs = frozenset([k for k in keys["j"] if k in before and before[k] is None])
    return ChangedRows(
        [(k, allocations.get(k), pos.get(("a", k), 0)) for k in sorted(keys["a"])],
        [(k, nodes.get(k), pos.get(("n", k), 0)) for k in sorted(keys["n"])],
        [(k, jobs.get(k), pos.get(("j", k), 0)) for k in sorted(keys["j"])],
        new_jobs,
    )
