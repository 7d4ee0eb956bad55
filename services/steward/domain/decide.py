"""decide(state, command, now) -> events: the ledger's pure validation of every command.

Each guard is a small named function citing the rule of DESIGN.md it enforces. A guard that fails
raises a `DomainError`; `decide_or_reject` turns it into a `CommandRejected` event with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from steward.domain import (
    clusters,
    contract,
    denials,
    identity,
    namespaces,
    nodes,
    notifications,
    org_tree,
    periods,
    sessions,
)
from steward.domain.commands import (
    JOB_CLASSES,
    ROOT,
    CancelJob,
    ClosePeriod,
    Command,
    DrainNode,
    ExplainWaiting,
    MapNamespace,
    OpenSession,
    PlaceJob,
    ReachSessionCap,
    RecordAccessDenial,
    RecordDeliveryFailed,
    RegisterNode,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    ReportNodeDrained,
    ReportSessionAddress,
    ReportUtilisation,
    RequestPreemption,
    RestoreSession,
    ResumeNode,
    RetireNode,
    RevokeProtection,
    SetAllocations,
    SetGpuModelWeights,
    SetGroupMapping,
    SetNotifications,
    SetPolicy,
    SubmitJob,
    WarnSession,
    command_to_dict,
)
from steward.domain.display_names import require_valid_display_names
from steward.domain.errors import (
    CapacityConflict,
    DomainError,
    InvalidAllocation,
    InvalidCommand,
    InvalidTransition,
    UnknownNode,
    UnknownProject,
)
from steward.domain.events import Event
from steward.domain.guards import require_active, require_current_attempt, require_job, require_non_negative
from steward.domain.pins import require_valid_pins
from steward.domain.policy_settings import RETIRED_SETTINGS, PolicySettings
from steward.domain.protection import DEFAULT_SESSION_CAP_S, MAX_MIN_RUNTIME_S, protection_s, session_cap_s
from steward.domain.requests import largest_placement, require_admissible_request, require_placeable
from steward.domain.rules_version import CURRENT, old_setting_problem, patched, setting_retired
from steward.domain.state import TERMINAL_STATES, Job, LedgerState

__all__ = ["MAX_MIN_RUNTIME_S", "decide", "decide_or_reject", "largest_placement", "require_current_attempt",
           "require_job", "require_placeable"]


def require_known_parent(state: LedgerState, parent: str) -> None:
    """Org tree: a manager sets shares of the children of an existing node (the root always exists)."""
    if parent != ROOT and parent not in state.allocations:
        raise InvalidAllocation(f"unknown parent node '{parent}'")


def require_shares_in_unit_interval(shares: dict[str, float]) -> None:
    """Org tree: a share is a fraction of the parent's allocation, in [0, 1] (`org_tree.share_in_unit_interval`)."""
    for child, share in shares.items():
        if not org_tree.share_in_unit_interval(share):
            raise InvalidAllocation(f"share of '{child}' must be in [0, 1], got {share}")


def require_children_sum_at_most_one(state: LedgerState, parent: str, shares: dict[str, float]) -> None:
    """Org tree: the children's shares of one node sum to at most 1 (`org_tree.children_shares_fit`)."""
    merged = {n: a.share for n, a in state.children(parent).items()} | shares
    total = sum(merged.values())
    if not org_tree.children_shares_fit(total):
        raise InvalidAllocation(f"children of '{parent}' would sum to {total:.4f} > 1")


def require_no_cycle_and_depth(state: LedgerState, parent: str, shares: dict[str, float]) -> None:
    """Org tree: a tree (no node moves under its own subtree, no node re-parented) of depth <= 8."""
    for child in shares:
        if child in (ROOT, parent):
            raise InvalidAllocation(f"node '{child}' cannot be a child of '{parent}'")
        existing = state.allocations.get(child)
        if existing is not None and existing.parent != parent:
            raise InvalidAllocation(f"node '{child}' already belongs to '{existing.parent}'")
    if state.depth(parent) + 1 > org_tree.MAX_TREE_DEPTH:
        raise InvalidAllocation(f"node '{parent}' is at the maximum depth {org_tree.MAX_TREE_DEPTH}")


