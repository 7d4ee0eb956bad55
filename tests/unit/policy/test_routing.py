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
