"""Policy settings: every knob of DESIGN.md "The policy", plus the switches that turn the same code
into the baselines of issue 4 (`ai2`, `fair-tree`, `fifo-priority`).

All durations are float seconds. Settings are immutable; derive a variant with `dataclasses.replace`
or `with_(...)`.

They live in the domain, below the policy that reads them: the ledger validates a `SetPolicy` against
them (`steward.domain.decide.require_valid_policy`) and the domain imports nothing of the policy (ADR 0040).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

UsageMode = Literal["window", "decay"]
OrderingMode = Literal["fair_share", "fifo_priority"]
PlacementMode = Literal["best_fit", "first_fit"]
SessionAtCap = Literal["stop", "preemptible"]


class InvalidSettings(ValueError):
    """A policy setting out of its range, or an unknown preset. `code` is stable (it ends up in rejection
    events); `message` is for people. A `ValueError`, not a `steward.policy.errors.PolicyError`: the
    settings live in the domain, which imports nothing of the policy (ADR 0040)."""

    code = "invalid_settings"

    def __init__(self, field: str, message: str) -> None:
        self.message = f"setting {field!r}: {message}"
        super().__init__(self.message)
        self.field = field


DAY_S = 86400.0
HOUR_S = 3600.0


def _frozen_weights(weights: Mapping[str, float] | None) -> Mapping[str, float]:
    return MappingProxyType(dict(weights or {}))


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The knobs of the policy. Defaults are the `steward` policy of DESIGN.md."""

    # Usage window (DESIGN.md "Usage window")
    window_s: float = 7 * DAY_S
    usage_mode: UsageMode = "window"
    half_life_s: float = 7 * DAY_S
    gpu_model_weights: Mapping[str, float] = field(
        default_factory=lambda: _frozen_weights(None), hash=False, compare=True
    )

    # The time-slicing contract (DESIGN.md "The time-slicing contract")
    max_min_runtime_s: float = 8 * HOUR_S
    checkpoint_interval_s: float = 1800.0
    restart_overhead_s: float = 60.0
    preemption_grace_s: float = 120.0
    unfunded_grace_s: float | None = 20.0
    """Grace of an *unfunded* victim (DESIGN.md "Unfunded occupancy ... preemptible at once"): a
    checkpoint request and this many seconds before it stops. None: the same as `preemption_grace_s`
    (the baselines). ADR 0007."""

    # Interactive sessions (DESIGN.md "Interactive sessions")
    session_cap_s: float = 8 * HOUR_S
    session_warnings_s: tuple[float, ...] = (1800.0, 300.0)
    session_at_cap: SessionAtCap = "stop"

    # The debug lane and quota (DESIGN.md "Debug quota and the time-to-first-GPU SLO"; ADR 0007, 0029)
    lane: bool = True
    """Debug work inside its allocation's debug quota goes ahead of the fair-share order (lane.py,
    debug_quota.py). False: no lane and no quota (the baselines)."""
    lane_max_gpus: int = 2
    """Debug work asks for at most this many GPUs (a larger job is batch work by its size)."""
    lane_max_runtime_s: float = 900.0
    """A debug job is debug work when its protection (min_runtime) is at most this long."""
    debug_quota_share: float = 1.0
    """The default debug quota of an allocation is this fraction of its entitlement in GPUs, at least
    `debug_quota_floor_gpus` (debug_quota.py `default_debug_quota_gpus`, ADR 0029)."""
    debug_quota_floor_gpus: int = 4
    """The least default debug quota: two 2-GPU debug jobs, or four 1-GPU ones, for any allocation."""
    lane_victim_max_gpus: int = 2
    """A lane job takes no running job larger than this: stopping an 8-GPU job for a 1-GPU debug
    job leaves GPUs that the waiting gangs cannot use (occupancy)."""
    lane_trade: bool = False
    """A lane job over the lane cap may take its own allocation's unfunded work (lane.py
    `trade_victim`, ADR 0021): the burst trades its project's idle-capacity work, nobody else's."""
    victim_cost_at_stop: bool = False
    """Victims are ranked by the work they lose when they stop at the end of their grace: a resumable
    job whose periodic checkpoint falls inside the grace loses little (ADR 0021). False: the work
    since the last checkpoint when asked."""
    lane_cheapest: bool = False
    """A lane job under the cap takes the victims that lose the least work, whoever's (one search);
    False: unfunded work first, then funded work (ADR 0007), then its own allocation's (a trade)."""
    lane_trade_funded: bool = True
    """A trade may take the allocation's own funded work out of protection too, not only unfunded."""
    lane_trade_max_lost_s: float | None = None
    """A traded victim loses at most this many seconds of work per GPU (None: any)."""
    lane_claim: bool = True
    """The debug quota read as a claim (ADR 0099): a qualified lane job that does not fit may take funded work
    out of protection of an allocation running more funded GPUs than its entitlement (only those above it)
    without strict improvement on its own side, and is placed funded (preemption.py `claim_within_debug_quota`).
    False: the lane's funded victims need strict improvement (ADR 0007, 0029). Measured on the suite
    (docs/results/debug-claim/): the qualified-debug check passes on 2-3 more of its 6 failing scenarios, seed
    triple after seed triple, and no other check breaks."""
    lane_claim_grace_s: float | None = 20.0
    """The grace of a claim's funded victims (ADR 0099; a checkpoint request and this many seconds before it
    stops): 20 s, the unfunded grace (30 s measured: no better, and one lost-work check broke). None: the
    contract's `preemption_grace_s`."""

    # Bounded churn (DESIGN.md "The time-slicing contract": "Churn is bounded"; churn.py, ADR 0028)
    settle_s: float | None = 300.0
    """A (re)started job is not preempted for an unfunded or lane reason before it has run this long
    (churn.settled). 300 s = 5 x the default restart overhead: a job preempted at its settle time has
    spent at most a fifth of its run paying the restart, and at least one unfunded grace (20 s) and a
    restart fit in it many times over; it is short against the checkpoint interval (1800 s), so a
    settling job loses little when it goes. None: no settle time (the baselines)."""
    preemption_gain_horizon_s: float | None = 1800.0
    """A preemption goes ahead only when its beneficiary's gain (GPUs x the earlier start, the wait it
    saves bounded by this horizon) is at least its victims' cost (work lost at the stop plus the
    restart; churn.worth_preempting). The default is the checkpoint interval: a victim about to reach
    its next checkpoint, or a job that cannot checkpoint and has run longer than that, is not thrown
    away for a beneficiary of its size. None: every preemption the other rules allow (the baselines)."""
    claim_hold_s: float | None = 60.0
    """The room a preemption makes is its beneficiary's (lane jobs included: ADR 0021's `lane_hold_s`
    is retired into this) while the victims are in their grace and for this many seconds after they
    stop (churn.holds_claimed_room); unfunded lane jobs and unfunded
    starts on GPUs about to be needed wait for the backfill (churn.defers_to_backfill, needed_soon).
    60 s = the restart overhead: the beneficiary normally starts at the instant its room frees. None:
    the freed GPUs go to whoever comes first (the baselines)."""
    consolidation_searches_per_cycle: int = 4
    """Waiting work that fits on no node while idle GPUs lie scattered over several may gather them by
    moving settled unfunded work to idle GPUs elsewhere (churn.relocatable, relocation_fits; the
    cost rule and the held room apply as to any preemption; ADR 0034): this many such waiting jobs
    are looked at per cycle. Needs `claim_hold_s` (the gathered room is held for the job). 0: off
    (the baselines: scattered idle GPUs stay idle until their nodes drain)."""
    consolidation_min_idle_fraction: float = 0.03
    """Consolidation gathers idle GPUs only while at least this fraction of the ready GPUs (every cluster's, the
    cycle's capacity) is idle (churn.idle_to_gather, ADR 0095). Below it the idle GPUs are the cluster's
    turnover, taken within minutes by arriving and lane work: gathering them gained no occupancy on the suite's
    large clusters and nearly doubled their preemptions (the moves, then the lane's preemption of the moved
    work). 0.03: clusters of up to 66 GPUs still gather at 2 idle GPUs, as the drains consolidation is for do
    (ADR 0034: 2 of 48; short-1gpu-n8-l3, 2 of 64, lost 0.028 of occupancy at 0.04); 3 idle GPUs of 128 or 15
    of 512 do not. 0: gather at any idle GPU (ADR 0034 as it was)."""

    # Baseline switches (issue 4): the same cycle runs every policy
    ordering: OrderingMode = "fair_share"
    placement: PlacementMode = "best_fit"
    reservations: bool = True
    gang_packing: bool = True
    """Best fit puts one-node work first on nodes already holding funded work, keeping nodes a
    waiting gang could take at once (free or unfunded only) for gangs (packing.py, ADR 0013)."""
    active_entitlement: bool = True
    """An inner allocation is ranked by the entitlement its projects' demand can use now, and by the
    delivered of its projects with demand: unused entitlement is lent to its siblings (ordering.py,
    ADR 0016). False: every entitlement counts in full (DESIGN.md as written; the baselines)."""
    cluster_fair_share: bool = True
    """Several clusters: an allocation stands on a cluster at the worse of its standing over the tree and its
    standing on that cluster's usage (policy/cluster_share.py, ADR 0076); strict improvement, a victim search
    and the dating of a reservation's releases on a cluster read it. False: the tree's standing everywhere
    (ADR 0057; the baselines). With one cluster both are the same."""
    cluster_order: bool = False
    """Several clusters, with `cluster_fair_share`: the order of waiting jobs per cluster (ADR 0080): each job at
    its allocation's standing on the cluster it accepts where that allocation ranks best (the worse of the
    tree's and the cluster's, `cluster_share.ClusterOrder`), so the jobs of one cluster are in that cluster's
    own order. Off for every preset: measured on the two-cluster family it lowers the budget's worst
    owed/delivered and the occupancy (docs/results.md "The order per cluster"). False: the tree's order."""
    route_by_standing: bool = False
    """Several clusters, with `cluster_fair_share`: among the clusters where a job starts now, the one where its
    allocation's standing is lowest, before the tightest fit (`routing.choose_cluster`, ADR 0090). Off for every
    preset: measured on the two-cluster family it raises the budget's worst allocation and can cost occupancy
    (docs/results.md "Weighted funding and routing by standing"). False: the tightest fit, then the name
    (ADR 0057)."""
    weighted_funding: bool = False
    """The funding quota and its charge in weighted GPUs (ADR 0090: a funded job charged its GPUs × its nodes'
    model weights against entitlement × the ready GPUs' weighted capacity; `funding_weight`). Off for every
    preset: measured on the two-cluster family at 500 jobs it dropped the budget's worst allocation of one seed
    from 0.98 to 0.59 (n8, below both routing baselines), for +/-0.003 at the suite's size (docs/results.md
    "Weighted funding and routing by standing"). False: the quota and charge in plain GPUs (every weight 1 for
    funding; the books stay weighted, ADR 0062). With no weights set both are the same."""
    cheap_victim_s: float | None = 150.0
    """A funded victim losing at most this many seconds of work per GPU may be preempted when the
    order's ranked reading (ADR 0016) alone shows strict improvement; a costlier one needs the in-full
    reading too (preemption.cheap_victim). None: both readings for every victim."""
    overshoot_is_own: bool = True
    """Funding checks the project's own quota only: what a project's last job runs beyond its share
    is not charged against its siblings' part of the parent (contract.funding_path, ADR 0017).
    False: every level of the path (ADR 0002; the baselines)."""
    fairness_preemption: bool = True
    """False: only unfunded work is ever preempted (no preemption for fairness)."""
    preemptible_after_protection: bool = True
    """False: a funded job is never preempted for fairness, even after its protection ends."""
    funding: bool = True
    """False: the pre-budget world; every job counts as funded (charged, protected, never unfunded)."""

    # Cycle bounds (speed; see docs/benchmarks.md)
    reservation_min_gpus: int = 8
    """A blocked gang of at least this many GPUs at the head of the order gets a reservation."""
    reservation_allocations: int = 3
    """Reservations held at once: the blocked head large gang of each of this many allocations, most
    under-served (earliest in the order) first; 1 is the global head gang only."""
    preemption_attempts_per_cycle: int = 32
    """Waiting jobs for which one cycle searches victims; the rest wait for the next cycle."""
    gang_preemption_searches_per_cycle: int = 4
    """Of those, searches for multi-node gangs (each looks at every node); reservations serve the rest."""
    max_tree_depth: int = 8

    def __post_init__(self) -> None:
        _check_settings(self)

    # --- presets (issue 4) ------------------------------------------------------------------------

    @classmethod
    def steward(cls, **overrides: Any) -> PolicySettings:
        """The full policy of DESIGN.md: fair share over a 7-day window, the contract, best-fit
        topology placement, reservations for large gangs, preemption with strict improvement."""
        return cls(**overrides)

    @classmethod
    def ai2(cls, **overrides: Any) -> PolicySettings:
        """Budgets + 7-day window + min-runtime contract, first-fit placement, no reservations."""
        base: dict[str, Any] = {**_NO_LANE, **_NO_CHURN, "placement": "first_fit", "reservations": False}
        return cls(**{**base, **overrides})

    @classmethod
    def fair_tree(cls, **overrides: Any) -> PolicySettings:
        """Slurm-like Fair Tree ordering with usage decay (half-life 7 days), no preemption for
        fairness (only unfunded work is preemptible), first fit, no reservations."""
        base: dict[str, Any] = {
            **_NO_LANE,
            **_NO_CHURN,
            "usage_mode": "decay",
            "half_life_s": 7 * DAY_S,
            "placement": "first_fit",
            "reservations": False,
            "fairness_preemption": False,
            "preemptible_after_protection": False,
        }
        return cls(**{**base, **overrides})

    @classmethod
    def fifo_priority(cls, **overrides: Any) -> PolicySettings:
        """The pre-budget world: strict priority then FIFO, every job funded, nothing preempted."""
        base: dict[str, Any] = {
            **_NO_LANE,
            **_NO_CHURN,
            "ordering": "fifo_priority",
            "placement": "first_fit",
            "reservations": False,
            "fairness_preemption": False,
            "preemptible_after_protection": False,
            "funding": False,
        }
        return cls(**{**base, **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> PolicySettings:
        """A preset by its issue-4 name: `steward`, `ai2`, `fair-tree`, `fifo-priority`."""
        factories = {
            "steward": cls.steward,
            "ai2": cls.ai2,
            "fair-tree": cls.fair_tree,
            "fair_tree": cls.fair_tree,
            "fifo-priority": cls.fifo_priority,
            "fifo_priority": cls.fifo_priority,
        }
        if name not in factories:
            raise InvalidSettings("preset", f"unknown preset {name!r}; one of {sorted(factories)}")
        return factories[name](**overrides)

    def with_(self, **changes: Any) -> PolicySettings:
        """A copy with some knobs changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def model_weight(self, model: str) -> float:
        """Weight of one GPU-second on `model` (DESIGN.md "Usage window": optionally weighted)."""
        return model_weight(self.gpu_model_weights, model)

    def funding_weight(self, model: str) -> float:
        """What a funded GPU of `model` counts against its allocation's quota (ADR 0090): its weight with
        `weighted_funding`, else 1. The one home of the choice: the cycle and the submit preview read it."""
        return model_weight(self.gpu_model_weights, model) if self.weighted_funding else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (for evidence and event payloads)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


_NO_LANE: dict[str, Any] = {"lane": False, "lane_trade": False, "lane_claim": False, "victim_cost_at_stop": False,
                            "unfunded_grace_s": None, "gang_packing": False,
                            "active_entitlement": False, "overshoot_is_own": False, "cluster_fair_share": False}
"""The baselines have no debug lane, give unfunded victims the same grace as funded ones, place by
plain best or first fit (no gang-aware packing, ADR 0013), count every entitlement in full
(ADR 0016), check every level's quota when funding (ADR 0002, not 0017) and rank on the tree's usage alone
with several clusters (ADR 0076)."""

_NO_CHURN: dict[str, Any] = {"settle_s": None, "preemption_gain_horizon_s": None, "claim_hold_s": None,
                             "consolidation_searches_per_cycle": 0}
"""The baselines keep the churn of issue 4's runs: no settle time, no cost rule, no held rooms
(ADR 0028), no consolidation (ADR 0034)."""

PRESETS: tuple[str, ...] = ("steward", "ai2", "fair-tree", "fifo-priority")

RETIRED_SETTINGS: Mapping[str, str] = MappingProxyType({
    "lane_project_gpus": "replaced by each allocation's debug quota (ADR 0029)",
    "lane_hold_s": "folded into claim_hold_s, which holds the room of every beneficiary, lane jobs included (ADR 0028)",
})
"""Settings a recorded `PolicySet` may still name (events are never rewritten) that no longer exist,
with what replaced them."""


def in_force(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded overrides the policy still reads: a log written before a setting was retired
    keeps it in its `PolicySet` events, and the scheduler, the ledger and replay must still start
    from that log (`RETIRED_SETTINGS`)."""
    return {k: v for k, v in recorded.items() if k not in RETIRED_SETTINGS}


def _check_settings(s: PolicySettings) -> None:
    if not isinstance(s.gpu_model_weights, MappingProxyType):
        object.__setattr__(s, "gpu_model_weights", _frozen_weights(s.gpu_model_weights))
    positive = ("window_s", "half_life_s")
    for name in positive:
        if not getattr(s, name) > 0:
            raise InvalidSettings(name, "must be > 0")
    non_negative = (
        "max_min_runtime_s",
        "checkpoint_interval_s",
        "restart_overhead_s",
        "preemption_grace_s",
        "session_cap_s",
    )
    for name in non_negative:
        if not getattr(s, name) >= 0:
            raise InvalidSettings(name, "must be >= 0")
    if s.unfunded_grace_s is not None and not s.unfunded_grace_s >= 0:
        raise InvalidSettings("unfunded_grace_s", "must be >= 0 (or null: the same as preemption_grace_s)")
    if s.cheap_victim_s is not None and not s.cheap_victim_s >= 0:
        raise InvalidSettings("cheap_victim_s", "must be >= 0 (or null: both readings for every victim)")
    for name in ("settle_s", "preemption_gain_horizon_s", "claim_hold_s"):
        value = getattr(s, name)
        if value is not None and not value >= 0:
            raise InvalidSettings(name, "must be >= 0 (or null: the rule is off)")
    if s.lane_trade_max_lost_s is not None and not s.lane_trade_max_lost_s >= 0:
        raise InvalidSettings("lane_trade_max_lost_s", "must be >= 0 (or null: any victim)")
    if s.lane_claim_grace_s is not None and not s.lane_claim_grace_s >= 0:
        raise InvalidSettings("lane_claim_grace_s", "must be >= 0 (or null: the same as preemption_grace_s)")
    if s.lane_max_gpus < 1:
        raise InvalidSettings("lane_max_gpus", "must be >= 1")
    if s.lane_victim_max_gpus < 1:
        raise InvalidSettings("lane_victim_max_gpus", "must be >= 1")
    if not s.debug_quota_share >= 0:  # also rejects NaN
        raise InvalidSettings("debug_quota_share", "must be >= 0 (a fraction of the entitlement)")
    if s.debug_quota_floor_gpus < 0:
        raise InvalidSettings("debug_quota_floor_gpus", "must be >= 0")
    if not s.lane_max_runtime_s >= 0:
        raise InvalidSettings("lane_max_runtime_s", "must be >= 0")
    if s.usage_mode not in ("window", "decay"):
        raise InvalidSettings("usage_mode", f"{s.usage_mode!r} is not 'window' or 'decay'")
    if s.ordering not in ("fair_share", "fifo_priority"):
        raise InvalidSettings("ordering", f"{s.ordering!r} is not 'fair_share' or 'fifo_priority'")
    if s.placement not in ("best_fit", "first_fit"):
        raise InvalidSettings("placement", f"{s.placement!r} is not 'best_fit' or 'first_fit'")
    if s.session_at_cap not in ("stop", "preemptible"):
        raise InvalidSettings("session_at_cap", f"{s.session_at_cap!r} is not 'stop' or 'preemptible'")
    if any(w < 0 for w in s.session_warnings_s):
        raise InvalidSettings("session_warnings_s", "warnings are seconds before the cap, >= 0")
    if any(w < 0 for w in s.gpu_model_weights.values()):
        raise InvalidSettings("gpu_model_weights", "weights must be >= 0")
    if s.reservation_min_gpus < 1:
        raise InvalidSettings("reservation_min_gpus", "must be >= 1")
    if s.reservation_allocations < 1:
        raise InvalidSettings("reservation_allocations", "must be >= 1")
    if s.gang_preemption_searches_per_cycle < 0:
        raise InvalidSettings("gang_preemption_searches_per_cycle", "must be >= 0")
    if s.preemption_attempts_per_cycle < 0:
        raise InvalidSettings("preemption_attempts_per_cycle", "must be >= 0")
    if s.consolidation_searches_per_cycle < 0:
        raise InvalidSettings("consolidation_searches_per_cycle", "must be >= 0 (0: no consolidation)")
    if not 0.0 <= s.consolidation_min_idle_fraction <= 1.0:
        raise InvalidSettings("consolidation_min_idle_fraction", "must be in [0, 1] (0: gather at any idle GPU)")
    if not 1 <= s.max_tree_depth <= 8:
        raise InvalidSettings("max_tree_depth", "must be in [1, 8] (DESIGN.md: any depth up to 8)")


def model_weight(weights: Mapping[str, float], model: str) -> float:
    """DESIGN.md "Clusters and GPU models": budget units per GPU-hour of `model`, 1.0 when none is set. The one
    home of the rule: the scheduler's usage (`PolicySettings.model_weight`) and the books
    (`steward.domain.budget.weight`) both read it."""
    return float(weights.get(model, 1.0))