def require_valid_debug_quotas(state: LedgerState, parent: str, shares: dict[str, float],
                                debug_quotas: dict[str, int | None]) -> None:
    """Debug quota (DESIGN.md "Debug quota and the time-to-first-GPU SLO"): a manager of `parent` sets the
    quota of `parent`'s children only (existing ones, or ones this command creates), as a whole number of
    GPUs >= 0; None returns a child to the default that follows its share."""
    given: dict[str, Any] = dict(debug_quotas)  # values unchecked by type: a command built in code may carry any
    for child, gpus in given.items():
        existing = state.allocations.get(child)
        if child not in shares and (existing is None or existing.parent != parent):
            raise InvalidAllocation(f"'{child}' is not a child of '{parent}': no debug quota to set")
        if gpus is None:
            continue
        problem = org_tree.debug_quota_problem(gpus)
        if problem is not None:
            raise InvalidAllocation(f"debug quota of '{child}' {problem}, got {gpus!r}")


def allocations_set_payload(command: SetAllocations) -> dict[str, Any]:
    """The `AllocationsSet` payload: the command's fields, `debug_quotas` (v2), `display_names` (v3) and `pins`
    (v4) only when the command sets any (a payload without them is the v1 shape, so old decisions replay to the same
    event)."""
    payload = command_to_dict(command)
    if not payload["debug_quotas"]:
        del payload["debug_quotas"]
    if not payload["display_names"]:
        del payload["display_names"]
    if not payload["pins"]:
        del payload["pins"]
    return payload


def require_valid_job_shape(cmd: SubmitJob) -> None:
    """Contract: gpus >= 1, min_runtime in [0, 8 h], a known job class, a command to run."""
    if cmd.gpus < 1:
        raise InvalidCommand(f"gpus must be at least 1, got {cmd.gpus}")
    if not (0 <= cmd.min_runtime_s <= MAX_MIN_RUNTIME_S):
        raise InvalidCommand(
            f"min_runtime_s must be in [0, {MAX_MIN_RUNTIME_S:.0f}], got {cmd.min_runtime_s}"
        )
    if cmd.job_class not in JOB_CLASSES:
        raise InvalidCommand(f"job_class must be one of {', '.join(JOB_CLASSES)}, got '{cmd.job_class}'")
    if not cmd.command:
        raise InvalidCommand("command must not be empty")
    if not cmd.job_id:
        raise InvalidCommand("job_id must not be empty")


def require_known_project(state: LedgerState, project: str) -> None:
    """Contract: a job names the allocation (a project, a leaf of the tree) that funds it."""
    if not state.is_project(project):
        raise UnknownProject(f"unknown project '{project}'")


def require_free_gpus(state: LedgerState, cmd: PlaceJob, job: Job) -> None:
    """Placement: a job gets exactly its GPUs, all at once (gang), on registered nodes with them free."""
    total = 0
    for node_id, gpus in cmd.assignments.items():
        if node_id not in state.nodes:
            raise UnknownNode(f"unknown node '{node_id}'")
        if len(set(gpus)) != len(gpus):
            raise InvalidCommand(f"GPU indices on '{node_id}' repeat: {gpus}")
        busy = set(gpus) - state.free_gpus(node_id)
        if busy:
            raise CapacityConflict(f"GPUs {sorted(busy)} on '{node_id}' are not free")
        total += len(gpus)
    if total != job.gpus:
        raise InvalidCommand(f"job '{job.job_id}' needs {job.gpus} GPUs, placement gives {total}")


def require_nodes_take_work(state: LedgerState, cmd: PlaceJob) -> None:
    """Issue 3 "Draining": a node marked draining (or otherwise not ready) takes no new work."""
    for node_id in cmd.assignments:
        node = state.nodes.get(node_id)
        if node is not None and not nodes.takes_new_work(node.state):
            raise InvalidTransition(f"node '{node_id}' is {node.state} and takes no new work")


