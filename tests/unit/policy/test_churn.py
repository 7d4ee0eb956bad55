"""Bounded churn (DESIGN.md "The time-slicing contract": "Churn is bounded"; ADR 0028): the settle
time, a preemption's cost against its beneficiary's gain, the room held for a beneficiary, and no
unfunded start on GPUs that waiting funded work will need."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.churn import (
    WORTH_RULE,
    needed_soon,
    settled,
    soonest_release,
    victim_cost_gpu_s,
    worth_preempting,
)
from steward.policy.cycle import schedule
from steward.policy.model import CycleResult, PendingJob, RunningJob, Snapshot
from steward.policy.reasons import PREEMPTION_COSTS_MORE
from steward.sim.run import simulate
from steward.sim.scenario import load_scenario
from tests.unit.policy.builders import HOUR, NOW, node, nodes, pending, placed, preempted, running, snapshot, tree
from tests.unit.sim.builders import job, write_scenario

S = PolicySettings.steward()
AI2 = PolicySettings.ai2()


# --- the rules, one by one -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ran_s", "s", "expected"),
    [
        (0.0, S, False),  # just (re)started
        (299.0, S, False),
        (300.0, S, True),  # the default settle time: 300 s
        (5000.0, S, True),
        (0.0, AI2, True),  # the baselines have none
        (10.0, S.with_(settle_s=10.0), True),
    ],
)
def test_settled(ran_s: float, s: PolicySettings, expected: bool) -> None:
    assert settled(running("v", started_at=NOW - ran_s), NOW, s) is expected


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # resumable, checkpointed 100 s ago, unfunded (20 s grace): 100 + 20 lost, + 60 restart, x 2 GPUs
        (running("v", gpus=2, funded=False, resumable=True, last_checkpoint_at=NOW - 100), 2 * (120 + 60)),
        # not resumable: everything since the start (2 h) and the grace (120 s funded) is lost
        (running("v", started_at=NOW - 2 * HOUR, resumable=False), 2 * HOUR + 120 + 60),
        # a periodic checkpoint (every 1800 s) falls inside the grace: only what follows it is lost
        (running("v", started_at=NOW - 1790, resumable=True), (1790 + 120 - 1800) + 60),
        # already leaving: nothing more
        (running("v", preemption_requested_at=NOW - 5), 0.0),
    ],
)
def test_victim_cost(job: RunningJob, expected: float) -> None:
    assert victim_cost_gpu_s(job, NOW, S) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("gpus", "start_by", "without", "cost", "s", "allowed", "gain"),
    [
        (1, NOW + 20, math.inf, 1000.0, S, True, 1780.0),  # nothing visible frees: the horizon bounds it
        (1, NOW + 20, math.inf, 2000.0, S, False, 1780.0),  # costs more than a 1-GPU job can gain
        (8, NOW + 20, math.inf, 2000.0, S, True, 8 * 1780.0),  # a bigger beneficiary gains more
        (1, NOW + 120, NOW + 100, 60.0, S, False, 0.0),  # a release comes sooner than the preemption
        (2, NOW + 20, NOW + 320, 500.0, S, True, 600.0),  # 300 s sooner on 2 GPUs
        (2, NOW + 20, NOW + 320, 700.0, S, False, 600.0),
        (1, NOW + 20, math.inf, 1e9, AI2, True, math.inf),  # the baselines: no such rule
    ],
)
def test_worth_preempting(gpus: int, start_by: float, without: float, cost: float, s: PolicySettings,
                          allowed: bool, gain: float) -> None:
    check = worth_preempting(gpus, NOW, start_by, without, cost, s)
    assert check.allowed is allowed
    assert check.gain_gpu_s == pytest.approx(gain)


@pytest.mark.parametrize(
    ("gpus", "free", "releases", "expected"),
    [
        (1, [1, 0], {}, NOW),
        (2, [1, 0], {0: [(NOW + 50, 1)]}, NOW + 50),
        (2, [1, 0], {0: [(NOW + 50, 0), (NOW + 90, 1)], 1: [(NOW + 70, 2)]}, NOW + 70),
        (4, [1, 0], {0: [(NOW + 50, 1)]}, math.inf),  # completions are not visible
        (2, [1, 1], {0: [(NOW + 50, 1)], 1: [(NOW + 30, 1)]}, NOW + 30),  # every node with jobs leaving
    ],
)
def test_soonest_release(gpus: int, free: list[int], releases: dict[int, list[tuple[float, int]]],
                         expected: float) -> None:
    assert soonest_release(gpus, free, [True, True], releases, NOW, max(free)) == expected


@pytest.mark.parametrize(
    ("free", "released_soon", "least", "expected"),
    [(1, 1, 2, True), (0, 1, 2, False), (1, 0, 2, False), (3, 1, 8, False)],
)
def test_needed_soon(free: int, released_soon: int, least: float, expected: bool) -> None:
    assert needed_soon(free, released_soon, least) is expected


# --- the rules in the cycle ------------------------------------------------------------------------


def one_gpu(*jobs: RunningJob, pend: tuple[PendingJob, ...] = (), s: PolicySettings = S, gpus: int = 1) -> Snapshot:
    return snapshot(nodes=(node("n0", gpus),), tree=tree(a=1.0), running=jobs, pending=pend, settings=s)


@pytest.mark.parametrize(
    ("victim", "s", "preempts"),
    [
        # cheap: unfunded, resumable, checkpointed 60 s ago
        (running("u", "x", funded=False, resumable=True, last_checkpoint_at=NOW - 60), S, True),
        # costly: unfunded, cannot checkpoint, has run 2 h (7,200 GPU-s lost for 1,780 gained)
        (running("u", "x", funded=False, resumable=False), S, False),
        (running("u", "x", funded=False, resumable=False), AI2, True),  # the baselines preempt it
        # settling: unfunded, started 100 s ago
        (running("u", "x", funded=False, started_at=NOW - 100), S, False),
        (running("u", "x", funded=False, started_at=NOW - 100), AI2, True),
        (running("u", "x", funded=False, started_at=NOW - 400, resumable=True, last_checkpoint_at=None), S, True),
    ],
)
def test_preemption_allowed_or_refused(victim: RunningJob, s: PolicySettings, preempts: bool) -> None:
    result = schedule(one_gpu(victim, pend=(pending("j", "a", 1),), s=s))
    assert ("u" in preempted(result)) is preempts
    if preempts and s.preemption_gain_horizon_s is not None:
        churn = result.preemptions[0].evidence["churn"]
        assert churn["rule"] == WORTH_RULE and churn["allowed"] and churn["cost_gpu_s"] <= churn["gain_gpu_s"]


def test_a_refusal_is_evidence_and_why_pending() -> None:
    result = schedule(one_gpu(running("u", "x", funded=False, resumable=False), pend=(pending("j", "a", 1),)))
    assert not result.preemptions
    refused = result.evidence["preemptions_refused"]
    assert [r["job_id"] for r in refused] == ["j"]
    assert refused[0]["victims"] == ["u"] and refused[0]["cost_gpu_s"] > refused[0]["gain_gpu_s"]
    assert result.explanations["j"].reason == PREEMPTION_COSTS_MORE


def test_a_lane_preemption_waits_for_the_settle_time() -> None:
    victim = running("v", "a", started_at=NOW - 100, protected_for=30.0, min_runtime_s=30.0, klass="debug")
    lane_job = pending("d", "b", 1, min_runtime_s=300.0, klass="debug")
    snap = snapshot(nodes=(node("n0", 1),), tree=tree(a=0.5, b=0.5), running=(victim,), pending=(lane_job,),
                    usage={"a": 1e6})
    assert preempted(schedule(snap)) == {}
    later = snapshot(nodes=(node("n0", 1),), tree=tree(a=0.5, b=0.5), running=(victim,), pending=(lane_job,),
                     usage={"a": 1e6}, now=NOW + 200)
    assert preempted(schedule(later)) == {"v": "d"}


def test_the_room_being_made_is_held_for_its_beneficiary() -> None:
    """n0 (2 GPUs): one free, one held by a victim in its grace for `j` (2 GPUs). The free GPU goes
    neither to the funded job behind it nor to unfunded work, and `j` is not searched victims for
    again. Without the hold (the baselines), `k` takes the free GPU and `j` must preempt again."""
    victim = running("v", "x", funded=False, preemption_requested_at=NOW - 5, claimed_for="j")
    waiting = (pending("j", "a", 2), pending("k", "a", 1, submitted_at=10.0), pending("u", "x", 1))
    held = schedule(one_gpu(victim, pend=waiting, gpus=2))
    assert placed(held) == {} and held.preemptions == ()
    assert held.evidence["rooms_held"] == ["j"]
    assert held.explanations["j"].evidence["room_held"] is True
    base = schedule(one_gpu(victim, pend=waiting, gpus=2, s=AI2))
    assert placed(base) == {"k": (("n0", 1),)}  # the baselines keep today's behaviour


GANG_ROOMS = [
    # (settings, gang GPUs, nodes per block, victims' nodes, nodes busy with protected work, the nodes
    # its room holds, where `k` goes).
    # Issue 18's gang-heavy regression: the whole-cluster gang's free nodes (free at the preemption,
    # or freed by an unfunded victim that stopped first) went to `k`, whose protection then blocked
    # the gang for an hour, until it preempted again.
    (S, 32, 4, ("n0", "n1"), (), ["n0", "n1", "n2", "n3"], None),
    (S, 32, 4, ("n0",), (), ["n0", "n1", "n2", "n3"], None),
    # a gang of one block: its room is in its victims' block, the other block's free node stays open
    (S, 16, 2, ("n0",), ("n3",), ["n0", "n1"], ("n2", 8)),
    # no domain has the whole free nodes it needs (n3 is busy): its victims' nodes only
    (S, 32, 4, ("n0",), ("n3",), ["n0"], ("n1", 8)),
    (AI2, 32, 4, ("n0", "n1"), (), None, ("n2", 8)),  # the baselines hold nothing
]


@pytest.mark.parametrize(("s", "gpus", "per_block", "victims_on", "busy_on", "held", "k_on"), GANG_ROOMS)
def test_a_gangs_held_room_spans_the_whole_free_nodes_it_counted_on(
        s: PolicySettings, gpus: int, per_block: int, victims_on: tuple[str, ...], busy_on: tuple[str, ...],
        held: list[str] | None, k_on: tuple[str, int] | None) -> None:
    """A multi-node gang `g` whose victims are in their grace holds their nodes and the wholly free
    nodes it still needs in their domain (its own: one block); `k` (8 GPUs, funded, first in the order) gets only what
    is left."""
    victims = [running(f"v{i}", "b", 8, on=n, preemption_requested_at=NOW - 30, claimed_for="g")
               for i, n in enumerate(victims_on)]
    busy = [running(f"w{i}", "b", 8, on=n, started_at=NOW - 60) for i, n in enumerate(busy_on)]
    snap = snapshot(nodes=nodes(4, per_block=per_block), tree=tree(a=0.5, b=0.5), running=(*victims, *busy),
                    pending=(pending("k", "b", 8), pending("g", "a", gpus, submitted_at=10.0, topology_depth=1)),
                    settings=s,
                    usage={"a": 0.0, "b": 1e3})
    result = schedule(snap)
    assert placed(result) == ({"k": (k_on,)} if k_on else {})
    assert result.preemptions == ()
    if held is not None:
        assert result.evidence["rooms_held"] == ["g"]
        assert result.explanations["g"].evidence["nodes"] == held


def test_the_freed_room_goes_to_its_beneficiary_first() -> None:
    """`k` is ahead of `j` in the order, but the room was freed for `j` 10 s ago."""
    waiting = (pending("k", "a", 1, submitted_at=0.0), pending("j", "a", 1, submitted_at=50.0, room_freed_at=NOW - 10))
    result = schedule(one_gpu(pend=waiting))
    assert placed(result) == {"j": (("n0", 1),)}
    assert placed(schedule(one_gpu(pend=waiting, s=AI2))) == {"k": (("n0", 1),)}


def test_no_unfunded_lane_start_ahead_of_the_order() -> None:
    """A debug job of a project with no allocation is a lane job, but the lane would run it unfunded:
    it waits for the backfill, behind the funded job that needs the GPU."""
    waiting = (pending("d", "x", 1, min_runtime_s=300.0, klass="debug"), pending("j", "a", 1, submitted_at=10.0))
    assert placed(schedule(one_gpu(pend=waiting))) == {"j": (("n0", 1),)}


def test_no_unfunded_start_on_gpus_about_to_be_needed() -> None:
    """n0: 1 free GPU and a job leaving in 30 s (no beneficiary); a funded 2-GPU job is blocked and no
    search reached it this cycle (searches are bounded per cycle). The free GPU is not given to
    unfunded work that would be preempted before its restart is paid."""
    leaving = running("v", "a", preemption_requested_at=NOW - 90)  # 120 s grace: ends in 30 s
    blocker = running("w", "a", on="n1", gpus=2, started_at=NOW - 60)  # protected
    waiting = (pending("j", "a", 2), pending("u", "x", 1))
    for s, backfilled in ((S, False), (AI2, True)):
        snap = snapshot(nodes=(node("n0", 2), node("n1", 2)), tree=tree(a=1.0), running=(leaving, blocker),
                        pending=waiting, settings=s.with_(preemption_attempts_per_cycle=0))
        assert ("u" in placed(schedule(snap))) is backfilled


# --- invariants over random runs -------------------------------------------------------------------

ROW = st.tuples(
    st.integers(0, 3000),  # submit
    st.integers(30, 4000),  # duration
    st.sampled_from([1, 1, 1, 2]),  # gpus
    st.sampled_from(["a", "b", "x"]),  # tenant ("x": no allocation)
    st.sampled_from(["batch", "debug"]),
    st.sampled_from([0, 120, 600, 1800]),  # min_runtime
    st.sampled_from([0, 1]),  # resumable
)


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(ROW, min_size=3, max_size=24))
def test_no_unfunded_or_lane_preemption_within_settle_and_protection_holds(
        rows: list[tuple[Any, ...]], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Across random runs of the simulator: no victim is preempted for an unfunded or lane reason
    before it has run its settle time, and no funded job inside its protection is preempted."""
    folder = tmp_path_factory.mktemp("churn")
    path = write_scenario(folder, [job(f"j{k}", *row) for k, row in enumerate(rows)], nodes=2, gpus_per_node=2,
                          tree={"a": 0.5, "b": 0.5})
    seen: list[tuple[float, RunningJob, dict[str, Any]]] = []

    def cycle(snap: Snapshot) -> CycleResult:
        result = schedule(snap)
        jobs = {r.id: r for r in snap.running}
        seen.extend((snap.now, jobs[p.victim_id], p.evidence) for p in result.preemptions)
        return result

    result = simulate(load_scenario(path), "steward", scheduler=cycle)
    assert result.figures["protection_violations"] == 0
    settle = S.settle_s
    assert settle is not None
    for now, victim, evidence in seen:
        assert not (victim.funded and now < victim.protected_until)
        if not victim.funded or evidence["lane"]:
            assert now - victim.started_at >= settle, (victim.id, now, victim.started_at)
