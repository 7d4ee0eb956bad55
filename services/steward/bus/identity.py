"""Who may say what on the bus (ADR 0036, issue 21 "Kafka with identities").

Every Steward component has a Kafka principal of its own (SASL SCRAM-SHA-512, created when the broker's
storage is formatted) and writes its commands to a command topic of its own, which only it may write (the
broker's ACLs). The ledger reads every command topic and knows, from the topic a command came from, which
authenticated component sent it: the topic vouches for the sender, and the sender for the actor it names.
This module is the one home of that mapping and of what each component may issue; it is pure (the ledger
passes the state when a rule needs it).
"""

from __future__ import annotations

from dataclasses import dataclass

from steward.domain.commands import (
    CancelJob,
    Command,
    RegisterNode,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobStarted,
    ReportSessionAddress,
    ReportUtilisation,
    RetireNode,
    SubmitJob,
)
from steward.domain.state import LedgerState

# The components that hold a Kafka principal. `admin` is the operator's (infra scripts, benchmarks, `steward
# doctor`): a super user of the broker, whose commands go to the API's topic and are trusted as the API's.
COMPONENTS = ("api", "ledger", "scheduler", "workflows", "executor", "admin")

# What each command-issuing component may issue (the ledger refuses anything else from its topic).
ALLOWED_COMMANDS: dict[str, frozenset[str]] = {
    # user commands, each checked against the user's role and scopes by the API before it is sent
    "api": frozenset({"SetAllocations", "RegisterNode", "SubmitJob", "CancelJob", "RequestPreemption",
                      "RestoreSession", "DrainNode", "ResumeNode", "RetireNode", "SetPolicy", "RecordAccessDenial",
                      "SetGroupMapping", "SetNotifications", "MapNamespace", "SetGpuModelWeights"}),
    # the scheduler's decisions
    "scheduler": frozenset({"PlaceJob", "RequestPreemption", "ExplainWaiting"}),
    # the workflows' outcomes: a run's exit or loss as the JobRun workflow saw it, sessions, drains, periods
    "workflows": frozenset({"ReportJobExited", "RequestPreemption", "ReportJobPreempted", "ReportJobLost",
                            "OpenSession", "WarnSession", "ReachSessionCap", "RevokeProtection",
                            "ReportNodeDrained", "ClosePeriod", "RecordDeliveryFailed"}),
    # an executor's lifecycle reports, for its own nodes' jobs only (`executor_refusal`); the jobs a cluster's
    # own users submit there (Kubernetes pods, ADR 0051), under the executor's prefix only
    "executor": frozenset({"RegisterNode", "RetireNode", "ReportJobStarted", "ReportCheckpointSaved", "ReportHeartbeat",
                           "ReportUtilisation", "ReportSessionAddress", "SubmitJob", "CancelJob"}),
}

# The actor a component (other than the API, which vouches for its users) must name: nothing else.
SCHEDULER_ACTOR = "scheduler"
WORKFLOWS_ACTOR = "temporal-worker"
SYSTEM_ROLE = "system"


@dataclass(frozen=True, slots=True)
class Sender:
    """The component a command topic belongs to (`executor_id` for an executor's topic, else "")."""

    component: str
    executor_id: str = ""

    @property
    def principal(self) -> str:
        return principal(self.component, self.executor_id)


def principal(component: str, executor_id: str = "") -> str:
    """The Kafka user name (SCRAM) of a component: `steward-<component>`, `steward-executor-<id>` for an
    executor."""
    if component == "executor":
        return f"steward-executor-{executor_id}"
    return f"steward-{component}"


def command_topic(prefix: str, component: str, executor_id: str = "") -> str:
    """The topic a component writes its commands to: the API's (and the operator's) `<prefix>.commands`,
    `<prefix>.commands.scheduler`, `<prefix>.commands.workflows`, `<prefix>.commands.executor.<id>`."""
    if component in ("api", "admin"):
        return f"{prefix}.commands"
    if component == "executor":
        return f"{prefix}.commands.executor.{executor_id}"
    if component in ("scheduler", "workflows"):
        return f"{prefix}.commands.{component}"
    raise ValueError(f"component {component!r} issues no commands")