def policy_session_cap_s(state: LedgerState) -> float:
    """DESIGN.md "Interactive sessions": protected for its cap (default 8 h). The default is the recorded
    policy's `session_cap_s` when an operator set one (`PolicySet`), so a session without its own cap
    placed after `steward policy set` gets it, as the scheduler plans with it."""
    return float(state.policy.get("session_cap_s", DEFAULT_SESSION_CAP_S))


def policy_max_min_runtime_s(state: LedgerState) -> float:
    """DESIGN.md "min_runtime (0 to 8 h, policy-capped)": the recorded policy's `max_min_runtime_s` when an
    operator set one, so the ledger records the protection the scheduler plans with."""
    return float(state.policy.get("max_min_runtime_s", MAX_MIN_RUNTIME_S))


def placement_contract(job: Job, funded: bool, default_cap_s: float = DEFAULT_SESSION_CAP_S,
                       max_min_runtime_s: float = MAX_MIN_RUNTIME_S) -> dict[str, object]:
    """What the JobRun workflow needs to keep the contract for this attempt (DESIGN.md "The time-slicing
    contract"): its protection, a session's cap, and the checkpoint to resume from."""
    return {
        "job_class": job.job_class, "resumable": job.resumable, "min_runtime_s": job.min_runtime_s,
        "protection_s": protection_s(job.job_class, job.min_runtime_s, funded, default_cap_s, max_min_runtime_s),
        "session_cap_s": session_cap_s(job.min_runtime_s, default_cap_s, max_min_runtime_s)
        if job.job_class == "interactive" else 0.0,
        "resume_from": job.resume_from if job.resumable or job.restored_from else None,
        "restored_from": job.restored_from, "submitted_at": job.submitted_at,
    }


def deferred_events(state: LedgerState, command: ExplainWaiting) -> list[Event]:
    """DESIGN "Every decision has evidence": one `JobDeferred` per job that still waits; an explanation
    for a job that has meanwhile been placed, cancelled or finished is stale and dropped."""
    out = []
    for job_id, explanation in sorted(command.explanations.items()):
        job = state.jobs.get(job_id)
        if job is None or job.state != "QUEUED":
            continue
        if not isinstance(explanation.get("reason"), str):
            raise InvalidCommand(f"the explanation of '{job_id}' needs a reason code")
        out.append(Event(f"job-{job_id}", "JobDeferred", {"job_id": job_id, "explanation": explanation}))
    return out


def require_valid_policy(state: LedgerState, settings: dict[str, Any], rules: int = CURRENT) -> dict[str, Any]:
    """Policy settings are the knobs of DESIGN "The policy" by name, each valid on its own and together
    with the ones already set; the result is the whole set of overrides in force. A setting retired by a
    rule change later than `rules` (steward.domain.rules_version) is still a setting under those rules,
    checked as it was then."""
    gone = {k: why for k, why in RETIRED_SETTINGS.items() if setting_retired(k, rules)}
    retired = sorted(set(settings) & set(gone))
    if retired:
        raise InvalidCommand("retired policy setting(s): " + "; ".join(
            f"{name} ({gone[name]})" for name in retired))
    still = set(RETIRED_SETTINGS) - set(gone)  # retired since `rules`: settings under them
    known = {f.name for f in fields(PolicySettings)} | still
    unknown = sorted(set(settings) - known)
    if unknown:
        raise InvalidCommand(f"unknown policy setting(s) {', '.join(unknown)}")
    weights = settings.get(clusters.WEIGHTS_SETTING)
    if patched("model_weights_positive", rules) and isinstance(weights, Mapping):
        for model, weight in sorted(weights.items(), key=lambda kv: str(kv[0])):
            if (problem := clusters.weight_problem(str(model), weight)) is not None:
                raise InvalidCommand(f"invalid policy settings: setting {clusters.WEIGHTS_SETTING!r}: {problem}")
    merged = {k: v for k, v in state.policy.items() if k not in gone} | settings
    try:
        PolicySettings.steward(**{k: v for k, v in merged.items() if k not in still})
    except (TypeError, ValueError) as err:  # InvalidSettings is a ValueError
        raise InvalidCommand(f"invalid policy settings: {err}") from None
    for name in sorted(still & set(merged)):
        problem = old_setting_problem(name, merged[name])
        if problem is not None:
            raise InvalidCommand(f"invalid policy settings: setting {name!r}: {problem}")
    return merged


