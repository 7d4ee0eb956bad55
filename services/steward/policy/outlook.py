"""The submit preview ("outlook"): what a job as submitted will get if it starts now (DESIGN.md "The
time-slicing contract": "The researcher is told at submit when a job will run unfunded, and why"; "Debug
quota": "Whether a job is qualified is shown at submit").

Pure: the caller passes the job and the current projections (tree, ready capacity, running and waiting
jobs); nothing here reads a clock. No rule is decided here a second time: funding is
`contract.funding_gap` (the cycle's own) and, for qualified debug work, `contract.lane_funds` (the debug
lane funds it while its allocation's entitlement is used, ADR 0029); protection is `contract.protection_s`;
the debug quota and qualification are `debug_quota.qualify_in`. This module gathers their inputs as the
cycle's phase 2 does (funded GPUs in use per allocation, entitlement × ready capacity per allocation) and
words the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from steward.domain.clusters import admits
from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import (
    ENTITLEMENT_USED,
    NO_ALLOCATION,
    UNFUNDED_BY_REQUEST,
    funding_capacity,
    funding_charge,
    funding_gap,
    funding_path,
    has_entitlement_left,
    lane_funds,
    protection_s,
)
from steward.policy.debug_quota import (
    Qualification,
    cluster_quotas,
    debug_quota_gpus,
    qualify_clusters,
    qualify_in,
)
from steward.policy.model import Node, PendingJob, RunningJob
from steward.policy.ordering import tree_layout
from steward.policy.tree import AllocationTree

FUNDED = "funded"


@dataclass(frozen=True, slots=True)
class Outlook:
    """What a submitted job will get if it starts now, and why.

    `reason` is "funded" or why it would run unfunded (contract.funding_gap's codes); `funded_by_lane`:
    funded although its allocation's entitlement is used, as qualified debug work (ADR 0029). `allocation`,
    `in_use_gpus` and `entitled_gpus` are the figures behind "entitlement_used": the allocation on the
    job's funding path whose funded GPUs in use reached its entitlement × ready capacity. For debug work
    (a debug job or a session) `qualification` says whether it is inside its allocation's debug quota."""

    funded: bool
    reason: str
    funded_by_lane: bool
    protection_s: float
    """Protection from each funded start (0: unfunded work is preemptible at once)."""
    asked_protection_s: float
    """The protection the job asked for (min_runtime, capped by policy; a session's cap)."""
    project: str
    allocation: str | None
    in_use_gpus: float
    entitled_gpus: float
    qualification: Qualification | None
    message: str
    weighted: bool = False
    """ADR 0090: some GPU model weighs other than 1, so `in_use_gpus` and `entitled_gpus` are weighted GPUs."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "funded": self.funded,
            "reason": self.reason,
            "funded_by_lane": self.funded_by_lane,
            "protection_s": self.protection_s,
            "asked_protection_s": self.asked_protection_s,
            "project": self.project,
            "allocation": self.allocation,
            "in_use_gpus": self.in_use_gpus,
            "entitled_gpus": self.entitled_gpus,
            "qualification": None if self.qualification is None else self.qualification.to_dict(),
            "message": self.message,
        } | ({"units": "weighted_gpus"} if self.weighted else {})


def funded_by_project(running: Iterable[RunningJob], weight_of: dict[str, float] | None = None) -> dict[str, float]:
    """Funded GPUs of running jobs per project; with `weight_of` (node id -> its model's weight) each charged at
    its nodes' weights (ADR 0090: `contract.funding_charge`, what the funding rule reads)."""
    out: dict[str, float] = {}
    for job in running:
        if job.funded:
            charge = job.gpus if weight_of is None else funding_charge(job.placement, weight_of)
            out[job.project] = out.get(job.project, 0.0) + charge
    return out


def funded_in_use(by_project: Mapping[str, float], tree: AllocationTree) -> dict[str, float]:
    """Funded GPUs in use per allocation: each project's funded running GPUs charged to every allocation
    on its path (what the cycle's order phase charges before it places anything)."""
    out: dict[str, float] = {}
    for project, gpus in by_project.items():
        if tree.is_leaf(project):
            for a in tree.path(project):
                out[a] = out.get(a, 0.0) + gpus
    return out


def outlook(
    job: PendingJob,
    tree: AllocationTree,
    capacity_gpus: float,
    running: Iterable[RunningJob],
    waiting: Iterable[PendingJob],
    settings: PolicySettings,
    funded_gpus: Mapping[str, float] | None = None,
    nodes: Sequence[Node] = (),
) -> Outlook:
    """The preview of `job` (not yet among `waiting`, or ignored there) at submit: funded now or will
    run unfunded and why, the protection it will get, and for debug work whether it is qualified.
    `funded_gpus`: the funded GPUs running per project, when the caller tallied them (then `running`
    need only hold the job's own project's work, which the debug quota counts); else from `running`.
    `nodes`: the registered nodes; when they form several clusters the debug quota is qualified per cluster,
    as the cycle does (ADR 0073, `qualify_per_cluster`).
    ADR 0090: the funding figures are in weighted GPUs, as the cycle's: `funded_gpus` is then each project's
    `contract.funding_charge`, and the quota is entitlement × the ready `nodes`' weighted capacity
    (`contract.funding_capacity`; `capacity_gpus` when no node is given, i.e. every weight 1)."""
    running = tuple(running)
    waiting = tuple(w for w in waiting if w.id != job.id)
    path = tree.path(job.project) if tree.is_leaf(job.project) else ()
    weight_of = {n.id: settings.funding_weight(n.model) for n in nodes}
    in_use = funded_in_use(funded_by_project(running, weight_of) if funded_gpus is None else funded_gpus, tree)
    entitlement = tree_layout(tree).entitlement
    capacity_w = (funding_capacity(((n.gpus, n.model) for n in nodes if n.state == "ready"), settings) if nodes
                  else float(capacity_gpus))
    quota = {a: entitlement.get(a, 0.0) * capacity_w for a in path}
    gap = funding_gap(job, path, in_use, quota, settings)
    asked = protection_s(job.klass, job.min_runtime_s, settings)
    short: str | None = None
    if gap == ENTITLEMENT_USED:
        short = has_entitlement_left(funding_path(path, settings), in_use, quota)
    figures_of = short or (path[-1] if path else None)
    qualification = None
    if job.klass in ("debug", "interactive"):
        if len({n.cluster for n in nodes}) > 1:
            qualification = qualify_per_cluster(job, tree, capacity_gpus, nodes, running, waiting, settings)
        else:
            qualification = qualify_in(job, tree, capacity_gpus, running, waiting, settings)
    by_lane = gap is not None and qualification is not None and qualification.qualified and lane_funds(gap)
    funded = gap is None or by_lane
    out = Outlook(
        funded=funded,
        reason=FUNDED if funded else str(gap),
        funded_by_lane=by_lane,
        protection_s=asked if funded else 0.0,
        asked_protection_s=asked,
        project=job.project,
        allocation=figures_of,
        in_use_gpus=in_use.get(figures_of, 0.0) if figures_of else 0.0,
        entitled_gpus=quota.get(figures_of, 0.0) if figures_of else 0.0,
        qualification=qualification,
        message="",
        weighted=any(w != 1.0 for w in weight_of.values()),
    )
    return _with_message(out, settings)


def duration(seconds: float) -> str:
    """`90` -> "1m30s", `7200` -> "2h"."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec or not s else ""]
    return "".join(parts)


def _gpus(x: float) -> str:
    return f"{x:g}"


def funding_message(o: Outlook) -> str:
    """One line a researcher reads at submit: funded (and its protection) or unfunded, and why."""
    units = "weighted GPUs" if o.weighted else "GPUs"  # ADR 0090
    if o.funded:
        figures = f"'{o.allocation}' has {_gpus(o.in_use_gpus)} of {_gpus(o.entitled_gpus)} entitled {units} in use"
        if o.funded_by_lane:
            return (f"funded by the debug lane: protected for {duration(o.protection_s)} from each start; {figures}, "
                    "and it is inside its debug quota")
        if o.protection_s <= 0:
            return "funded"
        return f"funded: protected for {duration(o.protection_s)} from each start ({figures})"
    unfunded = ("will run unfunded: only on idle GPUs, not charged, preemptible at once (no protection)")
    if o.reason == UNFUNDED_BY_REQUEST:
        return f"{unfunded}: it asks for no protection (min runtime 0); ask for one to be funded"
    if o.reason == NO_ALLOCATION:
        return f"{unfunded}: '{o.project}' has no allocation in the tree"
    if o.reason == ENTITLEMENT_USED:
        return (f"{unfunded}: no allocation left: '{o.allocation}' has {_gpus(o.in_use_gpus)} of its "
                f"{_gpus(o.entitled_gpus)} entitled {units} in use by funded work; the "
                f"{duration(o.asked_protection_s)} of protection asked for applies from a start once it has room")
    return f"{unfunded}: {o.reason}"


def qualification_message(q: Qualification, project: str, settings: PolicySettings) -> str:
    """One line on the debug quota (DESIGN.md "Debug quota"): qualified or not, and why."""
    counted = f"{q.in_use_gpus} running, {q.ahead_gpus} waiting ahead"
    if q.reason == "within_quota":
        return (f"debug: qualified: inside '{project}' debug quota of {q.quota_gpus} GPUs ({counted}); "
                "it goes ahead of the fair-share order")
    if q.reason == "over_quota":
        return (f"debug: not qualified, over '{project}' debug quota of {q.quota_gpus} GPUs ({counted}); "
                "it queues as ordinary funded work")
    if q.reason == "not_debug":
        return (f"debug: not qualified: debug work is a session or a debug job on at most {settings.lane_max_gpus} "
                f"GPUs asking for at most {duration(settings.lane_max_runtime_s)} of protection")
    if q.reason == "unfunded_by_request":
        return "debug: not qualified: a debug job qualifies only when it asks for protection"
    if q.reason == "no_allocation":
        return f"debug: not qualified: '{project}' has no allocation"
    return f"debug: not qualified: {q.reason}"


def _with_message(o: Outlook, settings: PolicySettings) -> Outlook:
    lines = [funding_message(o)]
    if o.qualification is not None:
        lines.append(qualification_message(o.qualification, o.project, settings))
    return replace(o, message="\n".join(lines))


def qualify_per_cluster(job: PendingJob, tree: AllocationTree, capacity_gpus: float, nodes: Sequence[Node],
                        running: Iterable[RunningJob], waiting: Iterable[PendingJob],
                        settings: PolicySettings) -> Qualification:
    """ADR 0073, the preview's qualification with several clusters, gathered as the cycle's phase 2 does: the
    allocation's quota over the ready capacity, its parts per cluster of ready GPUs (its pin's alone when pinned),
    running work's cluster from its first node, and the clusters with a node each job accepts."""
    capacity: dict[str, float] = {}
    cluster_of_node: dict[str, str] = {}
    for n in nodes:
        cluster_of_node[n.id] = n.cluster
        if takes_new_work(n.state):
            capacity[n.cluster] = capacity.get(n.cluster, 0.0) + n.gpus
    parts = cluster_quotas(debug_quota_gpus(tree, job.project, capacity_gpus, settings), capacity, settings, job.pin)

    def cluster_of(r: RunningJob) -> str | None:
        return cluster_of_node.get(r.placement[0][0]) if r.placement else None

    def accepts_of(w: PendingJob) -> list[str]:
        return sorted({n.cluster for n in nodes if admits(w.gpu_models, w.clusters, n.model, n.cluster)})

    return qualify_clusters(job, parts, accepts_of(job), running, waiting, settings, cluster_of, accepts_of,
                            allocated=tree.is_leaf(job.project))
