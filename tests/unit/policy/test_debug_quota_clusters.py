"""The debug quota per cluster (issue 25, ADR 0073), hand-computed: an allocation's quota is shared out over the
clusters it may use in proportion to their GPUs, each part at least the floor; a waiting piece of debug work is
qualified on the clusters it accepts where its allocation's debug work there (running there, or waiting and
accepting it), submitted before it, and itself fit in the part; the lane places it only there."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.debug_quota import cluster_quotas, qualify_clusters
from steward.policy.model import Node, PendingJob, RunningJob
from steward.policy.outlook import outlook
from tests.unit.policy.builders import NOW, pending, placed, running, snapshot, tree

S = PolicySettings.steward()  # floor 4 GPUs
MIN = 600.0


@pytest.mark.parametrize(("quota", "capacity", "pin", "expected"), [
    (16, {"ceres": 32, "jupiter": 32}, "", {"ceres": 8, "jupiter": 8}),     # in proportion to the GPUs
    (16, {"ceres": 16, "jupiter": 48}, "", {"ceres": 4, "jupiter": 12}),
    (10, {"ceres": 16, "jupiter": 48}, "", {"ceres": 4, "jupiter": 8}),     # 2.5 -> the floor; 7.5 -> 8
    (6, {"ceres": 32, "jupiter": 32}, "", {"ceres": 4, "jupiter": 4}),      # 3 each -> the floor on each
    (3, {"ceres": 32, "jupiter": 32}, "", {"ceres": 3, "jupiter": 3}),      # a quota under the floor: all of it
    (0, {"ceres": 32, "jupiter": 32}, "", {"ceres": 0, "jupiter": 0}),      # no quota stays none
    (16, {"ceres": 16, "jupiter": 48}, "ceres", {"ceres": 16}),             # pinned: all of it on its cluster
    (16, {"only": 64}, "", {"only": 16}),                                    # one cluster: the quota
])
def test_cluster_quotas(quota: int, capacity: dict[str, float], pin: str, expected: dict[str, int]) -> None:
    assert cluster_quotas(quota, capacity, S, pin) == expected


def dbg(id: str, gpus: int = 1, at: float = 0.0, project: str = "a", **kw: Any) -> PendingJob:
    return pending(id, project, gpus, submitted_at=at, min_runtime_s=MIN, klass="debug", **kw)


def rdbg(id: str, on: str, gpus: int = 1, at: float = 0.0, project: str = "a") -> RunningJob:
    return running(id, project, gpus, on=on, submitted_at=at, min_runtime_s=MIN, klass="debug")


ON = {"c0": "ceres", "j0": "jupiter"}
BOTH = ("ceres", "jupiter")


def accepts_of(job: PendingJob) -> tuple[str, ...]:
    return job.clusters or BOTH


@pytest.mark.parametrize(("quotas", "accepts", "run", "wait", "gpus", "clusters", "shown"), [
    # 2 + 1 in use on ceres: it fits on jupiter only
    ({"ceres": 3, "jupiter": 3}, BOTH, [("r1", "c0", 2)], [], 2, ("jupiter",), (3, 0, 0)),
    ({"ceres": 3, "jupiter": 3}, BOTH, [("r1", "c0", 1)], [], 2, ("ceres", "jupiter"), (3, 1, 0)),
    # a waiting job ahead accepting both counts on both: 2 + 2 > 3 anywhere
    ({"ceres": 3, "jupiter": 3}, BOTH, [], [("w1", 2, ())], 2, (), (3, 0, 2)),
    # one ahead accepting jupiter only counts on jupiter only
    ({"ceres": 3, "jupiter": 3}, BOTH, [], [("w1", 2, ("jupiter",))], 2, ("ceres",), (3, 0, 0)),
    # it accepts ceres only: jupiter's room is not its
    ({"ceres": 3, "jupiter": 3}, ("ceres",), [("r1", "c0", 2)], [], 2, (), (3, 2, 0)),
    # a pinned allocation has no part on the other cluster
    ({"ceres": 6}, BOTH, [("r1", "c0", 2)], [], 2, ("ceres",), (6, 2, 0)),
])
def test_qualify_clusters(quotas: dict[str, int], accepts: tuple[str, ...], run: list[tuple[str, str, int]],
                          wait: list[tuple[str, int, tuple[str, ...]]], gpus: int, clusters: tuple[str, ...],
                          shown: tuple[int, int, int]) -> None:
    running_ = [rdbg(i, on, g) for i, on, g in run]
    waiting = [dbg(i, g, at=0.0, clusters=c) for i, g, c in wait]
    job = dbg("me", gpus, at=10.0)
    q = qualify_clusters(job, quotas, accepts, running_, waiting, S,
                         lambda r: ON[r.placement[0][0]], accepts_of)
    assert q.clusters == clusters
    assert q.qualified is bool(clusters)
    assert q.reason == ("within_quota" if clusters else "over_quota")
    assert (q.quota_gpus, q.in_use_gpus, q.ahead_gpus) == shown
    assert set(q.by_cluster) == {c for c in accepts if c in quotas}


def two() -> tuple[Node, ...]:
    return (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"))


def test_the_lane_places_a_qualified_job_only_where_it_is_within_its_quota() -> None:
    # a's quota: 8 of 16 GPUs (its share), 4 on each cluster; 4 of its debug GPUs run on ceres, which has room
    # for more: the new debug job is qualified on jupiter only, and the lane puts it there, not on the tighter
    # fit of ceres
    work = [rdbg("r1", "c0", 2), rdbg("r2", "c0", 2)]
    snap = snapshot(two(), tree=tree(a=0.5, b=0.5), usage={"a": 0, "b": 0}, running=work,
                    pending=[dbg("me", 2, at=10.0)], settings=PolicySettings.steward())
    result = schedule(snap)
    p = next(p for p in result.placements if p.job_id == "me")
    lane = p.evidence["lane"]
    assert lane["qualified"] is True and lane["clusters"] == ["jupiter"]
    assert placed(result)["me"] == (("j0", 2),)
    assert p.evidence["routing"]["cluster"] == "jupiter"


def test_one_cluster_qualifies_as_before() -> None:
    nodes = (Node("n0", 8, "H100", ("b0",), "ready", "default"),)
    snap = snapshot(nodes, tree=tree(a=0.5, b=0.5), usage={}, pending=[dbg("me", 2, at=10.0)],
                    settings=PolicySettings.steward(), now=NOW)
    lane = next(p for p in schedule(snap).placements if p.job_id == "me").evidence["lane"]
    assert "clusters" not in lane and "by_cluster" not in lane


@pytest.mark.parametrize(("accepts", "clusters"), [
    ({}, ["jupiter"]),  # ceres' part (4) is used: qualified where there is room in its part
    ({"clusters": ("ceres",)}, None),  # only ceres, whose part is used: over the quota
])
def test_the_submit_preview_qualifies_per_cluster_as_the_cycle_does(accepts: dict[str, Any],
                                                                   clusters: list[str] | None) -> None:
    work = [rdbg("r1", "c0", 2), rdbg("r2", "c0", 2)]
    job = dbg("me", 2, at=10.0, **accepts)
    seen = outlook(job, tree(a=0.5, b=0.5), 16, work, [], S, nodes=two())
    q = seen.qualification
    assert q is not None
    assert q.qualified is (clusters is not None)
    assert q.to_dict().get("clusters") == (clusters or [])
    cycle = schedule(snapshot(two(), tree=tree(a=0.5, b=0.5), usage={}, running=work, pending=[job], settings=S))
    p = next(p for p in cycle.placements if p.job_id == "me")  # over the quota, it still starts as funded work
    assert p.evidence["qualified"] is (clusters is not None)
    assert ("lane" in p.evidence) is (clusters is not None)
