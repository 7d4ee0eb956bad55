"""Reservations counted per cluster (issue 25, ADR 0073), hand-computed: with several clusters the
`reservation_allocations` cap holds on each cluster's queue (the order restricted to the jobs accepting it), so a
gang heading its cluster's queue gets its reservation there even when allocations on another cluster rank higher;
a gang accepting several clusters is its allocation's head gang on each and counts where it is reserved."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.model import Node
from steward.policy.reasons import BLOCKED_BY_RESERVATION, RESERVED
from steward.policy.routing import positions_in_clusters
from tests.unit.policy.builders import HOUR, NOW, node, pending, running, snapshot, tree


def two() -> tuple[Node, ...]:
    """ceres: c0, c1 (H100); jupiter: j0, j1 (A100); 8 GPUs each."""
    return (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"), Node("c1", 8, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"),
            Node("j1", 8, "A100", ("jupiter",), "ready", "jupiter"))


def busy() -> list[Any]:
    """Project d's work (the most served: every gang may preempt it once its protection ends) on every node:
    3 h more protection on ceres, 1 h on jupiter."""
    return [running(f"d-{n}", "d", 8, on=n, started_at=NOW, protected_for=(3 if n[0] == "c" else 1) * HOUR)
            for n in ("c0", "c1", "j0", "j1")]


def run(jobs: list[Any], cap: int = 1, nodes: tuple[Node, ...] | None = None) -> Any:
    # a is the most under-served, then b, then c; d is served far beyond its share
    return schedule(snapshot(nodes or two(), tree=tree(a=0.3, b=0.3, c=0.2, d=0.2),
                             usage={"a": 0, "b": 1e4, "c": 2e4, "d": 1e9}, running=busy(), pending=jobs,
                             settings=PolicySettings(reservation_allocations=cap), levels=("cluster",)))


def reserved(result: Any) -> dict[str, str | None]:
    return {r["job_id"]: r.get("cluster") for r in result.evidence["reservations"]}


J, C = {"clusters": ("jupiter",)}, {"clusters": ("ceres",)}


@pytest.mark.parametrize(("jobs", "cap", "want"), [
    # the measured symptom: b's gang heads ceres' queue; a, better ranked, holds the one reservation of jupiter
    ([("ga", "a", J), ("gb", "b", C)], 1, {"ga": "jupiter", "gb": "ceres"}),
    # both on jupiter with a cap of 1: only the better ranked
    ([("ga", "a", J), ("gb", "b", J)], 1, {"ga": "jupiter"}),
    # a gang accepting both is reserved where it is due soonest (jupiter, ADR 0071) and counts there only:
    # the next allocation's gang gets ceres
    ([("ga", "a", {}), ("gb", "b", {})], 1, {"ga": "jupiter", "gb": "ceres"}),
    ([("ga", "a", {}), ("gb", "b", {}), ("gc", "c", {})], 1, {"ga": "jupiter", "gb": "ceres"}),
    # a's first gang accepts both clusters: it is a's head gang on ceres too, so a's second gets none
    ([("ga", "a", {}), ("ga2", "a", C)], 1, {"ga": "jupiter"}),
    # a's first gang is on jupiter only: a's head gang on ceres is its second
    ([("ga", "a", J), ("ga2", "a", C)], 1, {"ga": "jupiter", "ga2": "ceres"}),
])
def test_the_reservation_cap_holds_per_cluster(jobs: list[tuple[str, str, dict[str, Any]]], cap: int,
                                               want: dict[str, str]) -> None:
    result = run([pending(j, p, 16, submitted_at=k, **accepts) for k, (j, p, accepts) in enumerate(jobs)], cap)
    assert reserved(result) == want
    for job_id in want:
        assert result.explanations[job_id].reason == RESERVED
    per_cluster: dict[str | None, int] = {}
    for cluster in reserved(result).values():
        per_cluster[cluster] = per_cluster.get(cluster, 0) + 1
    assert max(per_cluster.values()) <= cap


def test_one_cluster_keeps_the_cap_over_the_tree() -> None:
    # one cluster (no cluster named): the cap of 1 is the tree's, as before ADR 0073
    nodes = (node("n0"), node("n1"), node("n2"), node("n3"))
    work = [running(f"d-{n.id}", "d", 8, on=n.id, started_at=NOW, protected_for=HOUR) for n in nodes]
    result = schedule(snapshot(nodes, tree=tree(a=0.3, b=0.3, c=0.2, d=0.2), usage={"a": 0, "b": 1e4, "d": 1e9},
                               running=work, pending=[pending("ga", "a", 16), pending("gb", "b", 16, submitted_at=1)],
                               settings=PolicySettings(reservation_allocations=1)))
    assert reserved(result) == {"ga": None}


@pytest.mark.parametrize(("accepts", "blocked"), [
    ({"clusters": ("jupiter",)}, False),  # the reservation is on ceres, which it does not accept
    ({"gpu_models": ("A100",)}, False),
    ({"clusters": ("ceres",)}, True),  # it would fit the reserved room there but would outlast the reservation
    ({}, True),
])
def test_a_job_is_explained_as_blocked_only_by_a_reservation_on_a_cluster_it_accepts(
        accepts: dict[str, Any], blocked: bool) -> None:
    # gb (16 GPUs, ceres) is reserved on c0 + c1, due in 3 h; c0 has 4 GPUs free meanwhile; jupiter is full.
    # x (c's, behind gb) asks 8 h of protection on 2 GPUs: it may not use gb's room
    work = [running("d-c0", "d", 4, on="c0", started_at=NOW, protected_for=3 * HOUR),
            running("d-c1", "d", 8, on="c1", started_at=NOW, protected_for=3 * HOUR),
            running("d-j0", "d", 8, on="j0", started_at=NOW, protected_for=3 * HOUR),
            running("d-j1", "d", 8, on="j1", started_at=NOW, protected_for=3 * HOUR)]
    jobs = [pending("gb", "b", 16, clusters=("ceres",)),
            pending("x", "c", 2, submitted_at=1, min_runtime_s=8 * HOUR, **accepts)]
    result = schedule(snapshot(two(), tree=tree(a=0.3, b=0.3, c=0.2, d=0.2), usage={"b": 1e4, "c": 2e4, "d": 1e9},
                               running=work, pending=jobs, levels=("cluster",)))
    assert reserved(result) == {"gb": "ceres"}
    e = result.explanations["x"]
    assert (e.reason == BLOCKED_BY_RESERVATION) is blocked
    if blocked:
        assert e.evidence["reserved_for"] == "gb"


@pytest.mark.parametrize(("jobs", "want"), [
    # a jupiter job behind two ceres-only jobs is first in its cluster's queue
    ([("c1", C), ("c2", C), ("j1", J)], {"c1": 1, "c2": 2, "j1": 1}),
    # a job accepting both counts ahead of, and behind, everyone
    ([("any", {}), ("c1", C), ("j1", J), ("any2", {})], {"any": 1, "c1": 2, "j1": 2, "any2": 4}),
    # by model: A100 is jupiter's
    ([("c1", C), ("a100", {"gpu_models": ("A100",)}), ("j1", J)], {"c1": 1, "a100": 1, "j1": 2}),
])
def test_the_position_in_the_queue_of_the_clusters_a_job_accepts(jobs: list[tuple[str, dict[str, Any]]],
                                                                 want: dict[str, int]) -> None:
    order = [pending(j, "a", 1, submitted_at=k, **accepts) for k, (j, accepts) in enumerate(jobs)]
    assert positions_in_clusters(order, two()) == want
    # one cluster: the position overall
    one = (node("n0"),)
    assert positions_in_clusters([pending(j, "a", 1) for j, _ in jobs], one) == {
        j: k for k, (j, _) in enumerate(jobs, 1)}
