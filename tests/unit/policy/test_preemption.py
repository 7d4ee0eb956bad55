"""Preemption rules (DESIGN.md "The time-slicing contract"), through the cycle."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.placement import CapacityIndex
from steward.policy.preemption import Branches, VictimSearch, divergence, strictly_improves
from steward.policy.reasons import OUTRANKED, PREEMPTING, RESERVED, WAITING_FOR_PROTECTION
from tests.unit.policy.builders import HOUR, NOW, node, nodes, pending, placed, preempted, running, snapshot, tree

T = HOUR  # the waiting job's protection (min_runtime 1 h)
E = 0.5 * 8 * 7 * 86400  # entitled-in-window of a half share of one 8-GPU node


def one_node(victims, waiting, usage, settings=None, n=1):
    return schedule(
        snapshot(
            nodes=nodes(n), tree=tree(a=0.5, b=0.5), usage=usage, running=victims, pending=waiting, settings=settings
        )
    )


@pytest.mark.parametrize(
    ("victim", "usage", "settings", "expected", "reason"),
    [
        # funded, past protection, victim's allocation far more served: preempt
        (running("rb", "b", 8), {"a": 0, "b": 1e7}, None, {"rb": "pa"}, None),
        # not strictly more under-served after the move: keep
        (running("rb", "b", 8), {"a": 0, "b": 0}, None, {}, OUTRANKED),
        # inside protection: never; the blocked head gang holds the node until the protection ends
        # (ADR 0007: reservations are made before anything is placed, even on a full cluster)
        (running("rb", "b", 8, started_at=NOW - 10), {"a": 0, "b": 1e7}, None, {}, RESERVED),
        # the same in a policy without reservations
        (
            running("rb", "b", 8, started_at=NOW - 10),
            {"a": 0, "b": 1e7},
            PolicySettings(reservations=False),
            {},
            WAITING_FOR_PROTECTION,
        ),
        # unfunded: preemptible whatever the ranks, once it has run its settle time (ADR 0028)
        (running("rb", "b", 8, funded=False, started_at=NOW - 300), {"a": 1e7, "b": 0}, None, {"rb": "pa"}, None),
        # ... not before (the gang holds the node meanwhile)
        (running("rb", "b", 8, funded=False, started_at=NOW - 5), {"a": 1e7, "b": 0}, None, {}, RESERVED),
        # fair-tree: no preemption for fairness
        (running("rb", "b", 8), {"a": 0, "b": 1e7}, PolicySettings.fair_tree(), {}, OUTRANKED),
        # fair-tree: unfunded still preemptible
        (running("rb", "b", 8, funded=False), {"a": 0, "b": 1e7}, PolicySettings.fair_tree(), {"rb": "pa"}, None),
        # fifo-priority: nothing is preemptible
        (running("rb", "b", 8), {"a": 0, "b": 1e7}, PolicySettings.fifo_priority(), {}, OUTRANKED),
    ],
    ids=[
        "strict-improvement",
        "not-more-under-served",
        "protected",
        "protected-no-reservations",
        "unfunded",
        "unfunded-settling",
        "fair-tree-funded",
        "fair-tree-unfunded",
        "fifo",
    ],
)
def test_who_may_be_preempted(victim, usage, settings, expected, reason):
    result = one_node([victim], [pending("pa", "a", 8)], usage, settings)
    assert preempted(result) == expected
    if expected:
        p = result.preemptions[0]
        assert p.reason == ("fair_share" if victim.funded else "unfunded")
        # ADR 0007: unfunded victims get the short unfunded grace under `steward`, the full one in
        # the baselines
        short = not victim.funded and (settings is None or settings.unfunded_grace_s is not None)
        assert p.grace_ends_at == NOW + (20 if short else 120)
        assert result.explanations["pa"].reason == PREEMPTING
        assert p.evidence["victim"]["protected"] is False
    else:
        assert result.explanations["pa"].reason == reason


def test_unfunded_waiting_work_preempts_nothing():
    result = one_node([running("rb", "b", 8, funded=False)], [pending("pa", "a", 8, min_runtime_s=0)], {"b": 1e7})
    assert result.preemptions == ()


def test_strict_improvement_counts_every_gpu_taken_from_the_branch():
    # b runs 8 GPUs; taking 4 keeps b more served than a after the move, taking all 8 does not
    victims = [running("b1", "b", 4), running("b2", "b", 4)]
    usage = {"a": 0.0, "b": 6 * T}
    assert preempted(one_node(victims, [pending("pa", "a", 4)], usage)) in ({"b1": "pa"}, {"b2": "pa"})
    assert preempted(one_node(victims, [pending("pa", "a", 8)], usage)) == {}


@pytest.mark.parametrize(
    ("victims", "expected"),
    [
        # least lost work: the recent checkpoint
        (
            [
                running("old", "b", 4, last_checkpoint_at=NOW - 1000),
                running("new", "b", 4, last_checkpoint_at=NOW - 100),
            ],
            {"new"},
        ),
        # non-resumable loses everything since its start
        (
            [
                running("nores", "b", 4, last_checkpoint_at=NOW - 10, resumable=False),
                running("res", "b", 4, last_checkpoint_at=NOW - 1000),
            ],
            {"res"},
        ),
        # equal lost work: fewest jobs (one 4-GPU job on n1 rather than two 2-GPU jobs on n0)
        (
            [
                running("s1", "b", 2, on="n0", last_checkpoint_at=NOW - 100),
                running("s2", "b", 2, on="n0", last_checkpoint_at=NOW - 100),
                running("x", "b", 4, on="n0", last_checkpoint_at=NOW - 5000),
                running("big", "b", 4, on="n1", last_checkpoint_at=NOW - 100),
                running("y", "b", 4, on="n1", last_checkpoint_at=NOW - 9000),
            ],
            {"big"},
        ),
    ],
    ids=["recent-checkpoint", "resumable", "fewest-jobs"],
)
def test_victims_minimise_lost_work_then_jobs(victims, expected):
    n = len({node for v in victims for node, _ in v.placement})
    result = one_node(victims, [pending("pa", "a", 4)], {"a": 0, "b": 1e8}, n=n)
    assert set(preempted(result)) == expected


def test_a_job_already_in_grace_is_not_preempted_again():
    victim = running("rb", "b", 8, preemption_requested_at=NOW - 10)
    result = one_node([victim], [pending("pa", "a", 8)], {"a": 0, "b": 1e7})
    assert result.preemptions == ()
    e = result.explanations["pa"]
    assert e.reason == PREEMPTING and e.blocking_until == NOW - 10 + 120


def test_grace_end_stops_the_victim():
    victim = running("rb", "b", 8, preemption_requested_at=NOW - 121)
    result = one_node([victim], [], {})
    assert [(s.job_id, s.reason, s.requeue) for s in result.stops] == [("rb", "grace_ended", True)]


def test_gang_preemption_clears_whole_nodes():
    victims = [running("b0", "b", 8, on="n0"), running("b1", "b", 4, on="n1"), running("b1x", "b", 4, on="n1")]
    result = one_node(victims, [pending("pa", "a", 16)], {"a": 0, "b": 1e8}, n=2)
    assert set(preempted(result)) == {"b0", "b1", "b1x"}
    assert "pa" not in placed(result)


def test_preemption_evidence_carries_ranks_and_the_check():
    result = one_node([running("rb", "b", 8)], [pending("pa", "a", 8)], {"a": 0, "b": 1e7})
    ev = result.preemptions[0].evidence
    assert ev["rule"] == "strict_improvement"
    assert ev["check"]["waiting_ratio_after"] < ev["check"]["victim_ratio_after"]
    assert ev["waiting"]["rank"]["levels"][0]["rank"] == 1
    assert ev["victim"]["lost_gpu_s"] == result.preemptions[0].lost_gpu_s


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(("x", "y"), ("x", "z"), 1), (("x",), ("y",), 0), (("x", "y"), ("x", "y"), -1)],
)
def test_divergence(a, b, expected):
    assert divergence(a, b) == expected


def test_strictly_improves_compares_where_paths_part():
    br = Branches({"x": 0.0, "y": 100.0}, {"x": 10.0, "y": 10.0}, {"x": 0.0, "y": 1.0})
    ok, ev = strictly_improves(("x", "x1"), 1, ("y", "y1"), 1.0, 1.0, br)
    assert ok and ev["level"] == 1
    ok, _ = strictly_improves(("y", "y1"), 1, ("x", "x1"), 0.0, 1.0, br)
    assert not ok
    assert strictly_improves(("x",), 1, ("x",), 0.0, 1.0, br)[0] is False


# x waits, y would lose one GPU. Ranked reading (ADR 0016) and in-full reading (DESIGN.md), each as
# (delivered, entitled) of x and y; running: x 0, y 1 GPU; horizon 1 s.
X_UNDER = ({"x": 0.0, "y": 100.0}, {"x": 10.0, "y": 10.0})
Y_UNDER = ({"x": 100.0, "y": 0.0}, {"x": 10.0, "y": 10.0})


@pytest.mark.parametrize(
    ("ranked", "in_full", "expected"),
    [
        (X_UNDER, None, True),  # one reading (the baselines, or nothing lent)
        (Y_UNDER, None, False),
        (X_UNDER, X_UNDER, True),  # both agree
        (X_UNDER, Y_UNDER, False),  # lent entitlement alone does not make x more under-served
        (Y_UNDER, X_UNDER, False),
    ],
    ids=["one-reading-yes", "one-reading-no", "both-agree", "only-ranked", "only-in-full"],
)
def test_strict_improvement_must_hold_under_every_reading(ranked, in_full, expected):
    """ADR 0016: when the order counts entitlement by demand, a preemption needs DESIGN.md's in-full
    reading to agree, so that a rank that flips with demand cannot preempt one way and then back."""
    running_gpus = {"x": 0.0, "y": 1.0}
    also = None if in_full is None else Branches(in_full[0], in_full[1], running_gpus)
    br = Branches(ranked[0], ranked[1], running_gpus, also=also)
    ok, ev = strictly_improves(("x", "x1"), 1, ("y", "y1"), 1.0, 1.0, br)
    assert ok is expected
    assert ("in_full" in ev) is (in_full is not None and ranked is X_UNDER)  # asked only when it may veto
    search = VictimSearch(CapacityIndex((node("n0", 1),), {"n0": 1}, "best_fit"),
                          [running("v", "y1", 1, on="n0")], set(), lambda p: (p[0], p), br, NOW, PolicySettings())
    plan = search.search(pending("w", "x1", 1, min_runtime_s=1.0), ("x", "x1"))  # horizon 1 s
    assert (plan is not None) is expected


@pytest.mark.parametrize(
    ("checkpointed_s_ago", "cheap_s", "expected"),
    [(100, 300.0, True), (100, None, False), (1000, 300.0, False)],
    ids=["cheap-victim-ranked-reading-suffices", "switched-off", "costly-victim-needs-both"],
)
def test_a_cheap_victim_needs_only_the_ranked_reading(checkpointed_s_ago, cheap_s, expected):
    """ADR 0016: lent entitlement is taken back where it costs little. Only the ranked reading shows
    strict improvement here; a victim that checkpointed 100 s ago loses 160 s per GPU (with the 60 s
    restart) and may go, one that checkpointed 1,000 s ago may not."""
    running_gpus = {"x": 0.0, "y": 1.0}
    br = Branches(X_UNDER[0], X_UNDER[1], running_gpus, also=Branches(Y_UNDER[0], Y_UNDER[1], running_gpus))
    victim = running("v", "y1", 1, on="n0", last_checkpoint_at=NOW - checkpointed_s_ago)
    settings = PolicySettings(cheap_victim_s=cheap_s)
    search = VictimSearch(CapacityIndex((node("n0", 1),), {"n0": 1}, "best_fit"), [victim], set(),
                          lambda p: (p[0], p), br, NOW, settings)
    plan = search.search(pending("w", "x1", 1, min_runtime_s=1.0), ("x", "x1"))
    assert (plan is not None) is expected


def test_gang_preemption_prefers_the_smallest_domain_then_least_lost_work():
    ckpt = {"n0": NOW - 100, "n1": NOW - 10_000, "n2": NOW - 3000, "n3": NOW - 3000}
    victims = [running(f"v{n}", "b", 8, on=n, last_checkpoint_at=t) for n, t in ckpt.items()]
    result = one_node(victims, [pending("pa", "a", 16)], {"a": 0, "b": 1e9}, n=4)
    # n0 + n2 would lose the least work, but they are in different blocks; b1 loses less than b0
    assert set(preempted(result)) == {"vn2", "vn3"}
