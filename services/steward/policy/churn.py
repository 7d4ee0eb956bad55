"""Bounded churn (DESIGN.md "The time-slicing contract": "Churn is bounded. A preemption costs the
victim's work since its last checkpoint, its restart overhead and the grace it occupies; the policy
preempts only where the beneficiary's gain outweighs that cost, never re-preempts a just-restarted
job for an unfunded or lane reason within a settle time, and does not start unfunded work on GPUs
that waiting work will need within the restart overhead"; ADR 0028).

Four rules, each a small function the cycle calls:

- `settled`: the settle time of a (re)started job before an unfunded or lane preemption.
- `worth_preempting`: a preemption's cost (`victim_cost_gpu_s`) against its beneficiary's gain (the
  GPU-seconds of earlier start, bounded by `soonest_release` and a horizon).
- `claimed_rooms` / `holds_claimed_room`: the room a preemption makes is its beneficiary's until it
  starts (the cause of the loop: the freed GPUs went back to unfunded work, and the beneficiary
  preempted again).
- `defers_to_backfill` / `needed_soon`: unfunded work is not started ahead of the order, nor on GPUs
  that a blocked funded job will take within the restart overhead.
- `relocatable` / `relocation_fits`: idle GPUs scattered over nodes are gathered for waiting work
  that fits nowhere by moving settled unfunded work to idle GPUs elsewhere (consolidation, ADR 0034),
  `idle_to_gather`: only where enough of the cluster is idle for the gathering to gain (ADR 0095).

Pure: time is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import grace_s
from steward.policy.model import PendingJob, RunningJob
from steward.policy.preemption import work_lost_by_stop_s

WORTH_RULE = "preemption_worth_its_cost"
CONSOLIDATE_RULE = "consolidate_idle_capacity"


def settled(job: RunningJob, now: float, settings: PolicySettings) -> bool:
    """DESIGN.md "never re-preempts a just-restarted job for an unfunded or lane reason within a
    settle time": True once the job has run `settle_s` since its last start (always, without one)."""
    settle = settings.settle_s
    return settle is None or now - job.started_at >= settle


def lost_per_gpu_s(job: RunningJob, now: float, settings: PolicySettings, grace: float | None = None) -> float:
    """The work per GPU a victim asked to stop now loses when it stops at the end of its grace
    (`preemption.work_lost_by_stop_s`: the work since its last checkpoint plus the grace it runs,
    less what a periodic checkpoint inside the grace keeps). A job already leaving loses nothing
    more. `grace`: the grace it would get, when not the contract's (a claim's victim, ADR 0099)."""
    if job.preemption_requested_at is not None:
        return 0.0
    since = job.started_at
    ckpt = job.last_checkpoint_at
    if job.resumable and ckpt is not None and ckpt > since:
        since = ckpt
    return work_lost_by_stop_s(now - since, grace_s(job.funded, settings) if grace is None else grace,
                               job.resumable, settings.checkpoint_interval_s)


def victim_cost_gpu_s(job: RunningJob, now: float, settings: PolicySettings, grace: float | None = None) -> float:
    """DESIGN.md "A preemption costs the victim's work since its last checkpoint, its restart overhead
    and the grace it occupies": the work it loses when it stops at the end of its grace
    (`lost_per_gpu_s`), plus the restart overhead, in GPU-seconds. A job already leaving costs
    nothing more. `grace`: as `lost_per_gpu_s`'s."""
    if job.preemption_requested_at is not None:
        return 0.0
    return job.gpus * (lost_per_gpu_s(job, now, settings, grace) + settings.restart_overhead_s)


def soonest_release(gpus: int, free: Sequence[int], visible: Sequence[bool],
                    releases: Mapping[int, Sequence[tuple[float, int]]], now: float, most_free: int) -> float:
    """The soonest time the policy can see `gpus` GPUs free on one node without a new preemption:
    a node's free GPUs plus the GPUs of jobs already leaving it (each at its grace end). Completion
    times are unknown to the policy, and a protection expiry frees nothing by itself (it only makes a
    job a candidate for another preemption), so neither counts. `inf` when nothing visible frees
    enough (a multi-node gang: the caller passes no releases).

    `most_free` is the most free GPUs on one visible node (`CapacityIndex.max_free`): when it holds
    the job, now; else only the nodes with jobs leaving them can, so only those are visited."""
    if most_free >= gpus:
        return now
    best = math.inf
    for i, rel in releases.items():
        if not visible[i]:
            continue
        acc = free[i]
        for t, g in rel:
            acc += g
            if acc >= gpus:
                if t < best:
                    best = t
                break
    return best


@dataclass(frozen=True, slots=True)
class ChurnCheck:
    """The inputs and outcome of `worth_preempting`, as recorded on the preemption (or on the cycle
    when refused)."""

    gain_gpu_s: float
    cost_gpu_s: float
    start_by_preemption: float
    start_without: float
    horizon_s: float
    allowed: bool

    def evidence(self) -> dict[str, Any]:
        return {
            "rule": WORTH_RULE,
            "gain_gpu_s": self.gain_gpu_s,
            "cost_gpu_s": self.cost_gpu_s,
            "start_by_preemption": self.start_by_preemption,
            "start_without": None if math.isinf(self.start_without) else self.start_without,
            "horizon_s": self.horizon_s,
            "allowed": self.allowed,
        }


