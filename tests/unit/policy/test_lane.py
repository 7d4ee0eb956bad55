"""The debug lane (ADR 0007, 0029; DESIGN.md "Debug quota and the time-to-first-GPU SLO"), through
the cycle."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.lane import is_lane_job
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, placed, preempted, running, snapshot, tree

S = PolicySettings.steward()


@pytest.mark.parametrize(
    ("klass", "min_runtime_s", "gpus", "settings", "expected"),
    [
        ("debug", 600.0, 1, S, True),
        ("debug", 900.0, 2, S, True),
        ("debug", 901.0, 1, S, False),  # too long a protection
        ("debug", 600.0, 3, S, False),  # too many GPUs
        ("debug", 0.0, 1, S, False),  # asks for no protection: unfunded by choice, no lane
        ("interactive", 0.0, 1, S, True),  # a session (protected for its cap)
        ("batch", 600.0, 1, S, False),
        ("debug", 600.0, 1, PolicySettings.ai2(), False),  # the baselines have no lane
        ("debug", 600.0, 1, PolicySettings.fair_tree(), False),
        ("debug", 600.0, 1, PolicySettings.fifo_priority(), False),
    ],
)
def test_which_jobs_are_lane_jobs(klass, min_runtime_s, gpus, settings, expected):
    assert is_lane_job(klass, min_runtime_s, gpus, settings) is expected


def test_a_debug_job_goes_ahead_of_the_fair_share_order():
    # b is far more under-served than a, so b's batch job is first in the order (and a's entitlement
    # is used); a's debug job still takes the one free GPU
    result = schedule(
        snapshot(
            nodes=nodes(1),
            usage={"a": 1e7, "b": 0.0},
            running=[running("r", "a", 7, protected_for=10 * HOUR)],
            pending=[pending("batch", "b", 1), pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
        )
    )
    assert set(placed(result)) == {"dbg"}
    evidence = result.placements[0].evidence
    # a: 0.5 x 8 GPUs x 0.5 = 2 -> the floor, 4; nothing of its debug work runs or waits ahead
    assert evidence["qualified"] is True
    assert evidence["lane"] == {"qualified": True, "reason": "within_quota", "quota_gpus": 4, "in_use_gpus": 0,
                                "ahead_gpus": 0, "funded_by_lane": True}
    # without the lane the fair-share order decides
    result = schedule(
        snapshot(
            nodes=nodes(1),
            usage={"a": 1e7, "b": 0.0},
            running=[running("r", "a", 7, protected_for=10 * HOUR)],
            pending=[pending("batch", "b", 1), pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
            settings=S.with_(lane=False),
        )
    )
    assert set(placed(result)) == {"batch"}


@pytest.mark.parametrize(("quota", "held", "expected"), [
    (2, 2, {"batch"}),          # a runs 2 debug GPUs: its debug job waits its fair-share turn, behind b's
    (3, 2, {"dbg"}),            # one more GPU of quota: it goes first (and b's job no longer fits)
    (0, 0, {"batch"}),          # a manager may set 0: no debug work of a goes ahead of the order
])
def test_the_debug_quota_per_allocation(quota, held, expected):
    debug = [running(f"d{i}", "a", 1, klass="debug", min_runtime_s=300.0, protected_for=300.0,
                     started_at=NOW - 10, submitted_at=NOW - 20) for i in range(held)]
    result = schedule(
        snapshot(
            nodes=nodes(1),
            tree=tree(a=0.5, b=0.5).with_debug_quota("a", quota),
            usage={"a": 1e7, "b": 0.0},
            running=debug,
            pending=[pending("batch", "b", 8 - held),
                     pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug", submitted_at=NOW)],
        )
    )
    assert set(placed(result)) == expected
    why = result.explanations.get("dbg")
    if why is not None:  # over the quota: "why pending" says so, with the figures
        assert why.evidence["debug_quota"] == {"qualified": False, "reason": "over_quota", "quota_gpus": quota,
                                               "in_use_gpus": held, "ahead_gpus": 0}


def test_a_burst_places_only_its_quota_ahead_of_the_order():
    """Issue 4: bursts of debug jobs of one project over the lane's cap. Quota 3: three of a's five
    debug jobs go first; the other two wait behind b's batch job as ordinary funded work."""
    burst = [pending(f"dbg{i}", "a", 1, min_runtime_s=300.0, klass="debug", submitted_at=float(i)) for i in range(5)]
    result = schedule(
        snapshot(
            nodes=nodes(1),
            tree=tree(a=0.5, b=0.5).with_debug_quota("a", 3),
            usage={"a": 1e7, "b": 0.0},
            pending=[pending("batch", "b", 5), *burst],
        )
    )
    assert set(placed(result)) == {"dbg0", "dbg1", "dbg2", "batch"}
    assert [p.evidence["lane"]["ahead_gpus"] for p in result.placements if "lane" in p.evidence] == [0, 1, 2]
    why = result.explanations["dbg3"]
    assert why.evidence["debug_quota"]["reason"] == "over_quota"
    assert why.text.endswith("; over its allocation's debug quota (debug quota 3 GPUs, 0 in use, 3 waiting ahead): "
                             "it waits as ordinary funded work")