def decide(state: LedgerState, command: Command, now: float, rules: int = CURRENT) -> list[Event]:
    """Validate `command` against `state` at time `now` and return the events that record it, under the
    rules of version `rules` (the newest; `steward audit replay` passes a recorded decision's own), followed by
    the retirements they make due (a retiring node whose last attempt they end, ADR 0081; none in a log with
    no retirement asked `when_empty`, so no rules version guards it)."""
    events = _decide_command(state, command, now, rules)
    return events + due if (due := nodes.retirements_due(state, events, now)) else events


def _decide_command(state: LedgerState, command: Command, now: float, rules: int) -> list[Event]:
    if isinstance(command, SetPolicy):
        if not command.reason.strip():
            raise InvalidCommand("a policy change needs a reason")
        merged = require_valid_policy(state, command.settings, rules)
        return [Event(command.aggregate, "PolicySet", {"changed": command.settings, "settings": merged,
                                                       "reason": command.reason})]
    if isinstance(command, SetGpuModelWeights):
        weights = clusters.weights_after(command, state.policy, (n.gpu_model for n in state.nodes.values()))
        merged = require_valid_policy(state, {clusters.WEIGHTS_SETTING: weights}, rules)
        return [Event(command.aggregate, "PolicySet", {"changed": {clusters.WEIGHTS_SETTING: weights},
                                                       "settings": merged, "reason": command.reason})]
    if isinstance(command, ExplainWaiting):
        return deferred_events(state, command)
    if isinstance(command, SetAllocations):
        if not command.reason.strip():
            raise InvalidCommand("an allocation change needs a reason")
        require_known_parent(state, command.parent)
        require_shares_in_unit_interval(command.shares)
        require_no_cycle_and_depth(state, command.parent, command.shares)
        require_children_sum_at_most_one(state, command.parent, command.shares)
        require_valid_debug_quotas(state, command.parent, command.shares, command.debug_quotas)
        require_valid_display_names(state, command.parent, command.shares, command.display_names)
        require_valid_pins(state, command.parent, command.shares, command.pins)
        return [Event(command.aggregate, "AllocationsSet", allocations_set_payload(command))]
    if isinstance(command, RegisterNode):
        if command.gpus < 1:
            raise InvalidCommand(f"node '{command.node_id}' needs at least 1 GPU, got {command.gpus}")
        if patched("node_gpus_bounded", rules):
            clusters.require_node_gpus(command)
        if not command.node_id or not command.path:
            raise InvalidCommand("a node needs an id and a topology path")
        if patched("one_executor_a_cluster", rules):
            clusters.require_one_executor(state.nodes, command)
        kept = nodes.state_kept(state, command.node_id) if patched("registration_keeps_state", rules) else None
        foreign = nodes.foreign_kept(state, command) if patched("registration_keeps_foreign", rules) else 0
        return [Event(command.aggregate, "NodeRegistered", clusters.registered_payload(command, kept, foreign))]
    if isinstance(command, SubmitJob):
        require_valid_job_shape(command)
        namespaces.require_mapped_namespace(state, command)
        require_known_project(state, command.project)
        require_admissible_request(state, command, rules)
        if command.job_id in state.jobs:
            raise InvalidCommand(f"job '{command.job_id}' already exists")
        return [Event(command.aggregate, "JobSubmitted", clusters.submitted_payload(command, now))]
    if isinstance(command, CancelJob):
        job = require_job(state, command.job_id)
        if job.state in TERMINAL_STATES:
            raise InvalidTransition(f"job '{job.job_id}' is already {job.state}")
        return [Event(command.aggregate, "JobCancelled", {"job_id": job.job_id, "reason": command.reason,
                                                          "attempt": job.attempt, "was": job.state})]
    if isinstance(command, PlaceJob):
        job = require_job(state, command.job_id)
        if job.state not in ("QUEUED", "PREEMPTED"):
            raise InvalidTransition(f"job '{job.job_id}' is {job.state}, only queued jobs are placed")
        require_free_gpus(state, command, job)
        require_nodes_take_work(state, command)
        payload = command_to_dict(command) | {"attempt": job.attempt + 1, "command": list(job.command)}
        payload["executor"] = state.nodes[sorted(command.assignments)[0]].executor
        payload |= placement_contract(job, command.funded, policy_session_cap_s(state), policy_max_min_runtime_s(state))
        return [Event(command.aggregate, "JobPlaced", payload)]
    if isinstance(command, ReportJobStarted):
        job = require_job(state, command.job_id)
        require_current_attempt(job, command.attempt)
        if job.state != "PLACED":
            raise InvalidTransition(f"job '{job.job_id}' is {job.state}, cannot start")
        started = command.started_at or now
        until = started + protection_s(job.job_class, job.min_runtime_s, job.funded, policy_session_cap_s(state),
                                       policy_max_min_runtime_s(state))
        return [Event(command.aggregate, "JobStarted", command_to_dict(command) | {"started_at": started,
                                                                           "protected_until": until})]
    if isinstance(command, ReportJobExited):
        job = require_job(state, command.job_id)
        require_current_attempt(job, command.attempt)
        if job.state in TERMINAL_STATES:
            raise InvalidTransition(f"job '{job.job_id}' is already {job.state}")
        require_active(job)
        kind = "JobCompleted" if command.exit_code == 0 else "JobFailed"
        require_non_negative("ended_at", command.ended_at)
        payload = command_to_dict(command)
        if not command.ended_at:  # the exits recorded before issue 23 keep their form
            payload.pop("ended_at")
        return [Event(command.aggregate, kind, payload)]
    if isinstance(command, RestoreSession):
        return sessions.decide_restore(state, command, now, rules)
    handler = _HANDLERS.get(type(command))
    if handler is not None:
        return handler(state, command, now)
    raise InvalidCommand(f"unhandled command {type(command).__name__}")


