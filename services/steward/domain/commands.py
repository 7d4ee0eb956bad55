"""Commands: what someone (a person, the scheduler, an executor, a workflow) asks the ledger to do.

Every command is a frozen dataclass deriving from `Command`, declared once in `REGISTRY` with the name it
travels under (its `TYPE`) and the stream its events go to (its `aggregate`); `COMMAND_TYPES` and both
properties derive from that one table. `command_from_dict` is the one decoder used by the ledger for
messages read from Kafka, and it refuses unknown types and malformed fields by name.
"""

from __future__ import annotations

import dataclasses
import functools
import string
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_args, get_origin, get_type_hints

from steward.domain.errors import InvalidCommand
from steward.domain.todict import command_to_dict as command_to_dict  # its home: compiled (see there)

JOB_CLASSES = ("batch", "debug", "interactive")
ROOT = "cluster"


class Command:
    """What every command class derives from: its `TYPE` and `aggregate` come from its line of `REGISTRY`
    (set there, once for all commands; a class without one has neither)."""

    __slots__ = ()
    TYPE: ClassVar[str]
    KIND: ClassVar[CommandKind]
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # each subclass is a dataclass

    @property
    def aggregate(self) -> str:
        """The stream the command's events are appended to (its `CommandKind.stream`, filled in)."""
        return self.KIND.aggregate_of(self)


@dataclass(frozen=True, slots=True)
class SetAllocations(Command):
    """A manager of `parent` sets the shares of its children (DESIGN: org tree and allocations) and,
    optionally, their debug quotas (DESIGN: debug quota): GPUs per child that may run debug work ahead of
    the fair-share order; None puts a child back on the default that follows its share. A child named
    in `debug_quotas` keeps its share unless `shares` names it too. Likewise `display_names`: what people
    call a child (steward.domain.display_names); None shows its id again. And `pins`: the cluster a child's
    jobs run on (steward.domain.pins, ADR 0067); None unpins it."""

    parent: str
    shares: dict[str, float]
    reason: str
    debug_quotas: dict[str, int | None] = field(default_factory=dict)
    display_names: dict[str, str | None] = field(default_factory=dict)
    pins: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterNode(Command):
    """A node joins a cluster (DESIGN.md "Clusters and GPU models"): its GPUs, their model, its topology
    path, the executor that runs its work and the named cluster it belongs to ("": the default cluster,
    steward.domain.clusters.DEFAULT_CLUSTER; every node registered before clusters had names is in it)."""

    node_id: str
    gpus: int
    gpu_model: str
    path: list[str]
    executor: str = "local"
    cluster: str = ""


@dataclass(frozen=True, slots=True)
class SubmitJob(Command):
    """A job asks for GPUs under a project's allocation. `from_executor` and `from_namespace`: where a
    Kubernetes executor submits a cluster's pods, the cluster (its executor's id) and the pods' namespace,
    whose recorded mapping decides the project they may charge (steward.domain.namespaces, ADR 0056); empty
    for a job submitted through the API."""

    job_id: str
    project: str
    gpus: int
    min_runtime_s: float
    command: list[str]
    resumable: bool = False
    job_class: str = "batch"
    priority: int = 0
    from_executor: str = ""
    from_namespace: str = ""
    # DESIGN.md "Clusters and GPU models": the GPU models and clusters the job accepts (empty: any)
    gpu_models: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CancelJob(Command):
    job_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PlaceJob(Command):
    """The scheduler's decision to run a queued job on GPUs, with the evidence that justified it."""

    job_id: str
    assignments: dict[str, list[int]]
    funded: bool
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportJobStarted(Command):
    """An executor started the attempt's process. `started_at` is the executor's clock (0: the ledger's);
    protection runs from it, so the ledger and the JobRun workflow compute the same end."""

    job_id: str
    attempt: int
    pid: int
    started_at: float = 0.0


@dataclass(frozen=True, slots=True)
class ReportJobExited(Command):
    """The attempt's process exited. `ended_at`: when, by the executor's clock (Slurm's EndTime under Slurm;
    0: the ledger's); the books end the run there (steward.domain.budget.run_span)."""

    job_id: str
    attempt: int
    exit_code: int
    ended_at: float = 0.0