def sender_of_topic(prefix: str, topic: str) -> Sender | None:
    """The component whose topic `topic` is (None: not a command topic, whose messages are refused)."""
    base = f"{prefix}.commands"
    if topic == base:
        return Sender("api")
    rest = topic[len(base) + 1:] if topic.startswith(base + ".") else ""
    if rest in ("scheduler", "workflows"):
        return Sender(rest)
    if rest.startswith("executor.") and len(rest) > len("executor."):
        return Sender("executor", rest[len("executor."):])
    return None


def is_command_topic(prefix: str, topic: str) -> bool:
    return sender_of_topic(prefix, topic) is not None


def refusal(state: LedgerState, sender: Sender | None, command: Command, actor: object, role: object) -> str:
    """Why the ledger refuses `command` from `sender`'s topic, claiming `actor` and `role` ("" when it is
    trusted). The API vouches for the users it authenticated; every other component may name only itself."""
    if sender is None:
        return "not a command topic"
    allowed = ALLOWED_COMMANDS.get(sender.component, frozenset())
    if command.TYPE not in allowed:
        return f"{sender.principal} may not issue {command.TYPE}"
    if sender.component == "api":
        if not isinstance(actor, str) or not actor or not isinstance(role, str) or not role:
            return "a user command names its actor and role"
        if isinstance(command, SubmitJob) and (command.from_executor or command.from_namespace):
            return "only a Kubernetes executor submits jobs from a namespace (from_executor, from_namespace)"
        return ""
    own = {"scheduler": SCHEDULER_ACTOR, "workflows": WORKFLOWS_ACTOR}.get(sender.component,
                                                                          f"executor:{sender.executor_id}")
    if actor != own or role != SYSTEM_ROLE:
        return f"{sender.principal} may act only as {own} ({SYSTEM_ROLE}), not as {actor!r} ({role!r})"
    if sender.component == "executor":
        return executor_refusal(state, sender.executor_id, command)
    return ""


def executor_refusal(state: LedgerState, executor_id: str, command: Command) -> str:
    """An executor reports only about itself, its own nodes and the jobs placed on them (issue 21: "an
    executor: lifecycle reports for its own node's jobs")."""
    if isinstance(command, RegisterNode):
        if command.executor != executor_id:
            return f"executor {executor_id} may not register a node of executor {command.executor!r}"
        known = state.nodes.get(command.node_id)
        if known is not None and known.executor != executor_id:
            return f"node {command.node_id} belongs to executor {known.executor}"
        return ""
    if isinstance(command, RetireNode):  # a node gone from its own inventory (ADR 0078)
        known = state.nodes.get(command.node_id)
        if known is not None and known.executor != executor_id:
            return f"node {command.node_id} belongs to executor {known.executor}"
        return ""
    if isinstance(command, ReportHeartbeat):
        if command.executor_id != executor_id:
            return f"executor {executor_id} may not report the heartbeat of executor {command.executor_id!r}"
        for job_id in command.jobs:
            why = _not_own_job(state, executor_id, job_id)
            if why:
                return why
        return ""
    if isinstance(command, (ReportJobStarted, ReportCheckpointSaved, ReportUtilisation, ReportSessionAddress)):
        return _not_own_job(state, executor_id, command.job_id)
    if isinstance(command, (SubmitJob, CancelJob)):
        # a cluster's pods, submitted for its users (whom the cluster authenticated), under its own prefix
        if not command.job_id.startswith(f"{executor_id}."):
            return (f"executor {executor_id} may submit or cancel only jobs named {executor_id}.*, "
                    f"not {command.job_id!r}")
        if isinstance(command, SubmitJob) and (command.from_executor != executor_id or not command.from_namespace):
            # the namespace is what the ledger checks the charged project against (ADR 0056)
            return (f"executor {executor_id} submits a job from one of its own namespaces (from_executor "
                    f"{executor_id!r} and from_namespace), not from {command.from_executor!r}/"
                    f"{command.from_namespace!r}")
        return ""
    return f"executor {executor_id} may not issue {command.TYPE}"


def _not_own_job(state: LedgerState, executor_id: str, job_id: str) -> str:
    """Refused when the job is placed on a node of another executor (or one not registered). A job that is
    unknown or placed nowhere (a report racing a requeue) goes on to the domain, which rejects what does
    not fit the job's state as it does for every sender."""
    job = state.jobs.get(job_id)
    if job is None:
        return ""
    for node_id in job.nodes:
        node = state.nodes.get(node_id)
        if node is None or node.executor != executor_id:
            return f"job {job_id} runs on node {node_id}, not one of executor {executor_id}'s"
    return ""
