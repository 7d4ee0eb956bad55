"""The submit preview and the debug quotas, read from the scheduler's own view of the log.

Nothing here decides a rule. The API keeps the scheduler's view (`steward.api.queue.PolicyQueue`: the
same fold and the policy settings recorded by `PolicySet`), turns it into the policy's inputs with the
scheduler's bridge (`allocation_tree`, `running_job`, `pending_job`, `policy_node`), and asks the policy:
`policy.outlook.outlook` for a job as submitted (funded or unfunded and why, protection, qualification)
and `policy.debug_quota.debug_quota_gpus` for each allocation's quota in force.
"""

from __future__ import annotations

from dataclasses import dataclass

from steward.domain.clusters import pinned_clusters
from steward.domain.commands import SubmitJob
from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import LedgerState
from steward.policy.debug_quota import debug_quota_gpus
from steward.policy.model import JobClass, PendingJob
from steward.policy.outlook import Outlook, outlook
from steward.scheduler.bridge import (
    HOLDING_STATES,
    WAITING_STATES,
    allocation_pins,
    allocation_tree,
    pending_job,
    policy_node,
    running_job,
)

NEW_JOB_ID = "(new job)"


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """An allocation's debug quota: the GPUs in force (`gpus`), the value its manager set on it
    (`set_gpus`, None when unset) and the allocation whose set value applies (`set_on`: itself or the
    nearest ancestor with one; None when the default that follows the share applies)."""

    gpus: int
    set_gpus: int | None
    set_on: str | None

    @property
    def is_default(self) -> bool:
        return self.set_on is None


def ready_capacity(state: LedgerState) -> int:
    """GPUs on ready nodes (the capacity the cycle's phase 2 sizes entitlements with)."""
    total = 0
    for node in state.nodes.values():
        n = policy_node(node)
        if takes_new_work(n.state):
            total += n.gpus
    return total


def quota_figures(state: LedgerState, settings: PolicySettings) -> dict[str, QuotaFigures]:
    """Every allocation's debug quota in force now."""
    tree = allocation_tree(state, settings.max_tree_depth)
    capacity = ready_capacity(state)
    return {name: QuotaFigures(debug_quota_gpus(tree, name, capacity, settings), a.debug_quota_gpus,
                               tree.debug_quota_set_on(name))
            for name, a in state.allocations.items()}


def _klass(job_class: str) -> JobClass:
    if job_class == "debug":
        return "debug"
    if job_class == "interactive":
        return "interactive"
    return "batch"


def submit_outlook(state: LedgerState, settings: PolicySettings, command: SubmitJob, now: float) -> Outlook:
    """The preview of `command` (shape already checked) if it were submitted at `now` (or, once recorded,
    at its recorded submit time): the job itself is not counted among the running or waiting."""
    job_id = command.job_id or NEW_JOB_ID
    recorded = state.jobs.get(job_id)  # asked after submitting: its place in the quota's order is its own
    pins = allocation_pins(state)  # ADR 0067/0073: the clusters it and its project's work accept
    pin = pins.get(command.project, "")
    job = PendingJob(id=job_id, project=command.project, gpus=command.gpus,
                     submitted_at=recorded.submitted_at if recorded is not None else now,
                     min_runtime_s=command.min_runtime_s, resumable=command.resumable,
                     klass=_klass(command.job_class), priority=command.priority,
                     gpu_models=tuple(command.gpu_models), clusters=pinned_clusters(tuple(command.clusters), pin),
                     pin=pin)
    project = command.project
    funded: dict[str, float] = {}  # funded GPUs running per project: all the funding rule reads of others
    running = []  # the project's own: what its debug quota counts
    waiting = []
    for j in state.jobs.values():
        if j.job_id == job_id:
            continue  # the job being previewed, once recorded (and perhaps already placed)
        if j.state in HOLDING_STATES:
            if j.funded:
                funded[j.project] = funded.get(j.project, 0.0) + j.gpus
            if j.project == project:
                running.append(running_job(j, now, pin))
        elif j.state in WAITING_STATES and j.project == project:
            waiting.append(pending_job(j, pin=pin))
    nodes = [policy_node(n) for n in state.nodes.values()]
    return outlook(job, allocation_tree(state, settings.max_tree_depth), ready_capacity(state), running, waiting,
                   settings, funded, nodes)
