"""Reservations for the head large gang (DESIGN.md "Placement"; issue 3)."""

from __future__ import annotations

import math

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.placement import CapacityIndex
from steward.policy.reasons import BLOCKED_BY_RESERVATION, RESERVED
from steward.policy.reservation import GangReleases, NodeReleases, may_backfill
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, placed, running, snapshot, tree


def cluster(settings=None, gang_gpus=16):
    ns = nodes(4, per_block=2)  # b0 = n0, n1; b1 = n2, n3
    jobs = [
        running("b0", "b", 6, on="n0", started_at=NOW, protected_for=1 * HOUR),
        running("b1", "b", 6, on="n1", started_at=NOW, protected_for=2 * HOUR),
        running("b2", "b", 8, on="n2", started_at=NOW, protected_for=5 * HOUR),
        running("b3", "b", 8, on="n3", started_at=NOW, protected_for=6 * HOUR),
    ]
    waiting = [
        pending("gang", "a", gang_gpus, submitted_at=0),
        pending("long", "a", 2, submitted_at=1, min_runtime_s=8 * HOUR),
        pending("short", "a", 2, submitted_at=2, min_runtime_s=HOUR / 2),
        pending("unfunded", "a", 2, submitted_at=3, min_runtime_s=0),
    ]
    return schedule(
        snapshot(
            nodes=ns,
            tree=tree(a=0.5, b=0.5),
            usage={"a": 0, "b": 1e9},
            running=jobs,
            pending=waiting,
            settings=settings,
            levels=("block",),
        )
    )


def test_the_head_large_gang_gets_the_domain_whose_protections_end_first():
    result = cluster()
    r = result.reservation
    assert r is not None and r.job_id == "gang"
    assert r.domain == ("b0",) and r.nodes == ("n0", "n1") and r.ready_at == NOW + 2 * HOUR
    assert result.explanations["gang"].reason == RESERVED
    assert result.explanations["gang"].blocking_until == NOW + 2 * HOUR
    assert r.evidence["level"] == "block"


def test_backfill_only_work_whose_protection_ends_before_the_reservation():
    got = placed(cluster())
    assert "long" not in got  # 8 h of protection would outlast the reservation
    assert got["short"] == (("n0", 2),)
    assert got["unfunded"] == (("n1", 2),)  # unfunded work has no protection
    e = cluster().explanations["long"]
    assert e.reason == BLOCKED_BY_RESERVATION and e.evidence["reserved_for"] == "gang"


@pytest.mark.parametrize("settings", [PolicySettings.ai2(), PolicySettings(reservation_min_gpus=32)])
def test_no_reservation_without_the_policy_or_below_the_size(settings):
    result = cluster(settings)
    assert result.reservation is None
    assert "long" in placed(result)


def test_may_backfill_rule():
    assert may_backfill(HOUR, NOW, NOW + HOUR)
    assert not may_backfill(HOUR + 1, NOW, NOW + HOUR)


def test_no_reservation_when_nothing_would_ever_free_enough():
    ns = nodes(2, per_block=2)
    # the gang's own project holds the nodes: never preemptible by it
    jobs = [running("a0", "a", 8, on="n0"), running("a1", "a", 8, on="n1")]
    result = schedule(snapshot(nodes=ns, tree=tree(a=1.0), running=jobs, pending=[pending("g", "a", 16)]))
    assert result.reservation is None


def lane_vs_gang(lane_project_usage: float):
    """n0: 2 GPUs free, 6 held by over-served b until NOW + 600 s; n1: held 5 h. The gang of `a`
    (under-served) waits for n0; `c` submits two one-GPU debug (lane) jobs, one protected for 300 s,
    one for 900 s (past the reservation)."""
    return schedule(
        snapshot(
            nodes=nodes(2),
            tree=tree(a=0.4, b=0.3, c=0.3),
            usage={"a": 1e5, "b": 1e9, "c": lane_project_usage},
            running=[
                running("b0", "b", 6, on="n0", started_at=NOW, protected_for=600),
                running("b1", "b", 8, on="n1", started_at=NOW, protected_for=5 * HOUR),
            ],
            pending=[
                pending("gang", "a", 8),
                pending("dbg-short", "c", 1, submitted_at=1, min_runtime_s=300, klass="debug"),
                pending("dbg-long", "c", 1, submitted_at=2, min_runtime_s=900, klass="debug"),
            ],
        )
    )


