"""The time-slicing contract (DESIGN.md "The time-slicing contract"): funded vs unfunded occupancy,
protection from each start, lost work, grace and requeue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from steward.domain import protection as times
from steward.domain.policy_settings import PolicySettings
from steward.policy.model import JobClass, PendingJob, Placement, RunningJob
from steward.policy.reasons import ENTITLEMENT_USED as ENTITLEMENT_USED
from steward.policy.reasons import NO_ALLOCATION as NO_ALLOCATION
from steward.policy.reasons import UNFUNDED_BY_REQUEST as UNFUNDED_BY_REQUEST

# Why a job would run unfunded (stable codes: they end up in events, explanations and the API; written in
# steward.policy.reasons with the words for them)


def protection_s(klass: JobClass, min_runtime_s: float, settings: PolicySettings) -> float:
    """DESIGN.md "Funded occupancy": protected for `min_runtime` from each start, capped by policy
    (`max_min_runtime_s`, 8 h by default). DESIGN.md "Interactive sessions": a session is protected
    for its cap instead. The rule is `steward.domain.protection`'s (the ledger records the same)."""
    return times.protection_s(klass, min_runtime_s, True, settings.session_cap_s, settings.max_min_runtime_s)


def asks_for_funding(job: PendingJob | RunningJob, settings: PolicySettings) -> bool:
    """DESIGN.md "Unfunded occupancy": a job with `min_runtime = 0` is unfunded by its own choice
    (a session always asks for funding: it is protected for its cap). With `funding` off (the
    pre-budget baseline) every job counts as funded."""
    if not settings.funding:
        return True
    return job.klass == "interactive" or job.min_runtime_s > 0


def has_entitlement_left(
    path: tuple[str, ...],
    funded_in_use: Mapping[str, float],
    quota: Mapping[str, float],
) -> str | None:
    """DESIGN.md "Funded occupancy": a job is funded while its allocation has entitlement left:
    at every level of its path, funded GPUs in use (including this cycle's placements) are below
    entitlement × capacity, both in weighted GPUs (ADR 0090: `funding_charge`, `funding_capacity`).
    Returns the first allocation on the path without entitlement left, or None when the job can be
    funded. An empty path (no allocation) returns "" (never funded)."""
    if not path:
        return ""
    for node in path:
        if funded_in_use.get(node, 0.0) >= quota.get(node, 0.0):
            return node
    return None


def funding_charge(placement: Iterable[tuple[str, int]], weight_of: dict[str, float]) -> float:
    """ADR 0090, what a funded job counts against its allocation's quota: its GPUs on each node × the weight of
    that node's GPU model (`weight_of`: node id -> `PolicySettings.model_weight` of its model; a node not
    there, gone from the snapshot, weighs 1, as a run with no known model does in the books, ADR 0062). The one
    home of the charge: the cycle (phase 1's tally of running work, every placement and room it makes) and the
    submit preview read it. A job not placed yet is charged nothing: the funding rule asks whether its
    allocation is below its quota *before* it starts (`has_entitlement_left`), whatever it would cost, and
    its charge is known once its nodes are (so where it is routed never decides whether it is funded).
    `weight_of` is a dict, not any mapping: compiled, its lookups are then native (phase 1 charges every running
    funded job every cycle)."""
    total = 0.0
    for nid, gpus in placement:
        total += gpus * weight_of.get(nid, 1.0)
    return total


def funding_capacity(nodes: Iterable[tuple[int, str]], settings: PolicySettings) -> float:
    """ADR 0090, the capacity a quota is a share of: Σ GPUs × the weight of their model over `nodes` ((GPUs,
    model) of the ready nodes), so `entitlement × funding_capacity` is in weighted GPUs, the books' units
    (ADR 0062). Every weight 1 (no weights set): the plain GPUs, to the digit. The weight is asked once per model
    (the cycle reads this for every ready node every cycle; nodes share a few models)."""
    total = 0.0
    weights: dict[str, float] = {}
    for gpus, model in nodes:
        w = weights.get(model)
        if w is None:
            w = weights[model] = settings.funding_weight(model)
        total += gpus * w
    return total


def funding_path(path: tuple[str, ...], settings: PolicySettings) -> tuple[str, ...]:
    """The allocations whose quota `has_entitlement_left` checks for a job with this tree path.
    ADR 0002: every level. ADR 0017 (`overshoot_is_own`, on for `steward`): a child counts at its
    parent only up to its own quota — the last job's overshoot beyond a project's share is that
    project's, and does not use up its siblings' part of the parent. Since siblings' shares sum to
    at most 1, the parent then always has room while the project has, so only the project's own
    quota is checked."""
    if settings.overshoot_is_own:
        return path[-1:]
    return path


