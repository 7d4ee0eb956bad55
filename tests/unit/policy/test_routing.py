"""Routing between clusters and GPU models (issue 25, ADR 0057; steward.policy.routing), hand-computed."""

from __future__ import annotations

import pytest

from steward.policy.cycle import schedule
from steward.policy.model import Node
from tests.unit.policy.builders import NOW, pending, placed, running, snapshot


def two(ceres_gpus: int = 8) -> tuple[Node, ...]:
    return (Node("c0", ceres_gpus, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"))


def test_the_job_goes_where_it_starts_now_and_says_how_long_it_would_wait_elsewhere() -> None:
    # jupiter is full of a job protected 40 more minutes; ceres is free
    busy = running("r", "b", 8, on="j0", started_at=NOW - 600, protected_for=600 + 2400)
    result = schedule(snapshot(two(), running=[busy], pending=[pending("p", "a", 4)]))
    assert placed(result) == {"p": (("c0", 4),)}
    routing = result.placements[0].evidence["routing"]
    assert routing["reason"] == "placed on ceres (H100): would wait 0 s there against an estimated 40 min on jupiter"
    assert routing["candidates"] == [
        {"cluster": "ceres", "models": ["H100"], "fits_now": True, "estimated_wait_s": 0.0},
        {"cluster": "jupiter", "models": ["A100"], "fits_now": False, "estimated_wait_s": 2400.0}]


@pytest.mark.parametrize(("models", "clusters", "node"), [
    (("A100",), (), "j0"),
    ((), ("jupiter",), "j0"),
    (("H100", "A100"), (), "c0"),  # both free: the tighter fit (ceres has 4 GPUs, jupiter 8)
    ((), (), "c0"),
])
def test_a_job_goes_only_where_it_accepts(models: tuple[str, ...], clusters: tuple[str, ...], node: str) -> None:
    result = schedule(snapshot(two(4), pending=[pending("p", "a", 4, gpu_models=models, clusters=clusters)]))
    assert placed(result) == {"p": ((node, 4),)}


def test_a_gang_never_spans_clusters() -> None:
    # 12 GPUs free in all, 8 at most in one cluster: the 12-GPU gang waits
    result = schedule(snapshot(two(4), pending=[pending("g", "a", 12)]))
    assert placed(result) == {}


def test_one_cluster_and_no_request_is_placed_as_before() -> None:
    nodes = (Node("n0", 8, "H100", ("b0",)), Node("n1", 8, "A100", ("b0",)))
    result = schedule(snapshot(nodes, pending=[pending("p", "a", 2)]))
    assert "routing" not in result.placements[0].evidence


def test_the_largest_waiting_gang_of_each_cluster() -> None:
    """ADR 0091: per cluster, the largest waiting job that may run there: one it accepts (models, clusters, pin), whose
    GPUs the cluster's nodes it admits hold together; a cluster no waiting job may use has 0."""
    from steward.policy.model import PendingJob
    from steward.policy.routing import largest_waiting_by_cluster

    nodes = (Node("c0", 8, "H100", ("ceres",), cluster="ceres"), Node("c1", 8, "H100", ("ceres",), cluster="ceres"),
             Node("j0", 4, "A100", ("jupiter",), cluster="jupiter"),
             Node("j1", 4, "V100", ("jupiter",), "draining", cluster="jupiter"),
             Node("o0", 2, "V100", ("old",), cluster="old"))
    table: list[tuple[list[PendingJob], dict[str, int]]] = [
        ([], {"ceres": 0, "jupiter": 0, "old": 0}),
        ([PendingJob("any", "p", 16, 0.0)], {"ceres": 16, "jupiter": 0, "old": 0}),  # too big for the others
        ([PendingJob("any", "p", 8, 0.0)], {"ceres": 8, "jupiter": 8, "old": 0}),  # a draining node may come back
        ([PendingJob("a100", "p", 8, 0.0, gpu_models=("A100",))], {"ceres": 0, "jupiter": 0, "old": 0}),
        ([PendingJob("a100", "p", 4, 0.0, gpu_models=("A100",)), PendingJob("v", "p", 2, 0.0, gpu_models=("V100",))],
         {"ceres": 0, "jupiter": 4, "old": 2}),
        ([PendingJob("pinned", "p", 2, 0.0, clusters=("old",), pin="old"), PendingJob("c", "p", 1, 0.0,
                                                                                      clusters=("ceres",))],
         {"ceres": 1, "jupiter": 0, "old": 2}),
    ]
    for jobs, want in table:
        assert largest_waiting_by_cluster(jobs, nodes) == want, [j.id for j in jobs]