def test_lane_jobs_of_a_less_under_served_allocation_keep_off_a_reserved_node_unless_they_leave_in_time():
    # ADR 0007 "Reservations before the lane": the lane placed both on n0 ahead of the gang before
    result = lane_vs_gang(1e8)
    r = result.reservation
    assert r is not None and r.job_id == "gang" and r.nodes == ("n0",) and r.ready_at == NOW + 600
    got = placed(result)
    assert got == {"dbg-short": (("n0", 1),)}  # done (protection-wise) before the gang is due
    assert result.explanations["dbg-long"].reason == BLOCKED_BY_RESERVATION


def test_lane_jobs_of_a_more_under_served_allocation_may_use_the_reserved_node():
    got = placed(lane_vs_gang(0.0))  # c is ahead of a in the order
    assert set(got) == {"dbg-short", "dbg-long"}


def two_gangs(settings=None):
    """Four nodes held by over-served b (protections end at 1, 2, 3, 4 h); a and c, both
    under-served, each wait with a whole-node gang."""
    return schedule(
        snapshot(
            nodes=nodes(4),
            tree=tree(a=0.4, b=0.3, c=0.3),
            usage={"a": 0.0, "b": 1e9, "c": 1e5},
            running=[
                running(f"b{i}", "b", 8, on=f"n{i}", started_at=NOW, protected_for=(i + 1) * HOUR)
                for i in range(4)
            ],
            pending=[
                pending("ga", "a", 8),
                pending("ga2", "a", 8, submitted_at=1),
                pending("gc", "c", 8),
                pending("short", "b", 2, min_runtime_s=HOUR / 2),
            ],
            settings=settings,
        )
    )


def test_the_head_gang_of_each_under_served_allocation_holds_a_node():
    result = two_gangs()
    held = {r["job_id"]: r for r in result.evidence["reservations"]}
    assert set(held) == {"ga", "gc"}  # one per allocation: not a's second gang
    assert held["ga"]["nodes"] == ["n0"] and held["ga"]["ready_at"] == NOW + HOUR
    assert held["gc"]["nodes"] == ["n1"] and held["gc"]["ready_at"] == NOW + 2 * HOUR
    assert result.reservation is not None and result.reservation.job_id == "ga"  # the most under-served
    assert result.explanations["gc"].reason == RESERVED


def test_reservations_are_bounded_by_the_setting():
    result = two_gangs(PolicySettings(reservation_allocations=1))
    assert [r["job_id"] for r in result.evidence["reservations"]] == ["ga"]
    assert result.explanations["gc"].reason != RESERVED


def test_the_explanation_names_the_reservation_that_keeps_the_job_waiting():
    """ADR 0013: with several reservations held, a job kept off the second one's nodes is told about
    the second, not the first (its room on the first's node is too small anyway)."""
    result = schedule(
        snapshot(
            nodes=nodes(2),
            tree=tree(a=0.3, b=0.3, c=0.2, d=0.2),
            usage={"a": 0.0, "b": 1e8, "c": 1e5, "d": 1e9},
            running=[
                running("d0", "d", 7, on="n0", started_at=NOW, protected_for=HOUR),
                running("d1", "d", 6, on="n1", started_at=NOW, protected_for=2 * HOUR),
            ],
            pending=[
                pending("ga", "a", 8),
                pending("gc", "c", 8),
                pending("late", "b", 2, min_runtime_s=3 * HOUR),
            ],
        )
    )
    held = {r["job_id"]: r["nodes"] for r in result.evidence["reservations"]}
    assert held == {"ga": ["n0"], "gc": ["n1"]}
    e = result.explanations["late"]
    assert e.reason == BLOCKED_BY_RESERVATION
    assert e.evidence["reserved_for"] == "gc" and e.blocking_until == NOW + 2 * HOUR


