"""Reservations for the head large gang (DESIGN.md "Placement"; issue 3)."""

from __future__ import annotations

import pytest

from steward.policy.cycle import schedule
from steward.policy.explain import BLOCKED_BY_RESERVATION, RESERVED
from steward.policy.reservation import may_backfill
from steward.policy.settings import PolicySettings
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