# -- the time-slicing contract (DESIGN.md "The time-slicing contract") ------------------------------

PREEMPTION_REASONS = ("fair_share", "unfunded", "drain", "operator")
DEFAULT_GRACE_S = 120.0


@dataclass(frozen=True, slots=True)
class RequestPreemption(Command):
    """The scheduler (or an operator, or a drain) asks to preempt a running job: checkpoint request,
    grace period, stop, requeue with its original submit time. `attempt` 0 means the current one."""

    job_id: str
    reason: str
    attempt: int = 0
    grace_s: float = DEFAULT_GRACE_S
    requeue: bool = True
    for_job_id: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportJobPreempted(Command):
    """The JobRun workflow stopped the attempt after a checkpoint request (preemption or session cap)."""

    job_id: str
    attempt: int
    reason: str
    exit_code: int
    grace_expired: bool = False
    checkpoint_path: str = ""
    checkpoint_at: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportJobLost(Command):
    """The attempt ended without an exit of the job's own and is requeued: the JobRun workflow stopped hearing
    from its executor (heartbeat timeout, no return), or, with `executor_answered`, the executor said it could
    not start or keep it (a gang's bind failed, the kubelet refused the pod, the process vanished): then the
    executor is alive and its nodes are not suspected (ADR 0087)."""

    job_id: str
    attempt: int
    reason: str
    executor_answered: bool = False


@dataclass(frozen=True, slots=True)
class ReportCheckpointSaved(Command):
    """An executor saw the attempt write its checkpoint folder (`saved_at`: the executor's clock)."""

    job_id: str
    attempt: int
    path: str
    saved_at: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportHeartbeat(Command):
    """An executor is alive and runs these attempts (job id -> attempt) on these nodes. `down`: its nodes that
    the cluster manager under it (Slurm) holds out of service on its own (down, failed, drained by someone
    else): they take no work until a heartbeat no longer names them (issue 23). `foreign`: GPUs per node held
    by work another scheduler placed there (jobs submitted to Slurm outside Steward): busy for Steward and
    never preempted by it, until a heartbeat no longer names the node."""

    executor_id: str
    jobs: dict[str, int]
    nodes: list[str] = field(default_factory=list)
    down: list[str] = field(default_factory=list)
    foreign: dict[str, int] = field(default_factory=dict)


# -- interactive sessions (DESIGN.md "Interactive sessions") ------------------------------------------

SESSION_WARNING_KINDS = ("cap", "idle")
SESSION_AT_CAP = ("stop", "preemptible")


@dataclass(frozen=True, slots=True)
class OpenSession(Command):
    """The Session workflow began timing an interactive attempt: its cap and warning times."""

    job_id: str
    attempt: int
    cap_at: float
    warnings_at: list[float]
    at_cap: str = "stop"
    idle_limit_s: float = 0.0


@dataclass(frozen=True, slots=True)
class WarnSession(Command):
    """A warning the UI and CLI show: `kind` "cap" (the cap is near) or "idle" (protection will go)."""

    job_id: str
    attempt: int
    kind: str
    seconds_left: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReachSessionCap(Command):
    """The session reached its cap: it is checkpointed and stopped, or made preemptible (`action`)."""

    job_id: str
    attempt: int
    action: str


@dataclass(frozen=True, slots=True)
class ReportUtilisation(Command):
    """An executor's utilisation report on a session, sent when it turns idle or busy again."""

    job_id: str
    attempt: int
    idle: bool
    since: float
    gpu_util: float | None = None
    cpu_percent: float | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class RevokeProtection(Command):
    """A session idle past the policy's limit loses its protection (it stays charged while it holds GPUs)."""

    job_id: str
    attempt: int
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportSessionAddress(Command):
    """An executor read the address a running session's attempt published (a URL or host:port the session's
    process wrote where the executor told it to; `published_at`: the executor's clock). ADR 0055."""

    job_id: str
    attempt: int
    address: str
    published_at: float = 0.0


@dataclass(frozen=True, slots=True)
class RestoreSession(Command):
    """Re-open a stopped session as a new job from its last checkpoint, preferring its previous node."""

    job_id: str
    new_job_id: str