def test_a_lane_job_takes_unfunded_work_first_with_the_short_grace():
    victims = [
        running("funded_old", "b", 1, protected_for=HOUR, last_checkpoint_at=NOW - 5),  # cheapest lost work
        running("unfunded", "b", 1, funded=False, last_checkpoint_at=NOW - 600),
        running("protected", "b", 6, started_at=NOW - 60, protected_for=HOUR),
    ]
    result = schedule(
        snapshot(
            nodes=nodes(1),
            usage={"a": 0.0, "b": 1e7},
            running=victims,
            pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
        )
    )
    assert preempted(result) == {"unfunded": "dbg"}
    assert result.preemptions[0].grace_ends_at == NOW + S.unfunded_grace_s


def test_a_lane_job_over_its_entitlement_is_funded_by_the_lane_and_may_preempt_unfunded_work():
    # a's entitlement (half of 8 GPUs) is used by its own funded work: a normal job of a would run
    # unfunded; a lane job is funded by the lane and takes the unfunded job's GPUs
    held = [
        running("a_work", "a", 4, protected_for=10 * HOUR),
        *(running(f"unfunded{i}", "b", 1, funded=False, last_checkpoint_at=NOW - 10 * (i + 1)) for i in range(4)),
    ]
    result = schedule(
        snapshot(
            nodes=nodes(1),
            usage={"a": 0.0, "b": 0.0},
            running=held,
            pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
        )
    )
    assert preempted(result) == {"unfunded0": "dbg"}  # the least lost work
    # and with the lane off it may not (it would be unfunded: only funded work preempts)
    result = schedule(
        snapshot(
            nodes=nodes(1),
            usage={"a": 0.0, "b": 0.0},
            running=held,
            pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
            settings=S.with_(lane=False),
        )
    )
    assert preempted(result) == {}


def test_a_lane_job_never_preempts_protected_work_nor_breaks_strict_improvement():
    held = [running("prot", "b", 8, started_at=NOW - 60, protected_for=HOUR)]
    result = schedule(
        snapshot(nodes=nodes(1), usage={"a": 0.0, "b": 1e7}, running=held,
                 pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")])
    )
    assert preempted(result) == {}
    held = [running("done", "b", 8)]  # out of protection, but b is the more under-served
    result = schedule(
        snapshot(nodes=nodes(1), usage={"a": 1e7, "b": 0.0}, running=held,
                 pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")])
    )
    assert preempted(result) == {}


def test_work_with_no_allocation_is_not_qualified_and_never_preempts():
    held = [running("unfunded", "b", 8, funded=False)]
    result = schedule(
        snapshot(nodes=nodes(1), tree=tree(a=0.5, b=0.5), running=held,
                 pending=[pending("dbg", "nobody", 1, min_runtime_s=300.0, klass="debug")])
    )
    assert preempted(result) == {}
    assert "debug_quota" not in result.explanations["dbg"].evidence


@pytest.mark.parametrize(("victim_gpus", "limit", "expected"), [(2, 2, True), (4, 2, False), (4, 4, True)])
def test_a_lane_job_takes_no_victim_larger_than_the_limit(victim_gpus, limit, expected):
    """ADR 0007: stopping an 8-GPU job for a 1-GPU debug job leaves GPUs nothing waiting can use."""
    held = [running("big", "b", victim_gpus, funded=False),
            running("prot", "b", 8 - victim_gpus, started_at=NOW - 60, protected_for=HOUR)]
    result = schedule(
        snapshot(nodes=nodes(1), usage={"a": 0.0, "b": 1e7}, running=held,
                 pending=[pending("dbg", "a", 1, min_runtime_s=300.0, klass="debug")],
                 settings=S.with_(lane_victim_max_gpus=limit))
    )
    assert preempted(result) == ({"big": "dbg"} if expected else {})
