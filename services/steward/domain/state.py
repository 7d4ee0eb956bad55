"""The ledger's state, folded from events by `evolve` (pure, no IO)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from steward.domain.clusters import DEFAULT_CLUSTER
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
_FIELD_NAMES: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _field_names(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    names = tuple(f.name for f in fields(cls))
    _FIELD_NAMES[cls] = (names, frozenset(names))
    return names, frozenset(names)


def _unknown_field(cls: type, changes: dict[str, Any], known: frozenset[str]) -> TypeError:
    """The TypeError `dataclasses.replace` raises for a name the class does not have."""
    name = sorted(set(changes) - known)[0]
    return TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument '{name}'")


def replace(obj: _T, /, **changes: Any) -> _T:
    """`dataclasses.replace` for this module's frozen, slotted state classes, without its per-field
    checks: the class is called with every field positionally, changed or kept. The classes have no
    `__post_init__` or init-only fields, so the result equals what `dataclasses.replace` builds, and an
    unknown name raises a TypeError as it does (tests/unit/domain/test_evolve.py). Plain code, no
    generated functions: the module is compiled with mypyc (ADR 0020), where the constructor of a
    native class is the cheapest way to build one."""
    cls = type(obj)
    names, known = _FIELD_NAMES.get(cls) or _field_names(cls)
    if changes and not known.issuperset(changes):
        raise _unknown_field(cls, changes, known)
    out: _T = cls(*[changes[n] if n in changes else getattr(obj, n) for n in names])
    return out


@dataclass(frozen=True, slots=True)
class AllocationNode:
    name: str
    parent: str
    share: float
    # GPUs of debug work ahead of the fair-share order, set by the parent's manager; None: the default
    # (DESIGN.md "Debug quota and the time-to-first-GPU SLO")
    debug_quota_gpus: int | None = None
    # what people call it, set by the parent's manager (steward.domain.display_names); None: its id
    display_name: str | None = None
    # the cluster its jobs run on, set by the parent's manager (steward.domain.pins, ADR 0067); None: any
    pin: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterNode:
    node_id: str
    gpus: int
    gpu_model: str
    path: tuple[str, ...]
    executor: str
    state: str = "ready"
    # GPUs held by work another scheduler placed (a Slurm job submitted outside Steward, issue 23): busy for
    # Steward, never its to preempt; what the executor's latest heartbeat said (DESIGN.md "Executors")
    foreign_gpus: int = 0
    # the named cluster it belongs to (DESIGN.md "Clusters and GPU models"; steward.domain.clusters)
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True, init=False)
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
    session_cap_at: float | None = None  # SessionOpened.cap_at of this attempt
    session_warnings_at: tuple[float, ...] | None = None  # SessionOpened.warnings_at of this attempt
    cap_reached_at: float | None = None
    idle_since: float | None = None
    restored_from: str | None = None
    restored_to: str | None = None
    preferred_node: str | None = None
    # how to reach the running session's current attempt, as it published it (SessionAddressPublished)
    session_address: str | None = None
    # the GPU models and clusters the job accepts (empty: any; DESIGN.md "Clusters and GPU models")
    gpu_models: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()

    # generated by infra/generate_inits.py from the fields above (make compile): edit the fields, not this
    def __init__(
        self,
        job_id: str,
        project: str,
        gpus: int,
        min_runtime_s: float,
        command: tuple[str, ...],
        resumable: bool,
        job_class: str,
        priority: int,
        submitted_at: float,
        state: str = "QUEUED",
        attempt: int = 0,
        assignments: tuple[tuple[str, tuple[int, ...]], ...] = (),
        funded: bool = False,
        started_at: float | None = None,
        ended_at: float | None = None,
        exit_code: int | None = None,
        protected_until: float | None = None,
        protection_revoked: bool = False,
        preemption_requested_at: float | None = None,
        preemption_reason: str | None = None,
        preemption_grace_s: float | None = None,
        preemption_requeue: bool = True,
        preemption_for: str = "",
        preemptions: int = 0,
        losses: int = 0,
        last_checkpoint_at: float | None = None,
        checkpoint_path: str | None = None,
        resume_from: str | None = None,
        requeued_at: float | None = None,
        session_cap_at: float | None = None,
        session_warnings_at: tuple[float, ...] | None = None,
        cap_reached_at: float | None = None,
        idle_since: float | None = None,
        restored_from: str | None = None,
        restored_to: str | None = None,
        preferred_node: str | None = None,
        session_address: str | None = None,
        gpu_models: tuple[str, ...] = (),
        clusters: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "project", project)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "min_runtime_s", min_runtime_s)
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "resumable", resumable)
        object.__setattr__(self, "job_class", job_class)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "submitted_at", submitted_at)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "assignments", assignments)
        object.__setattr__(self, "funded", funded)
        object.__setattr__(self, "started_at", started_at)
        object.__setattr__(self, "ended_at", ended_at)
        object.__setattr__(self, "exit_code", exit_code)
        object.__setattr__(self, "protected_until", protected_until)
        object.__setattr__(self, "protection_revoked", protection_revoked)
        object.__setattr__(self, "preemption_requested_at", preemption_requested_at)
        object.__setattr__(self, "preemption_reason", preemption_reason)
        object.__setattr__(self, "preemption_grace_s", preemption_grace_s)
        object.__setattr__(self, "preemption_requeue", preemption_requeue)
        object.__setattr__(self, "preemption_for", preemption_for)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "losses", losses)
        object.__setattr__(self, "last_checkpoint_at", last_checkpoint_at)
        object.__setattr__(self, "checkpoint_path", checkpoint_path)
        object.__setattr__(self, "resume_from", resume_from)
        object.__setattr__(self, "requeued_at", requeued_at)
        object.__setattr__(self, "session_cap_at", session_cap_at)
        object.__setattr__(self, "session_warnings_at", session_warnings_at)
        object.__setattr__(self, "cap_reached_at", cap_reached_at)
        object.__setattr__(self, "idle_since", idle_since)
        object.__setattr__(self, "restored_from", restored_from)
        object.__setattr__(self, "restored_to", restored_to)
        object.__setattr__(self, "preferred_node", preferred_node)
        object.__setattr__(self, "session_address", session_address)
        object.__setattr__(self, "gpu_models", gpu_models)
        object.__setattr__(self, "clusters", clusters)
    # end of the generated __init__

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.assignments)

    @property
    def preempting(self) -> bool:
        return self.preemption_requested_at is not None


_JOB_FIELDS = frozenset(f.name for f in fields(Job))


def _replace_job(job: Job, /, **c: Any) -> Job:
    """`replace` for job records (the ledger's hottest copy: one per event), each field read once by name:
    a call of the constructor with every field, changed or kept."""
    if not _JOB_FIELDS.issuperset(c):
        raise _unknown_field(Job, c, _JOB_FIELDS)
    return Job(
        c.get("job_id", job.job_id), c.get("project", job.project), c.get("gpus", job.gpus),
        c.get("min_runtime_s", job.min_runtime_s), c.get("command", job.command),
        c.get("resumable", job.resumable), c.get("job_class", job.job_class), c.get("priority", job.priority),
        c.get("submitted_at", job.submitted_at), c.get("state", job.state), c.get("attempt", job.attempt),
        c.get("assignments", job.assignments), c.get("funded", job.funded), c.get("started_at", job.started_at),
        c.get("ended_at", job.ended_at), c.get("exit_code", job.exit_code),
        c.get("protected_until", job.protected_until), c.get("protection_revoked", job.protection_revoked),
        c.get("preemption_requested_at", job.preemption_requested_at),
        c.get("preemption_reason", job.preemption_reason), c.get("preemption_grace_s", job.preemption_grace_s),
        c.get("preemption_requeue", job.preemption_requeue), c.get("preemption_for", job.preemption_for),
        c.get("preemptions", job.preemptions), c.get("losses", job.losses),
        c.get("last_checkpoint_at", job.last_checkpoint_at), c.get("checkpoint_path", job.checkpoint_path),
        c.get("resume_from", job.resume_from), c.get("requeued_at", job.requeued_at),
        c.get("session_cap_at", job.session_cap_at), c.get("session_warnings_at", job.session_warnings_at),
        c.get("cap_reached_at", job.cap_reached_at),
        c.get("idle_since", job.idle_since), c.get("restored_from", job.restored_from),
        c.get("restored_to", job.restored_to), c.get("preferred_node", job.preferred_node),
        c.get("session_address", job.session_address),
        c.get("gpu_models", job.gpu_models), c.get("clusters", job.clusters),
    )


@dataclass(frozen=True, slots=True)
class LedgerState:
    allocations: dict[str, AllocationNode] = field(default_factory=dict)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    # node id -> GPU indices held by non-terminal placed/running jobs
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    # the policy settings in force (overrides of the steward preset), set by `PolicySet`
    policy: dict[str, Any] = field(default_factory=dict)
    # Kubernetes namespace mappings in force, (executor id, namespace) -> project, set by `NamespaceMapped`
    # (steward.domain.namespaces; an unmapped namespace is absent)
    namespaces: dict[tuple[str, str], str] = field(default_factory=dict)

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
        """The node's GPU indices Steward may place on: neither held by its jobs nor counted as foreign load
        (foreign GPUs are a count: the highest of the indices Steward does not hold stand for them)."""
        node = self.nodes[node_id]
        free = frozenset(range(node.gpus)) - self.used.get(node_id, frozenset())
        if node.foreign_gpus <= 0:
            return free
        return frozenset(sorted(free)[:max(0, len(free) - node.foreign_gpus)])


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
    elif event.type == "NodeRetirementPending":  # ADR 0081: no new work; retired when its last attempt ends
        node = replace(node, state="retiring")
    elif event.type == "NodeResumed":
        node = replace(node, state="ready")
    return replace(state, nodes={**state.nodes, node.node_id: node})


# A job with no preemption pending (merged into the other changes of an event: one copy of the job).
_NO_PREEMPTION: dict[str, Any] = {"preemption_requested_at": None, "preemption_reason": None,
                                  "preemption_grace_s": None, "preemption_requeue": True, "preemption_for": ""}


# The contract times of one attempt (JobStarted.protected_until, SessionOpened.cap_at and warnings_at):
# none before the attempt starts, none while the job waits for its next one (the projection and the API
# show them as recorded, DESIGN.md "The time-slicing contract").
_NO_ATTEMPT_TIMES: dict[str, Any] = {"protected_until": None, "session_cap_at": None, "session_warnings_at": None,
                                      "session_address": None}


_YIELDED: dict[str, Any] = {k: v for k, v in _NO_PREEMPTION.items() if k != "preemption_for"}


def _set_node_states(state: LedgerState, node_ids: Any, from_state: str, to_state: str) -> LedgerState:
    changed = {n: replace(state.nodes[n], state=to_state) for n in node_ids
               if n in state.nodes and state.nodes[n].state == from_state}
    return replace(state, nodes={**state.nodes, **changed}) if changed else state


def _set_foreign(state: LedgerState, executor: str, foreign: dict[str, int]) -> LedgerState:
    """A heartbeat names the foreign load on every node of its executor (a node it does not name has none)."""
    if not foreign and not any(n.foreign_gpus for n in state.nodes.values()):
        return state  # the usual heartbeat: no foreign load before or after
    changed = {n.node_id: replace(n, foreign_gpus=int(foreign.get(n.node_id, 0)))
               for n in state.nodes.values()
               if n.executor == executor and n.foreign_gpus != int(foreign.get(n.node_id, 0))}
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
                           exit_code=p.get("exit_code"), idle_since=None, state="PREEMPTED", session_address=None)
        return _replace_job(job, **_NO_PREEMPTION, preemptions=job.preemptions + 1, exit_code=p.get("exit_code"),
                       idle_since=None, state="SUSPENDED", ended_at=at, session_address=None)
    if kind == "JobLost":
        return _replace_job(job, **_NO_PREEMPTION, state="LOST", losses=job.losses + 1, idle_since=None,
                            session_address=None)
    if kind == "SessionAddressPublished":
        return _replace_job(job, session_address=p["address"])
    if kind == "JobRequeued":
        # waiting for a new attempt: the contract times of the attempt that ended no longer apply
        return _replace_job(job, state="QUEUED", resume_from=p.get("resume_from"), requeued_at=at,
                            **_NO_ATTEMPT_TIMES)
    if kind == "CheckpointSaved":
        job = _replace_job(job, checkpoint_path=p["path"], last_checkpoint_at=p["saved_at"])
        if job.state == "QUEUED" and job.resumable:  # saved during the stop, reported after the requeue
            job = _replace_job(job, resume_from=p["path"])
        return job
    if kind == "SessionOpened":
        warnings = p.get("warnings_at")
        return _replace_job(job, session_cap_at=p["cap_at"],
                            session_warnings_at=None if warnings is None else tuple(float(w) for w in warnings))
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
        return Job(
            p["job_id"], p["project"], p["gpus"], p["min_runtime_s"], tuple(p["command"]), p["resumable"],
            p["job_class"], p["priority"], p["submitted_at"], resume_from=p.get("resume_from"),
            restored_from=p.get("restored_from"), preferred_node=p.get("preferred_node"),
            gpu_models=tuple(p.get("gpu_models") or ()), clusters=tuple(p.get("clusters") or ()),
        ), used
    if job is None:
        return None
    if kind == "JobPlaced":
        assignments = tuple((n, tuple(g)) for n, g in sorted(p["assignments"].items()))
        job = _replace_job(job, state="PLACED", attempt=p["attempt"], assignments=assignments, funded=p["funded"],
                      protection_revoked=False, cap_reached_at=None, idle_since=None, **_NO_ATTEMPT_TIMES,
                      **_NO_PREEMPTION)
        used = dict(used)
        for node_id, gpus in assignments:
            used[node_id] = used.get(node_id, frozenset()) | frozenset(gpus)
        return job, used
    if kind in _ENDED:
        if job.state in ACTIVE_STATES:
            used = _released(used, job)
        return _replace_job(job, **_NO_PREEMPTION, state=_ENDED[kind], ended_at=at, exit_code=p.get("exit_code"),
                            session_address=None), used
    return _evolve_job(job, event, at), used


def apply_allocations_set(before: dict[str, AllocationNode], p: dict[str, Any]) -> dict[str, AllocationNode]:
    """`AllocationsSet`: the shares named are set (a child keeps its debug quota, display name and pin); the
    debug quotas, display names and pins (v4, ADR 0067) named are set (a child keeps its share)."""
    allocations = dict(before)
    parent = p["parent"]
    for child, share in p["shares"].items():
        old = allocations.get(child)
        allocations[child] = (AllocationNode(child, parent, float(share)) if old is None
                              else replace(old, parent=parent, share=float(share)))
    quotas: dict[str, Any] = p.get("debug_quotas") or {}
    for child, gpus in quotas.items():
        old = allocations.get(child)
        if old is not None:
            allocations[child] = replace(old, debug_quota_gpus=None if gpus is None else int(gpus))
    names: dict[str, Any] = p.get("display_names") or {}
    for child, name in names.items():
        old = allocations.get(child)
        if old is not None:
            allocations[child] = replace(old, display_name=None if name is None else str(name))
    pins: dict[str, Any] = p.get("pins") or {}
    for child, pin in pins.items():
        old = allocations.get(child)
        if old is not None:
            allocations[child] = replace(old, pin=None if pin is None else str(pin))
    return allocations


def apply_namespace_mapped(before: dict[tuple[str, str], str], p: dict[str, Any]) -> dict[tuple[str, str], str]:
    """`NamespaceMapped`: the namespace of that cluster now charges `project` ("" unmaps it)."""
    key = (str(p["executor_id"]), str(p["namespace"]))
    after = dict(before)
    if p["project"]:
        after[key] = str(p["project"])
    else:
        after.pop(key, None)
    return after


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
        return replace(state, allocations=apply_allocations_set(state.allocations, p))
    if event.type == "PolicySet":
        return replace(state, policy=dict(p["settings"]))
    if event.type == "NamespaceMapped":
        return replace(state, namespaces=apply_namespace_mapped(state.namespaces, p))
    if event.type == "NodeRegistered":  # `state`, `foreign_gpus`: what a registration kept (ADR 0082, 0091)
        node = ClusterNode(p["node_id"], p["gpus"], p["gpu_model"], tuple(p["path"]), p["executor"],
                           state=str(p.get("state") or "ready"), foreign_gpus=int(p.get("foreign_gpus") or 0),
                           cluster=p.get("cluster") or DEFAULT_CLUSTER)
        return replace(state, nodes={**state.nodes, node.node_id: node})
    if event.type in ("NodeDrainRequested", "NodeDrained", "NodeResumed", "NodeRetirementPending"):
        return _evolve_node(state, event, at)
    if event.type == "NodeRetired":  # ADR 0078: gone from the state (registering it again brings it back)
        gone = str(p["node_id"])
        return replace(state, nodes={k: v for k, v in state.nodes.items() if k != gone},
                       used={k: v for k, v in state.used.items() if k != gone})
    if event.type == "ExecutorHeartbeat":
        state = _set_node_states(state, p.get("recovered", ()), "unhealthy", "ready")
        state = _set_node_states(state, p.get("down", ()), "ready", "unhealthy")
        return _set_foreign(state, str(p.get("executor_id", "")), p.get("foreign") or {})
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