def worth_preempting(gpus: int, now: float, start_by_preemption: float, start_without: float,
                     cost_gpu_s: float, settings: PolicySettings) -> ChurnCheck:
    """DESIGN.md "the policy preempts only where the beneficiary's gain outweighs that cost".

    The gain is the GPU-seconds of earlier start the beneficiary gets: its GPUs times the time between
    the start the preemption gives it (the last victim's grace end) and the start it would get
    without it (`soonest_release`), that wait bounded by `preemption_gain_horizon_s` (the policy
    cannot see completions, so an unseen release counts as at most the horizon away). The preemption
    is allowed when the victims' cost (`victim_cost_gpu_s`, summed) is at most the gain. With no
    horizon set, every preemption is allowed (the baselines)."""
    horizon = settings.preemption_gain_horizon_s
    if horizon is None:
        return ChurnCheck(math.inf, cost_gpu_s, start_by_preemption, start_without, math.inf, True)
    without = start_without if start_without < now + horizon else now + horizon
    gain = gpus * max(0.0, without - start_by_preemption)
    return ChurnCheck(gain, cost_gpu_s, start_by_preemption, start_without, horizon, cost_gpu_s <= gain)


def claimed_rooms(running: Iterable[RunningJob]) -> dict[str, list[RunningJob]]:
    """The jobs in their grace, by the waiting job each stops for (`RunningJob.claimed_for`, ADR 0021)."""
    out: dict[str, list[RunningJob]] = {}
    for job in running:
        if job.preemption_requested_at is not None and job.claimed_for is not None:
            out.setdefault(job.claimed_for, []).append(job)
    return out


def holds_claimed_room(job: PendingJob, victims: Sequence[RunningJob], now: float,
                       settings: PolicySettings) -> bool:
    """DESIGN.md "does not start unfunded work on GPUs that waiting work will need" (ADR 0028): the
    room a preemption makes is its beneficiary's — while its victims are in their grace, and for
    `claim_hold_s` after the last of them stopped (`PendingJob.room_freed_at`) — so the next cycle
    neither gives those GPUs to other work nor searches (and preempts) again for the job. ADR 0021's
    lane hold, for every beneficiary: the only hold (`lane_hold_s` is retired into `claim_hold_s`)."""
    hold = settings.claim_hold_s
    if hold is None:
        return False
    if victims:
        return True
    t = job.room_freed_at
    return t is not None and now - t <= hold


def defers_to_backfill(lane_funded: bool, settings: PolicySettings) -> bool:
    """DESIGN.md "Unfunded occupancy ... runs only on idle capacity" and "does not start unfunded work
    on GPUs that waiting work will need": a lane job the lane would run unfunded (no allocation, or
    no protection asked) is not started ahead of the fair-share order; it waits for the backfill of
    idle capacity (the first funded job that needed its GPUs preempted it at once, and the lane put
    it back)."""
    return settings.claim_hold_s is not None and not lane_funded


def needed_soon(free: int, released_soon: int, blocked_min_gpus: float) -> bool:
    """DESIGN.md "does not start unfunded work on GPUs that waiting work will need within the restart
    overhead": a node's free GPUs, with the GPUs of jobs leaving it within the restart overhead, hold
    the smallest blocked funded job: an unfunded start there would be preempted before it has paid
    its own restart."""
    return released_soon > 0 and free + released_soon >= blocked_min_gpus


def relocatable(job: RunningJob, now: float, settings: PolicySettings) -> bool:
    """DESIGN.md "Unfunded occupancy ... runs only on idle capacity, is not charged, and is
    preemptible" and "never re-preempts a just-restarted job for an unfunded ... reason within a
    settle time" (ADR 0034): unfunded work on one node, not leaving already, that has run its settle
    time, may be moved to idle GPUs elsewhere so that the idle GPUs of its node can be gathered for
    waiting work that fits nowhere. Sessions are not moved (a researcher is at the keyboard)."""
    return (
        not job.funded
        and job.preemption_requested_at is None
        and job.klass != "interactive"
        and len(job.placement) == 1
        and settled(job, now, settings)
    )


def idle_to_gather(idle_gpus: int, capacity_gpus: int, settings: PolicySettings) -> bool:
    """DESIGN.md "Churn is bounded" ("the policy preempts only where the beneficiary's gain outweighs that
    cost") and "Unfunded occupancy ... runs only on idle capacity" (ADR 0095): consolidation gathers idle GPUs
    only while they are at least `consolidation_min_idle_fraction` of the ready GPUs (`capacity_gpus`: the
    cycle's, every cluster's; the fraction per cluster is left to an issue of its own). Fewer are the
    turnover of a full cluster that keeps receiving work, not idle capacity: arriving and lane work takes them
    within minutes, so a move's gain (its beneficiary's GPUs for up to the gain horizon) is not there, and it
    costs twice: the moved jobs' preemptions, then the lane's preemption of the moved work when the next
    qualified debug job finds no idle GPU."""
    return idle_gpus > 0 and idle_gpus >= settings.consolidation_min_idle_fraction * capacity_gpus


def relocation_fits(victims: Sequence[int], nodes_by_free: Sequence[int]) -> list[int] | None:
    """DESIGN.md "Unfunded occupancy ... runs only on idle capacity" (ADR 0034): a consolidation moves
    work only where it can start again at once, on idle GPUs of other nodes. `victims` are the GPUs
    of the jobs to move (each on one node), `nodes_by_free[f]` the number of other visible nodes
    with f free GPUs. Best fit, largest first (the backfill's placement rule): the counts after the
    move, or None when some job would have nowhere to go (then nothing moves: it would be preempted,
    not moved)."""
    counts = list(nodes_by_free)
    top = len(counts)
    for g in sorted(victims, reverse=True):
        f = g
        while f < top and counts[f] == 0:
            f += 1
        if f >= top:
            return None
        counts[f] -= 1
        counts[f - g] += 1
    return counts