# -- nodes ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DrainNode(Command):
    """An operator drains a host: it takes no new work and empties as its jobs' protections end."""

    node_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReportNodeDrained(Command):
    node_id: str


@dataclass(frozen=True, slots=True)
class ResumeNode(Command):
    node_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RetireNode(Command):
    """A node leaves the cluster for good (decommissioned, or gone from its executor's inventory): it is
    never placed on again and its GPUs leave the capacity (ADR 0078). Refused while a placed or running
    attempt holds its GPUs (drain it first), unless `when_empty`: then the node is retiring at once (no new
    work, its attempts left alone) and is retired when the last of them ends (ADR 0081). Registering it again
    brings it back."""

    node_id: str
    reason: str
    when_empty: bool = False


# -- budget periods ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClosePeriod(Command):
    """Close a budget period [start, end): owed vs delivered GPU-seconds per allocation, so reports never
    recompute history (DESIGN.md "Owed vs delivered")."""

    period_id: str
    start: float
    end: float
    capacity_gpu_s: float
    allocations: dict[str, dict[str, float]]
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExplainWaiting(Command):
    """The scheduler's explanations for waiting jobs whose reason changed (DESIGN: "Every decision has
    evidence"; "why pending" is answered from these events). `explanations` maps a job id to the
    policy's explanation (reason code, plain words, the amount blocking, positions, evidence)."""

    explanations: dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class SetPolicy(Command):
    """An operator sets policy settings (DESIGN: "operator ... sets policy"): a partial set of the
    policy's knobs by name (window, protection cap, session cap, grace, ...), with a reason."""

    settings: dict[str, Any]
    reason: str


@dataclass(frozen=True, slots=True)
class SetGpuModelWeights(Command):
    """An admin sets the weight of GPU models (budget units per GPU-hour, DESIGN.md "Clusters and GPU
    models"; e.g. H100 1.0, A100 0.55, V100 0.25), with a reason. Models not named keep their weight
    (steward.domain.clusters; ADR 0057)."""

    weights: dict[str, float]
    reason: str


@dataclass(frozen=True, slots=True)
class SetGroupMapping(Command):
    """An admin sets which Steward role and scopes each group of the OpenID provider gives its members
    (steward.domain.identity): the whole mapping, as a list of `{group, role, scopes}`, with a reason."""

    rules: list[dict[str, Any]]
    reason: str


@dataclass(frozen=True, slots=True)
class MapNamespace(Command):
    """An admin maps a namespace of a Kubernetes cluster (the executor that governs it) to the project its
    pods charge, or unmaps it (`project` ""), with a reason (steward.domain.namespaces; ADR 0054)."""

    executor_id: str
    namespace: str
    project: str
    reason: str


@dataclass(frozen=True, slots=True)
class RecordAccessDenial(Command):
    """The API refused a request (issue 7: "denials are recorded as audit events"). One denial, or, past
    the API's per-token limit, a summary of `count` denials between `first_at` and `last_at` with how
    many per operation (`operations`), so a flood of refusals cannot flood the log."""

    subject: str
    role: str
    operation: str
    target: str
    reason: str
    first_at: float
    last_at: float
    count: int = 1
    token_id: str = ""
    client: str = ""
    operations: dict[str, int] = field(default_factory=dict)


# -- notifications (issue 24 "Being told"; steward.domain.notifications, ADR 0050) ----------------------


@dataclass(frozen=True, slots=True)
class SetNotifications(Command):
    """A subscriber chooses which notifications of `allocation` (a project, or a node: its whole subtree)
    reach them on one channel ("email": `target` an address; "webhook": `target` an http(s) URL taking
    Slack-compatible JSON). `kinds` replaces what that (subscriber, allocation, channel, target) had; empty
    stops it. `subscriber` is the caller's identity: an API token's subject today, a person's subject once
    sign-in lands."""

    subscriber: str
    allocation: str
    channel: str
    target: str
    kinds: list[str]


@dataclass(frozen=True, slots=True)
class RecordDeliveryFailed(Command):
    """The notification delivery `delivery_id` gave up after `attempts` attempts (operators list these)."""

    delivery_id: str
    subscriber: str
    channel: str
    target: str
    kind: str
    position: int
    attempts: int
    error: str


