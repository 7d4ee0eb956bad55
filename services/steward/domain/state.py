"""The ledger's state, folded from events by `evolve` (pure, no IO)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from steward.domain.commands import ROOT
from steward.domain.events import Event
from steward.domain.protection import protection_s

JOB_STATES = (
    "QUEUED", "PLACED", "RUNNING", "COMPLETED", "FAILED", "PREEMPTED", "CANCELLED",
    # LOST and PREEMPTED are followed by JobRequeued in the same transaction (back to QUEUED);
    # SUSPENDED is a session stopped at its cap (restorable); RESTORED is one that was restored.
    "LOST", "SUSPENDED", "RESTORED",
)
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "RESTORED"})
ACTIVE_STATES = frozenset({"PLACED", "RUNNING"})


_T = TypeVar("_T")
_new = object.__new__
_UNSET: Any = object()
_REPLACERS: dict[type, Callable[..., Any]] = {}


def _replacer(cls: type) -> Callable[..., Any]:
    """A copy-with-changes function for one frozen, slotted class, generated once: one keyword-only
    parameter per field (so Python's own argument parsing refuses an unknown name, with the TypeError
    `dataclasses.replace` raises), and each slot set through its member descriptor's bound `__set__`
    (the cheapest way to fill a slot of a frozen class; `object.__setattr__` is ~1.6x slower)."""
    names = tuple(f.name for f in fields(cls))
    for name in names:
        if not name.isidentifier():
            raise TypeError(f"{cls.__name__}: field {name!r} is not an identifier")
    env: dict[str, Any] = {"_new": _new, "_cls": cls, "_UNSET": _UNSET}
    env.update({f"_set_{name}": getattr(cls, name).__set__ for name in names})
    params = ", ".join(f"{name}=_UNSET" for name in names)
    body = "".join(f"    _set_{name}(out, obj.{name} if {name} is _UNSET else {name})\n" for name in names)
    src = f"def replace_{cls.__name__}(obj, /, *, {params}):\n    out = _new(_cls)\n{body}    return out\n"
    exec(src, env)  # generated from the class's own field names, checked above
    fn: Callable[..., Any] = env[f"replace_{cls.__name__}"]
    _REPLACERS[cls] = fn
    return fn


def replace(obj: _T, /, **changes: Any) -> _T:
    """`dataclasses.replace` for this module's frozen, slotted state classes, about three times faster
    (the ledger copies a job record per event, a rebuild folds millions): a function generated once per
    class copies the fields without re-running `__init__`. The classes have no `__post_init__` or
    init-only fields, so the result equals what `dataclasses.replace` builds, and an unknown name raises
    the same TypeError (tests/unit/domain/test_evolve.py)."""
    fn = _REPLACERS.get(type(obj)) or _replacer(type(obj))
    out: _T = fn(obj, **changes)
    return out


@dataclass(frozen=True, slots=True)
class AllocationNode:
    name: str
    parent: str
    share: float


@dataclass(frozen=True, slots=True)
class ClusterNode:
    node_id: str
    gpus: int
    gpu_model: str
    path: tuple[str, ...]
    executor: str
    state: str = "ready"


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    project: str
    gpus: int
    min_runtime_s: float
    command: tuple[str, ...]
    resumable: bool
    job_class: str
    priority: int
    submitted_at: float
    state: str = "QUEUED"
    attempt: int = 0
    assignments: tuple[tuple[str, tuple[int, ...]], ...] = ()
    funded: bool = False
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    # the time-slicing contract (plain values only: snapshots marshal every field)
    protected_until: float | None = None
    protection_revoked: bool = False
    preemption_requested_at: float | None = None  # a recorded request, pending until the stop is reported
    preemption_reason: str | None = None
    preemption_grace_s: float | None = None
    preemption_requeue: bool = True
    preemption_for: str = ""
    preemptions: int = 0
    losses: int = 0
    last_checkpoint_at: float | None = None
    checkpoint_path: str | None = None
    resume_from: str | None = None
    requeued_at: float | None = None
    # interactive sessions
    session_cap_at: float | None = None
    cap_reached_at: float | None = None
    idle_since: float | None = None
    restored_from: str | None = None
    restored_to: str | None = None
    preferred_node: str | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.assignments)

    @property
    def preempting(self) -> bool:
        return self.preemption_requested_at is not None


# `replace` for job records without the generic call's keyword repacking (the ledger's hottest copy), and a
# record with every default from which a submitted job is built the same way (equal to `Job(...)`).
_replace_job: Callable[..., Job] = _replacer(Job)
_NEW_JOB = Job("", "", 0, 0.0, (), False, "batch", 0, 0.0)


@dataclass(frozen=True, slots=True)
class LedgerState:
    allocations: dict[str, AllocationNode] = field(default_factory=dict)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    # node id -> GPU indices held by non-terminal placed/running jobs
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    # the policy settings in force (overrides of the steward preset), set by `PolicySet`
    policy: dict[str, Any] = field(default_factory=dict)

    def children(self, parent: str) -> dict[str, AllocationNode]:
        return {n: a for n, a in self.allocations.items() if a.parent == parent}

    def is_project(self, name: str) -> bool:
        """A project is a leaf of the allocation tree."""
        allocations = self.allocations
        return name in allocations and all(a.parent != name for a in allocations.values())

    def depth(self, name: str) -> int:
        depth = 0
        while name != ROOT and name in self.allocations:
            name = self.allocations[name].parent
            depth += 1
        return depth

    def free_gpus(self, node_id: str) -> frozenset[int]:
        node = self.nodes[node_id]
        return frozenset(range(node.gpus)) - self.used.get(node_id, frozenset())


def _release(state: LedgerState, job: Job) -> dict[str, frozenset[int]]:
    return _released(state.used, job)


def _released(used: dict[str, frozenset[int]], job: Job) -> dict[str, frozenset[int]]:
    used = dict(used)
    for node_id, gpus in job.assignments:
        used[node_id] = used.get(node_id, frozenset()) - frozenset(gpus)
    return used


def _evolve_node(state: LedgerState, event: Event, at: float) -> LedgerState:
    p = event.payload
    node = state.nodes.get(p["node_id"])
    if node is None:
        return state
    if event.type == "NodeDrainRequested":
        node = replace(node, state="draining")
    elif event.type == "NodeResumed":
        node = replace(node, state="ready")
    return replace(state, nodes={**state.nodes, node.node_id: node})


# A job with no preemption pending (merged into the other changes of an event: one copy of the job).
_NO_PREEMPTION: dict[str, Any] = {"preemption_requested_at": None, "preemption_reason": None,
                                  "preemption_grace_s": None, "preemption_requeue": True, "preemption_for": ""}


_YIELDED: dict[str, Any] = {k: v for k, v in _NO_PREEMPTION.items() if k != "preemption_for"}


def _set_node_states(state: LedgerState, node_ids: Any, from_state: str, to_state: str) -> LedgerState:
    changed = {n: replace(state.nodes[n], state=to_state) for n in node_ids
               if n in state.nodes and state.nodes[n].state == from_state}
    return replace(state, nodes={**state.nodes, **changed}) if changed else state


def _ended_protection(job: Job, at: float) -> float:
    return at if job.protected_until is None else min(job.protected_until, at)


def _evolve_job(job: Job, event: Event, at: float) -> Job:
    """The contract's and the sessions' events on one job (placement and release are done by the caller)."""
    p: dict[str, Any] = event.payload
    kind = event.type
    if kind == "JobStarted":
        started = p.get("started_at") or at
        until = p.get("protected_until")
        if until is None:
            until = started + protection_s(job.job_class, job.min_runtime_s, job.funded)
        return _replace_job(job, state="RUNNING", started_at=started, protected_until=until)
    if kind == "JobPreemptionRequested":
        return _replace_job(job, preemption_requested_at=at, preemption_reason=p["reason"],
                       preemption_grace_s=p["grace_s"], preemption_requeue=p["requeue"],
                       preemption_for=p.get("for_job_id", ""))
    if kind == "JobPreempted":
        if p.get("checkpoint_path"):
            job = _replace_job(job, checkpoint_path=p["checkpoint_path"],
                          last_checkpoint_at=p.get("checkpoint_at") or job.last_checkpoint_at)
        if p.get("requeue", True):
            # the requeued job keeps `preemption_for`: whom it stopped for, and (with `requeued_at`)
            # when its GPUs were freed, which the scheduler holds for that job (ADR 0021)
            return _replace_job(job, **_YIELDED, preemptions=job.preemptions + 1,
                           exit_code=p.get("exit_code"), idle_since=None, state="PREEMPTED")
        return _replace_job(job, **_NO_PREEMPTION, preemptions=job.preemptions + 1, exit_code=p.get("exit_code"),
                       idle_since=None, state="SUSPENDED", ended_at=at)
    if kind == "JobLost":
        return _replace_job(job, **_NO_PREEMPTION, state="LOST", losses=job.losses + 1, idle_since=None)
    if kind == "JobRequeued":
        return _replace_job(job, state="QUEUED", resume_from=p.get("resume_from"), requeued_at=at)
    if kind == "CheckpointSaved":
        job = _replace_job(job, checkpoint_path=p["path"], last_checkpoint_at=p["saved_at"])
        if job.state == "QUEUED" and job.resumable:  # saved during the stop, reported after the requeue
            job = _replace_job(job, resume_from=p["path"])
        return job
    if kind == "SessionOpened":
        return _replace_job(job, session_cap_at=p["cap_at"])
    if kind == "SessionCapReached":
        return _replace_job(job, protected_until=_ended_protection(job, at), cap_reached_at=at)
    if kind == "ProtectionRevoked":
        return _replace_job(job, protection_revoked=True, protected_until=_ended_protection(job, at))
    if kind == "SessionIdle":
        return _replace_job(job, idle_since=p["since"])
    if kind == "SessionActive":
        return _replace_job(job, idle_since=None)
    if kind == "SessionRestored":
        return _replace_job(job, state="RESTORED", restored_to=p["new_job_id"])
    return job


# Event types that read and change only the job they name (and the GPU use): `evolve_job` folds them
# without the rest of the state, so a fold costs O(1) per event whatever the number of jobs.
JOB_LOCAL_EVENTS = frozenset({
    "JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted", "JobFailed", "JobCancelled",
})
_ENDED = {"JobCompleted": "COMPLETED", "JobFailed": "FAILED", "JobCancelled": "CANCELLED"}


def evolve_job(job: Job | None, used: dict[str, frozenset[int]], event: Event,
               at: float) -> tuple[Job, dict[str, frozenset[int]]] | None:
    """`evolve` for a job-local event (`JOB_LOCAL_EVENTS`): the job it names after the event (`job` is
    that job before it, None when unknown) and the GPU use after it; None when the event changes
    nothing (it names an unknown job)."""
    p: dict[str, Any] = event.payload
    kind = event.type
    if kind == "JobSubmitted":
        return _replace_job(
            _NEW_JOB, job_id=p["job_id"], project=p["project"], gpus=p["gpus"], min_runtime_s=p["min_runtime_s"],
            command=tuple(p["command"]), resumable=p["resumable"], job_class=p["job_class"],
            priority=p["priority"], submitted_at=p["submitted_at"], resume_from=p.get("resume_from"),
            restored_from=p.get("restored_from"), preferred_node=p.get("preferred_node"),
        ), used
    if job is None:
        return None
    if kind == "JobPlaced":
        assignments = tuple((n, tuple(g)) for n, g in sorted(p["assignments"].items()))
        job = _replace_job(job, state="PLACED", attempt=p["attempt"], assignments=assignments, funded=p["funded"],
                      protected_until=None, protection_revoked=False, session_cap_at=None,
                      cap_reached_at=None, idle_since=None, **_NO_PREEMPTION)
        used = dict(used)
        for node_id, gpus in assignments:
            used[node_id] = used.get(node_id, frozenset()) | frozenset(gpus)
        return job, used
    if kind in _ENDED:
        if job.state in ACTIVE_STATES:
            used = _released(used, job)
        return _replace_job(job, **_NO_PREEMPTION, state=_ENDED[kind], ended_at=at, exit_code=p.get("exit_code")), used
    return _evolve_job(job, event, at), used


def evolve(state: LedgerState, event: Event, at: float) -> LedgerState:
    """Apply one recorded event to the state. Unknown event types leave the state unchanged."""
    p: dict[str, Any] = event.payload
    if event.type in JOB_LOCAL_EVENTS:
        job_id = p.get("job_id")
        step = evolve_job(state.jobs.get(job_id) if isinstance(job_id, str) else None, state.used, event, at)
        if step is None:
            return state
        job, used = step
        return replace(state, jobs={**state.jobs, job.job_id: job}, used=used)
    if event.type == "AllocationsSet":
        allocations = dict(state.allocations)
        for child, share in p["shares"].items():
            allocations[child] = AllocationNode(child, p["parent"], float(share))
        return replace(state, allocations=allocations)
    if event.type == "PolicySet":
        return replace(state, policy=dict(p["settings"]))
    if event.type == "NodeRegistered":
        node = ClusterNode(p["node_id"], p["gpus"], p["gpu_model"], tuple(p["path"]), p["executor"])
        return replace(state, nodes={**state.nodes, node.node_id: node})
    if event.type in ("NodeDrainRequested", "NodeDrained", "NodeResumed"):
        return _evolve_node(state, event, at)
    if event.type == "ExecutorHeartbeat":
        return _set_node_states(state, p.get("recovered", ()), "unhealthy", "ready")
    job_id = p.get("job_id")
    if job_id is None or job_id not in state.jobs:
        return state
    job = state.jobs[job_id]
    used = state.used
    if event.type in ("JobPreempted", "JobLost"):
        if job.state in ACTIVE_STATES:
            used = _release(state, job)
        job = _evolve_job(job, event, at)
        if event.type == "JobLost":
            state = _set_node_states(state, p.get("unhealthy", ()), "ready", "unhealthy")
    else:
        job = _evolve_job(job, event, at)
    return replace(state, jobs={**state.jobs, job_id: job}, used=used)
