"""The order of waiting jobs per cluster (issue 25, ADR 0080), hand-computed: on each cluster allocations are walked
by their standing on it (ADR 0076's `standing_on`), a job takes its place at its allocation's key on the cluster
it accepts where that allocation ranks best, and the cycle's decisions, "why pending" and routing carry the
standing the job was ordered by; the setting `cluster_order` off (every preset), no usage per cluster or one
cluster: the tree's order."""

from __future__ import annotations

import math
from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cluster_share import ClusterOrder, ClusterStanding, order_key
from steward.policy.cycle import schedule
from steward.policy.model import Node, PendingJob
from tests.unit.policy.builders import NOW, nested, pending, placed, running, snapshot, tree

ALL = ("ceres", "jupiter")


def on(cluster: str, **ratio: float) -> ClusterStanding:
    return ClusterStanding(cluster, {}, {}, ratio, {})


def job(id: str, project: str, clusters: tuple[str, ...] = (), priority: int = 0) -> PendingJob:
    return pending(id, project, submitted_at=float(id[-1]), clusters=clusters, priority=priority)


def accepts(j: PendingJob) -> tuple[str, ...]:
    return j.clusters or ALL


@pytest.mark.parametrize(
    ("tree_ratio", "ceres", "jupiter", "jobs", "want"),
    [
        # a over its part of ceres (0.6 there), level with b on the tree: b goes first on ceres, a on jupiter
        (
            {"a": 0.2, "b": 0.2},
            {"a": 0.6, "b": 0.0},
            {"a": 0.0, "b": 0.3},
            [job("a1", "a", ("ceres",)), job("a2", "a", ("jupiter",)), job("b1", "b", ("ceres",)),
             job("b2", "b", ("jupiter",))],
            ["a2", "b1", "b2", "a1"],  # (0.2,a)@jupiter, (0.2,b)@ceres, (0.3,b)@jupiter, (0.6,a)@ceres
        ),
        # a job accepting both clusters is taken where its allocation ranks best (a: jupiter, 0.2)
        (
            {"a": 0.2, "b": 0.2},
            {"a": 0.6, "b": 0.0},
            {"a": 0.0, "b": 0.3},
            [job("a1", "a"), job("b1", "b", ("ceres",))],
            ["a1", "b1"],
        ),
        # the tree vetoes nothing in the order, but its standing is the floor: b, less served on ceres but over
        # its budget on the tree (0.5), goes after a wherever a stands below 0.5
        (
            {"a": 0.2, "b": 0.5},
            {"a": 0.4, "b": 0.0},
            {"a": 0.0, "b": 0.0},
            [job("b1", "b", ("ceres",)), job("a1", "a", ("ceres",))],
            ["a1", "b1"],
        ),
        # one project's jobs with one key keep priority, then submit time
        (
            {"a": 0.2, "b": 0.2},
            {"a": 0.0, "b": 0.0},
            {"a": 0.0, "b": 0.0},
            [job("a1", "a", ("ceres",)), job("a2", "a", ("ceres",), priority=1), job("b3", "b", ("ceres",))],
            ["a2", "a1", "b3"],
        ),
        # but never ahead of a job of its own project before it that may run where it may: a2 (either cluster; a
        # ranks best on jupiter) waits behind a1, a's higher-priority job for ceres, where a is over its part;
        # a3 (jupiter only) does not (on jupiter, a2 is a's head: a3 stays behind a2)
        (
            {"a": 0.2, "b": 0.3},
            {"a": 0.6, "b": 0.0},
            {"a": 0.0, "b": 0.3},
            [job("a1", "a", ("ceres",), priority=1), job("a2", "a"), job("a3", "a", ("jupiter",)),
             job("b4", "b", ("ceres",))],
            ["b4", "a1", "a2", "a3"],
        ),
        (
            {"a": 0.2, "b": 0.3},
            {"a": 0.6, "b": 0.0},
            {"a": 0.0, "b": 0.3},
            [job("a1", "a", ("ceres",), priority=1), job("a3", "a", ("jupiter",)), job("b4", "b", ("ceres",))],
            ["a3", "b4", "a1"],
        ),
        # no part of a cluster (pinned elsewhere: an infinite standing there): its jobs for it go last
        (
            {"a": 0.2, "b": 0.3},
            {"a": math.inf, "b": 0.3},
            {"a": 0.0, "b": 0.3},
            [job("a1", "a", ("ceres",)), job("b1", "b", ("ceres",))],
            ["b1", "a1"],
        ),
    ],
)
def test_each_job_is_ordered_by_its_standing_on_the_cluster_where_it_ranks_best(
    tree_ratio: dict[str, float], ceres: dict[str, float], jupiter: dict[str, float], jobs: list[PendingJob],
    want: list[str],
) -> None:
    t = tree(a=0.5, b=0.5)
    order = ClusterOrder(t, tree_ratio, {"ceres": on("ceres", **ceres), "jupiter": on("jupiter", **jupiter)}, accepts)
    by_tree = sorted(jobs, key=lambda j: (order_key(t.path(j.project), tree_ratio), -j.priority, j.submitted_at))
    assert [j.id for j in order.reorder(by_tree)] == want