_HANDLERS: dict[type[Any], Callable[[LedgerState, Any, float], list[Event]]] = {
    RecordAccessDenial: denials.decide_access_denial,
    RequestPreemption: contract.decide_request_preemption,
    ReportJobPreempted: contract.decide_report_preempted,
    ReportJobLost: contract.decide_report_lost,
    ReportCheckpointSaved: contract.decide_checkpoint_saved,
    ReportHeartbeat: contract.decide_heartbeat,
    OpenSession: sessions.decide_open,
    WarnSession: sessions.decide_warn,
    ReachSessionCap: sessions.decide_reach_cap,
    ReportUtilisation: sessions.decide_utilisation,
    RevokeProtection: sessions.decide_revoke,
    ReportSessionAddress: sessions.decide_address,
    DrainNode: nodes.decide_drain,
    ReportNodeDrained: nodes.decide_drained,
    ResumeNode: nodes.decide_resume,
    RetireNode: nodes.decide_retire,
    ClosePeriod: periods.decide_close,
    SetGroupMapping: identity.decide_set_group_mapping,
    MapNamespace: namespaces.decide_map_namespace,
    SetNotifications: notifications.decide_set_notifications,
    RecordDeliveryFailed: notifications.decide_delivery_failed,
}


def decide_or_reject(state: LedgerState, command: Command, now: float, rules: int = CURRENT) -> list[Event]:
    """Like `decide`, but a rule violation becomes a `CommandRejected` event (rejections are events)."""
    try:
        return decide(state, command, now, rules)
    except DomainError as err:
        return [
            Event(
                command.aggregate,
                "CommandRejected",
                {"command": command.TYPE, "code": err.code, "reason": err.message},
            )
        ]