def test_a_gang_that_asks_for_no_protection_does_not_hide_its_allocations_funded_gang():
    """ADR 0013: the allocation's head *funded* gang gets the reservation; a gang ahead of it that
    asks for no protection (unfunded by its own choice) cannot use one and is passed over."""
    result = schedule(
        snapshot(
            nodes=nodes(2),
            tree=tree(a=0.5, b=0.5),
            usage={"a": 0.0, "b": 1e9},
            running=[running(f"b{i}", "b", 8, on=f"n{i}", started_at=NOW, protected_for=(i + 1) * HOUR)
                     for i in range(2)],
            pending=[pending("free-rider", "a", 8, min_runtime_s=0), pending("funded", "a", 8, submitted_at=1)],
        )
    )
    assert [r["job_id"] for r in result.evidence["reservations"]] == ["funded"]


# The walk over the cycle's per-node releases (issue 18: one `NodeReleases` a cycle, walked by each gang). Node n0
# of 8 GPUs, 1 free; its jobs: `a` funded, protected until NOW + 1 h; `b` funded, protected until NOW + 2 h; `u`
# unfunded (released now); `g` in its grace until NOW + 10 min (preemption asked 110 min ago, grace 120 min).
WALK_JOBS = (
    running("a1", "a", 3, on="n0", started_at=NOW, protected_for=HOUR),
    running("b1", "b", 2, on="n0", started_at=NOW, protected_for=2 * HOUR),
    running("u1", "c", 1, on="n0", started_at=NOW, funded=False),
    running("g1", "d", 1, on="n0", started_at=NOW, preemption_requested_at=NOW - 110 * 60),
)


def _walk(consents: set[str], placements: tuple[tuple[float, int], ...] = ()) -> GangReleases:
    index = CapacityIndex(nodes(1), {"n0": 7}, "best_fit")
    settings = PolicySettings(preemption_grace_s=2 * HOUR)
    walk = GangReleases(NodeReleases(index.pos, 1, WALK_JOBS, NOW, settings, set()), lambda p, _cluster: p in consents)
    for t, g in placements:
        walk.add(0, t, g)
    return walk


@pytest.mark.parametrize(
    ("need", "consents", "placements", "bound", "ready"),
    [
        (1, set(), (), math.inf, NOW),  # the free GPU
        (2, set(), (), math.inf, NOW),  # + the unfunded job's, at once
        (3, set(), (), math.inf, NOW + 600),  # + the job in its grace, at its end
        (4, set(), (), math.inf, math.inf),  # a and b may not be preempted by this gang
        (4, {"b"}, (), math.inf, NOW + 2 * HOUR),  # a is skipped, b released at its protection end
        (6, {"a"}, (), math.inf, NOW + HOUR),
        (8, {"a"}, (), math.inf, math.inf),
        (8, {"a", "b"}, (), math.inf, NOW + 2 * HOUR),
        (8, {"a", "b"}, (), NOW + 2 * HOUR, math.inf),  # not sooner than a node seen before: stop there
        (8, {"a", "b"}, (), NOW + 2 * HOUR + 1, NOW + 2 * HOUR),
        (4, set(), ((NOW + 300, 1),), math.inf, NOW + 600),  # this cycle's placement, released at NOW + 5 min
        (4, set(), ((math.inf, 1),), math.inf, math.inf),
    ],
)
def test_when_a_node_has_the_gpus_a_gang_needs(need, consents, placements, bound, ready):
    assert _walk(consents, placements).ready_one(0, need, 1, bound) == ready


@pytest.mark.parametrize(
    ("consents", "placements", "whole"),
    [
        (set(), (), math.inf),  # a and b never leave for this gang
        ({"a"}, (), math.inf),
        ({"a", "b"}, (), NOW + 2 * HOUR),  # the last to leave
        ({"a", "b"}, ((NOW + 3 * HOUR, 1),), NOW + 3 * HOUR),
        ({"a", "b"}, ((math.inf, 1),), math.inf),
    ],
)
def test_when_a_node_is_whole_for_a_gang(consents, placements, whole):
    assert _walk(consents, placements).clear_at(0) == whole


def test_each_projects_consent_is_asked_once_per_gang():
    asked: list[str] = []
    index = CapacityIndex(nodes(1), {"n0": 7}, "best_fit")
    walk = GangReleases(
        NodeReleases(index.pos, 1, WALK_JOBS, NOW, PolicySettings(), set()), lambda p, _cluster: asked.append(p) is None
    )
    walk.clear_at(0)
    walk.ready_one(0, 8, 1, math.inf)
    assert asked == ["a", "b"]