class CommandKind:
    """One command's declaration: the name it travels under, its class, and the stream its events go to,
    a `str.format` template over the command's fields ("job-{job_id}"; "queue" names one stream)."""

    __slots__ = ("_keys", "cls", "name", "stream")

    def __init__(self, name: str, cls: type[Command], stream: str) -> None:
        keys = tuple(f for _, f, _, _ in string.Formatter().parse(stream) if f is not None)
        declared = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in keys if k not in declared]
        if unknown:
            raise TypeError(f"{name}: the stream {stream!r} names no field {', '.join(map(repr, unknown))}")
        self.name, self.cls, self.stream, self._keys = name, cls, stream, keys

    def aggregate_of(self, command: Command) -> str:
        if not self._keys:
            return self.stream
        return self.stream.format_map({k: getattr(command, k) for k in self._keys})


# Every command, once: its name on the wire and in the log, its class, its stream.
REGISTRY: tuple[CommandKind, ...] = (
    CommandKind("SetAllocations", SetAllocations, "allocation-{parent}"),
    CommandKind("RegisterNode", RegisterNode, "node-{node_id}"),
    CommandKind("SubmitJob", SubmitJob, "job-{job_id}"),
    CommandKind("CancelJob", CancelJob, "job-{job_id}"),
    CommandKind("PlaceJob", PlaceJob, "job-{job_id}"),
    CommandKind("ReportJobStarted", ReportJobStarted, "job-{job_id}"),
    CommandKind("ReportJobExited", ReportJobExited, "job-{job_id}"),
    CommandKind("RequestPreemption", RequestPreemption, "job-{job_id}"),
    CommandKind("ReportJobPreempted", ReportJobPreempted, "job-{job_id}"),
    CommandKind("ReportJobLost", ReportJobLost, "job-{job_id}"),
    CommandKind("ReportCheckpointSaved", ReportCheckpointSaved, "job-{job_id}"),
    CommandKind("ReportHeartbeat", ReportHeartbeat, "executor-{executor_id}"),
    CommandKind("OpenSession", OpenSession, "job-{job_id}"),
    CommandKind("WarnSession", WarnSession, "job-{job_id}"),
    CommandKind("ReachSessionCap", ReachSessionCap, "job-{job_id}"),
    CommandKind("ReportUtilisation", ReportUtilisation, "job-{job_id}"),
    CommandKind("RevokeProtection", RevokeProtection, "job-{job_id}"),
    CommandKind("RestoreSession", RestoreSession, "job-{job_id}"),
    CommandKind("ReportSessionAddress", ReportSessionAddress, "job-{job_id}"),
    CommandKind("DrainNode", DrainNode, "node-{node_id}"),
    CommandKind("ReportNodeDrained", ReportNodeDrained, "node-{node_id}"),
    CommandKind("ResumeNode", ResumeNode, "node-{node_id}"),
    CommandKind("RetireNode", RetireNode, "node-{node_id}"),
    CommandKind("ClosePeriod", ClosePeriod, "period-{period_id}"),
    CommandKind("ExplainWaiting", ExplainWaiting, "queue"),
    CommandKind("SetPolicy", SetPolicy, "policy"),
    CommandKind("SetGpuModelWeights", SetGpuModelWeights, "policy"),
    CommandKind("SetGroupMapping", SetGroupMapping, "identity-groups"),
    CommandKind("MapNamespace", MapNamespace, "k8s-namespaces-{executor_id:.150}"),
    CommandKind("RecordAccessDenial", RecordAccessDenial, "access-{subject:.150}"),  # a stream name's length
    CommandKind("SetNotifications", SetNotifications, "notify-{subscriber:.150}"),
    CommandKind("RecordDeliveryFailed", RecordDeliveryFailed, "delivery-{delivery_id:.150}"),
)
for _kind in REGISTRY:
    _kind.cls.TYPE, _kind.cls.KIND = _kind.name, _kind
del _kind
COMMAND_TYPES: dict[str, type[Command]] = {k.name: k.cls for k in REGISTRY}
if len(COMMAND_TYPES) != len(REGISTRY):
    raise TypeError("REGISTRY names a command twice")