def test_inner_allocations_are_compared_where_the_paths_part() -> None:
    """g1 (a) and g2 (b): on ceres g1 is over its part, so b's job goes ahead of a's there although a ranks
    ahead of b over the tree and inside g1 a is the least served."""
    t = nested({"g1": {"share": 0.5, "children": {"a": 1.0}}, "g2": {"share": 0.5, "children": {"b": 1.0}}})
    tree_ratio = {"g1": 0.1, "a": 0.1, "g2": 0.2, "b": 0.2}
    ceres = on("ceres", g1=0.5, a=0.5, g2=0.0, b=0.0)
    order = ClusterOrder(t, tree_ratio, {"ceres": ceres}, accepts)
    jobs = [job("a1", "a", ("ceres",)), job("b2", "b", ("ceres",))]
    assert [j.id for j in order.reorder(jobs)] == ["b2", "a1"]
    ev = order.evidence("a", "ceres")
    assert (ev["project_rank"], ev["projects"]) == (2, 2)
    assert [(lvl["allocation"], lvl["rank"], lvl["standing"], lvl["read"]) for lvl in ev["levels"]] == [
        ("g1", 2, 0.5, "cluster"), ("a", 1, 0.5, "cluster")]


def test_jobs_of_projects_without_an_allocation_stay_last_as_they_were() -> None:
    order = ClusterOrder(tree(a=0.5, b=0.5), {"a": 0.2, "b": 0.2}, {"ceres": on("ceres", a=0.9, b=0.0)}, accepts)
    jobs = [job("a1", "a", ("ceres",)), job("b2", "b", ("ceres",)), job("x3", "x", ("ceres",))]
    assert [j.id for j in order.reorder(jobs)] == ["b2", "a1", "x3"]


# --- the cycle ---------------------------------------------------------------------------------------------------


ON = PolicySettings(cluster_order=True)


def two() -> tuple[Node, ...]:
    """ceres: c0 (H100); jupiter: j0 (A100), full of x's protected work."""
    return (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"))


def cycle(settings: PolicySettings | None = None, per_cluster: bool = True) -> Any:
    """v and w level over the tree (each used 1e5 GPU-s), v all of it on ceres, w on jupiter. v's work may run on
    both clusters (v2 asks for an A100, on jupiter), so v's part of ceres is half its entitlement and v is over it;
    both wait for ceres' 8 GPUs, v's job first over the tree (v before w by name, then submit time)."""
    return schedule(
        snapshot(
            two(),
            tree=tree(v=0.4, w=0.4, x=0.2),
            usage={"v": 1e5, "w": 1e5, "x": 0.0},
            running=[running("x1", "x", 8, on="j0", started_at=NOW, protected_for=8 * 3600.0)],
            pending=[pending("v1", "v", 8, clusters=("ceres",), submitted_at=NOW - 600),
                     pending("v2", "v", 8, gpu_models=("A100",), submitted_at=NOW - 300),
                     pending("w1", "w", 8, clusters=("ceres",), submitted_at=NOW - 60)],
            settings=settings or ON,
            levels=("cluster",),
            cluster_usage={"ceres": {"v": 1e5}, "jupiter": {"w": 1e5}} if per_cluster else None,
        )
    )


@pytest.mark.parametrize(
    ("settings", "per_cluster", "order", "goes"),
    [
        (None, True, ("v2", "w1", "v1"), "w1"),  # v over its part of ceres: w's job takes ceres
        (PolicySettings(), True, ("v1", "v2", "w1"), "v1"),  # the setting off (every preset): the tree's order
        (PolicySettings(cluster_order=True, cluster_fair_share=False), True, ("v1", "v2", "w1"), "v1"),
        (None, False, ("v1", "v2", "w1"), "v1"),  # no usage per cluster: the tree's order
    ],
)
def test_a_clusters_gpus_go_to_the_allocation_less_served_there(
    settings: PolicySettings | None, per_cluster: bool, order: tuple[str, ...], goes: str
) -> None:
    result = cycle(settings, per_cluster)
    assert result.order == order
    assert set(placed(result)) == {goes}


def test_decisions_and_why_pending_carry_the_standing_the_job_was_ordered_by() -> None:
    result = cycle()
    (p,) = result.placements
    ordered = p.evidence["rank"]["on_cluster"]
    assert ordered["cluster"] == "ceres" and ordered["levels"][-1]["read"] == "tree"
    assert p.evidence["rank"]["levels"][-1]["allocation"] == "w"  # the tree's rank stays beside it
    (candidate,) = p.evidence["routing"]["candidates"]
    assert candidate["cluster"] == "ceres" and candidate["project_rank"] == 2  # behind x (nothing used)
    why = result.explanations["v1"]
    on_ceres = why.evidence["rank"]["on_cluster"]
    assert on_ceres["cluster"] == "ceres" and on_ceres["levels"][-1]["read"] == "cluster"
    assert on_ceres["levels"][-1]["rank"] == 3  # behind x and w on ceres, though ahead of w over the tree
    assert why.evidence["rank"]["levels"][-1]["rank"] == 2  # over the tree: behind x only (x used nothing)
    assert why.evidence["rank"]["levels"][-1]["allocation"] == "v"
    assert "ranked 3 of 3 at its level on ceres" in why.text, why.text


def test_one_cluster_orders_as_the_tree() -> None:
    one = (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),)
    jobs = [pending("v1", "v", 8, submitted_at=NOW - 600), pending("w1", "w", 8, submitted_at=NOW - 60)]
    snaps = [snapshot(one, tree=tree(v=0.5, w=0.5), usage={"v": 1e5, "w": 1e5}, pending=jobs, levels=("cluster",),
                      settings=ON, cluster_usage=cu)
             for cu in ({"ceres": {"v": 1e5, "w": 1e5}}, {"ceres": {"v": 9e9}}, None)]
    results = [schedule(s) for s in snaps]
    assert {r.order for r in results} == {("v1", "w1")}
    assert len({repr(r.to_dict()) for r in results}) == 1