def funding_gap(
    job: PendingJob,
    path: tuple[str, ...],
    funded_in_use: Mapping[str, float],
    quota: Mapping[str, float],
    settings: PolicySettings,
    memo: MutableMapping[str, bool] | None = None,
) -> str | None:
    """DESIGN.md "Unfunded occupancy: min_runtime = 0, or no allocation left to fund it": None when
    the job would be funded if it started now; else why not: `NO_ALLOCATION` (its project is not a
    leaf of the tree), `UNFUNDED_BY_REQUEST` (it asked for no protection), `ENTITLEMENT_USED` (an
    allocation on its `funding_path` has its funded GPUs in use at entitlement × capacity, `quota`).
    With `funding` off every job is funded. `memo` (per project, whether its entitlement has room)
    may be passed by a caller that holds `funded_in_use` still between calls (the cycle clears it on
    every charge). The one home of the rule: the cycle and the submit preview (outlook.py) call it."""
    if not settings.funding:
        return None
    if not path:
        return NO_ALLOCATION
    if not asks_for_funding(job, settings):
        return UNFUNDED_BY_REQUEST
    ok = memo.get(job.project) if memo is not None else None
    if ok is None:
        ok = has_entitlement_left(funding_path(path, settings), funded_in_use, quota) is None
        if memo is not None:
            memo[job.project] = ok
    return None if ok else ENTITLEMENT_USED


def lane_funds(gap: str | None) -> bool:
    """ADR 0007, 0029: the debug lane funds a qualified job of an allocation whose entitlement is used
    (its debug quota bounds it); work with no allocation, or that asks for no protection, stays
    unfunded. `gap` is `funding_gap`'s answer for the job."""
    return gap is None or gap == ENTITLEMENT_USED


def protected_until(job: PendingJob, start: float, funded: bool, settings: PolicySettings) -> float:
    """Protection ends `protection_s` after this start for funded work; unfunded work has none
    ("preemptible at once")."""
    if not funded:
        return start
    return start + protection_s(job.klass, job.min_runtime_s, settings)


def is_protected(job: RunningJob, now: float) -> bool:
    """DESIGN.md: "nothing preempts it for fairness during that time"; unfunded jobs are never
    protected."""
    return job.funded and now < job.protected_until


def in_grace(job: RunningJob) -> bool:
    """A preemption was already requested; the job is checkpointing and will stop after the grace."""
    return job.preemption_requested_at is not None


def grace_s(funded: bool, settings: PolicySettings) -> float:
    """DESIGN.md "checkpoint request, grace period, stop": the grace a victim gets (the rule is
    `steward.domain.protection.grace_s`, with this policy's values)."""
    return times.grace_s(funded, settings.preemption_grace_s, settings.unfunded_grace_s)


def victim_grace_s(funded: bool, claim: bool, settings: PolicySettings) -> float:
    """The grace a new victim gets: `grace_s`, except a funded victim of a claim within a debug quota
    (ADR 0099, `preemption.claim_within_debug_quota`), which gets `lane_claim_grace_s` when the policy sets one.
    Unfunded victims keep theirs ("preemptible at once")."""
    if claim and funded and settings.lane_claim_grace_s is not None:
        return settings.lane_claim_grace_s
    return grace_s(funded, settings)


def grace_ends_at(job: RunningJob, settings: PolicySettings) -> float:
    requested = job.preemption_requested_at
    assert requested is not None
    return requested + grace_s(job.funded, settings)


def lost_work_s(job: RunningJob, now: float, settings: PolicySettings) -> float:
    """DESIGN.md "choose victims to free the fewest GPU-hours of lost work": seconds of work a
    preemption now throws away — since the last checkpoint (since the start when the job is not
    resumable or never checkpointed) — plus the restart overhead paid on the next start."""
    since = job.started_at
    if job.resumable and job.last_checkpoint_at is not None:
        since = max(since, job.last_checkpoint_at)
    return max(0.0, now - since) + settings.restart_overhead_s


def lost_gpu_s(job: RunningJob, now: float, settings: PolicySettings) -> float:
    """Lost work in GPU-seconds (the unit of `lost_gpu_hours_fraction`)."""
    return job.gpus * lost_work_s(job, now, settings)


def requeue(job: RunningJob) -> PendingJob:
    """DESIGN.md "requeue with its original submit time (and auto-resume when resumable)"."""
    return PendingJob(
        id=job.id,
        project=job.project,
        gpus=job.gpus,
        submitted_at=job.submitted_at,
        min_runtime_s=job.min_runtime_s,
        resumable=job.resumable,
        klass=job.klass,
        priority=job.priority,
        topology_depth=job.topology_depth,
        previous_node=job.placement[0][0] if job.klass == "interactive" and job.placement else None,
        gpu_models=job.gpu_models,
        clusters=job.clusters,
        pin=job.pin,
    )


def start(job: PendingJob, placement: Placement, now: float) -> RunningJob:
    """The running job a `Placement` creates (for the ledger and the simulator)."""
    return RunningJob(
        id=job.id,
        project=job.project,
        gpus=job.gpus,
        placement=placement.assignments,
        started_at=now,
        protected_until=placement.protected_until,
        funded=placement.funded,
        last_checkpoint_at=None,
        resumable=job.resumable,
        klass=job.klass,
        submitted_at=job.submitted_at,
        preemption_requested_at=None,
        min_runtime_s=job.min_runtime_s,
        priority=job.priority,
        topology_depth=job.topology_depth,
        gpu_models=job.gpu_models,
        clusters=job.clusters,
        pin=job.pin,
    )