def _check(name: str, value: Any, hint: Any) -> Any:
    origin = get_origin(hint)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidCommand(f"field '{name}' must be a number, got {value!r}")
        return float(value)
    if hint in (int, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise InvalidCommand(f"field '{name}' must be {hint.__name__}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise InvalidCommand(f"field '{name}' must be a list, got {value!r}")
        (item,) = get_args(hint)
        return [_check(f"{name}[{i}]", v, item) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise InvalidCommand(f"field '{name}' must be an object, got {value!r}")
        key_t, val_t = get_args(hint)
        return {_check(f"{name} key", k, key_t): _check(f"{name}[{k}]", v, val_t) for k, v in value.items()}
    if origin is types.UnionType:
        args = [a for a in get_args(hint) if a is not type(None)]
        if value is None and len(args) < len(get_args(hint)):
            return None
        if len(args) == 1:
            return _check(name, value, args[0])
        return value
    if hint is Any:
        return value
    return value


_PLAIN_HINTS = (int, str, bool, float)


@functools.cache
def _checker(hint: Any) -> Callable[[str, Any], Any]:
    """`_check` for one field type, with the type's shape looked at once (the ledger decodes every
    message): values already of the exact type pass at once (a list or dict is copied, as `_check` does);
    anything else goes through `_check`, which converts or names the problem."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in _PLAIN_HINTS:
        def check_plain(name: str, value: Any) -> Any:
            return value if type(value) is hint else _check(name, value, hint)
        return check_plain
    if origin is list and args[0] in _PLAIN_HINTS:
        item = args[0]

        def check_list(name: str, value: Any) -> Any:
            if type(value) is list and all(type(v) is item for v in value):
                return list(value)
            return _check(name, value, hint)
        return check_list
    if origin is dict and args[0] is str and args[1] in _PLAIN_HINTS:
        item = args[1]

        def check_dict(name: str, value: Any) -> Any:
            if type(value) is dict and all(type(k) is str and type(v) is item for k, v in value.items()):
                return dict(value)
            return _check(name, value, hint)
        return check_dict
    return functools.partial(_check_hint, hint)


checker_of = _checker  # for the compiled decoder (steward.domain.decoding): the same checker per field type


def _check_hint(hint: Any, name: str, value: Any) -> Any:
    return _check(name, value, hint)


@functools.cache
def _shape(kind: str) -> tuple[frozenset[str], tuple[tuple[str, Callable[[str, Any], Any], bool], ...]]:
    """A command type's field names and, per field, its checker and whether it has a default, resolved
    once (get_type_hints is slow, and the ledger decodes every message with it)."""
    cls = COMMAND_TYPES[kind]
    hints = get_type_hints(cls)
    plan = tuple(
        (f.name, _checker(hints[f.name]),
         f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
        for f in dataclasses.fields(cls))
    return frozenset(name for name, _, _ in plan), plan


def command_from_dict_reference(kind: str, payload: Mapping[str, Any]) -> Command:
    """Decode a command by its type name; unknown types, unknown or missing fields are named. The
    reference `command_from_dict` equals (and falls back to for anything but a well-formed message)."""
    cls = COMMAND_TYPES.get(kind)
    if cls is None:
        raise InvalidCommand(f"unknown command type '{kind}'")
    names, plan = _shape(kind)
    if not names.issuperset(payload):
        unknown = sorted(set(payload) - names)
        raise InvalidCommand(f"{kind}: unknown field(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for fname, check, has_default in plan:
        if fname not in payload:
            if not has_default:
                raise InvalidCommand(f"{kind}: missing field '{fname}'")
            continue
        values[fname] = check(fname, payload[fname])
    cmd: Command = cls(**values)
    return cmd



_UNSET: Any = object()
_FAST: dict[str, Callable[[Mapping[str, Any]], Any]] = {}


def _fast_decoder(kind: str) -> Callable[[Mapping[str, Any]], Any]:
    """A decoder for one command type, generated once, for the common case only: every field present or
    defaulted, no unknown field, and every value already of its field's exact type (a list or dict of
    plain items copied, as the reference does); fields of other types go through their checker, as in
    the reference. It returns None at the first thing it does not expect (an unknown or missing field,
    a value of another type), and `command_from_dict` then decodes with the reference from the start,
    which converts the value or names the problem. The command is built by setting its slots (the
    classes are frozen and slotted, without `__post_init__`), as `__init__` would."""
    cls = COMMAND_TYPES[kind]
    names, _ = _shape(kind)
    hints = get_type_hints(cls)
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_UNSET": _UNSET, "_names": names,
                           "_count": len(names), "_type": type, "_list": list, "_dict": dict, "_mkset": set,
                           "_map": map, "_str": frozenset({str})}
    lines = ["    if len(payload) > _count or not _names.issuperset(payload):", "        return None"]
    for i, f in enumerate(dataclasses.fields(cls)):
        if not f.name.isidentifier():
            raise TypeError(f"{kind}: field {f.name!r} is not an identifier")
        hint = hints[f.name]
        origin, args = get_origin(hint), get_args(hint)
        v = f"v{i}"
        env[f"_set{i}"] = getattr(cls, f.name).__set__
        lines.append(f"    {v} = payload.get({f.name!r}, _UNSET)")
        lines.append(f"    if {v} is _UNSET:")
        if f.default is not dataclasses.MISSING:
            env[f"_default{i}"] = f.default
            lines.append(f"        {v} = _default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory{i}"] = f.default_factory
            lines.append(f"        {v} = _factory{i}()")
        else:
            lines.append("        return None")
        if hint in _PLAIN_HINTS:
            env[f"_t{i}"] = hint
            lines.append(f"    elif _type({v}) is not _t{i}:")
            lines.append("        return None")
        elif origin is list and args[0] in _PLAIN_HINTS:
            # the items' exact types as a set, built in C (a generator costs ~0.5 us even for an empty list)
            env[f"_t{i}"] = frozenset({args[0]})
            lines.append(f"    elif _type({v}) is _list and (not {v} or _mkset(_map(_type, {v})) <= _t{i}):")
            lines.append(f"        {v} = _list({v})")
            lines.append("    else:")
            lines.append("        return None")
        elif origin is dict and args[0] is str and args[1] in _PLAIN_HINTS:
            env[f"_t{i}"] = frozenset({args[1]})
            lines.append(f"    elif _type({v}) is _dict and (not {v} or (_mkset(_map(_type, {v})) <= _str "
                         f"and _mkset(_map(_type, {v}.values())) <= _t{i})):")
            lines.append(f"        {v} = _dict({v})")
            lines.append("    else:")
            lines.append("        return None")
        else:
            env[f"_check{i}"] = _checker(hint)
            lines.append("    else:")
            lines.append(f"        {v} = _check{i}({f.name!r}, {v})")
    lines.append("    out = _new(_cls)")
    lines += [f"    _set{i}(out, v{i})" for i in range(len(dataclasses.fields(cls)))]
    lines.append("    return out")
    src = f"def decode_{kind}(payload):\n" + "\n".join(lines) + "\n"
    exec(src, env)  # generated from the command class's own field names, checked above
    fn: Callable[[Mapping[str, Any]], Any] = env[f"decode_{kind}"]
    _FAST[kind] = fn
    return fn


def command_from_dict(kind: str, payload: Mapping[str, Any]) -> Command:
    """Decode a command by its type name; unknown types, unknown or missing fields are named. Equal to
    `command_from_dict_reference` (same command, or the same error), through a decoder generated per type
    for well-formed messages (tests/property/test_fast_domain.py)."""
    fast = _FAST.get(kind)
    if fast is None:
        if kind not in COMMAND_TYPES:
            raise InvalidCommand(f"unknown command type '{kind}'")
        fast = _fast_decoder(kind)
    cmd: Command | None = fast(payload) if type(payload) is dict else None
    return command_from_dict_reference(kind, payload) if cmd is None else cmd


# SubmitJob's fields that `JobSubmitted` does not record (JobSubmitted v1): where a Kubernetes cluster's pods
# were submitted from, kept with the decision's command in its metadata instead (ADR 0056)
_NOT_RECORDED = ("from_executor", "from_namespace")


def submitted_fields(command: SubmitJob) -> dict[str, Any]:
    """The fields of a `SubmitJob` that its `JobSubmitted` event records (all but where it was submitted from)."""
    out = command_to_dict(command)
    for name in _NOT_RECORDED:
        del out[name]
    return out
