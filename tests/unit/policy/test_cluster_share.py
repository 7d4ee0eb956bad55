"""Fair share per cluster (issue 25, ADR 0076), hand-computed: an allocation's part of each cluster, its standing
there, the worse of that and the tree's standing, and the cycle's strict improvement and reservations on a cluster
reading it; one cluster (or the setting off, or no usage per cluster) decides as before."""

from __future__ import annotations

import math
from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cluster_share import (
    cluster_parts,
    cluster_standings,
    demand_clusters,
    standing_on,
    tree_allows,
    usable_clusters,
)
from steward.policy.cycle import schedule
from steward.policy.model import Node, PendingJob
from steward.policy.usage import entitled_horizon_s
from tests.unit.policy.builders import HOUR, NOW, nested, pending, preempted, running, snapshot, tree

WEEK = entitled_horizon_s(PolicySettings())


@pytest.mark.parametrize(
    ("tree_ratio", "cluster_ratio", "want"),
    [
        (0.1, 0.2, 0.2),  # over its part of the cluster: the cluster's reading
        (0.3, 0.2, 0.3),  # over its budget on the tree: no escape by moving clusters
        (0.2, 0.2, 0.2),
        (0.0, math.inf, math.inf),  # no part of the cluster (pinned elsewhere): never ahead there
        (math.inf, 0.0, math.inf),  # entitled to nothing on the tree
    ],
)
def test_the_standing_on_a_cluster_is_the_worse_of_the_two(
    tree_ratio: float, cluster_ratio: float, want: float
) -> None:
    assert standing_on(tree_ratio, cluster_ratio) == want


@pytest.mark.parametrize(
    ("waiting", "victim", "want"),
    [
        (0.1, 0.2, True),
        (0.2, 0.2, True),  # level over the tree: the cluster's standing decides
        (0.3, 0.2, False),  # the victim is less served over the tree: never its GPUs
        (0.0, math.inf, True),
        (math.inf, 0.5, False),
    ],
)
def test_work_is_never_taken_for_an_allocation_more_served_over_the_tree(
    waiting: float, victim: float, want: bool
) -> None:
    assert tree_allows(waiting, victim) is want


@pytest.mark.parametrize(
    ("capacity", "accepted", "want"),
    [
        ({"ceres": 16, "jupiter": 48}, None, ["ceres", "jupiter"]),  # no jobs: every cluster
        ({"ceres": 16, "jupiter": 48}, set(), ["ceres", "jupiter"]),
        ({"ceres": 16, "jupiter": 48}, {"ceres"}, ["ceres"]),  # pinned, or every job asks for ceres
        ({"ceres": 16, "jupiter": 48}, {"ceres", "jupiter"}, ["ceres", "jupiter"]),
        ({"ceres": 16}, {"jupiter"}, []),  # asks only for a cluster with no registered nodes: nowhere
    ],
)
def test_the_clusters_an_allocations_demand_may_use(
    capacity: dict[str, float], accepted: set[str] | None, want: list[str]
) -> None:
    assert usable_clusters(capacity, accepted) == want


def test_the_clusters_of_an_allocations_demand_are_those_its_jobs_accept() -> None:
    jobs = [
        pending("a1", "a", clusters=("ceres",)),
        pending("a2", "a", gpu_models=("A100",)),
        pending("b1", "b", clusters=("ceres",)),
        running("c1", "c", on="j0"),
    ]
    accepts = {("ceres",): ("ceres",), (): ("ceres", "jupiter")}
    got = demand_clusters(
        jobs, lambda j: {"A100": ("jupiter",)}.get(j.gpu_models[0]) if j.gpu_models else accepts[j.clusters]
    )
    assert got == {"a": {"ceres", "jupiter"}, "b": {"ceres"}, "c": {"ceres", "jupiter"}}


@pytest.mark.parametrize(
    ("accepted", "want"),
    [
        # in proportion to the clusters' GPUs (16 : 48), each project's parts summing to its entitlement
        (
            {},
            {
                "ceres": {"a": 0.1, "b": 0.15, "c": 0.0, "g": 0.25},
                "jupiter": {"a": 0.3, "b": 0.45, "c": 0.0, "g": 0.75},
            },
        ),
        # a's work can run only on ceres (pinned, or asking for it): its whole entitlement there, nothing on
        # jupiter; g, its parent, has the fraction of its projects' entitlement on each
        (
            {"a": {"ceres"}},
            {
                "ceres": {"a": 0.4, "b": 0.15, "c": 0.0, "g": 0.55},
                "jupiter": {"a": 0.0, "b": 0.45, "c": 0.0, "g": 0.45},
            },
        ),
    ],
)
def test_an_allocations_part_of_each_cluster(accepted: dict[str, set[str]], want: dict[str, dict[str, float]]) -> None:
    t = nested({"g": {"share": 1.0, "children": {"a": 0.4, "b": 0.6}}, "c": 0.0})
    parts = cluster_parts(t, {"ceres": 16, "jupiter": 48}, accepted)
    assert {c: {n: pytest.approx(v) for n, v in p.items()} for c, p in want.items()} == parts
    for p in ("a", "b", "g"):
        assert sum(parts[c][p] for c in parts) == pytest.approx(t.entitlement(p))


def test_the_standing_on_each_cluster_reads_that_clusters_usage() -> None:
    t = tree(a=0.5, b=0.5)
    got = cluster_standings(
        t,
        {"ceres": {"a": 1000.0}, "jupiter": {"a": 3000.0, "b": 500.0}},
        {"ceres": 8, "jupiter": 8},
        {},
        PolicySettings(),
    )
    entitled = 0.25 * 16 * WEEK  # half of a's entitlement is on each of two equal clusters
    assert got["ceres"].ratio == {"a": pytest.approx(1000 / entitled), "b": 0.0}
    assert got["jupiter"].ratio == {"a": pytest.approx(3000 / entitled), "b": pytest.approx(500 / entitled)}
    ev = got["ceres"].evidence("a", tree_ratio=0.5)
    assert ev["read"] == "tree" and ev["standing"] == 0.5 and ev["part"] == 0.25


# --- the cycle: strict improvement on the cluster the victim runs on ---------------------------------------


def two() -> tuple[Node, ...]:
    """ceres: c0; jupiter: j0; 8 GPUs each, one model (weights 1)."""
    return (
        Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
        Node("j0", 8, "H100", ("jupiter",), "ready", "jupiter"),
    )


def case(
    usage_w: dict[str, float],
    usage_v: dict[str, float],
    settings: PolicySettings | None = None,
    nodes: tuple[Node, ...] | None = None,
    per_cluster: bool = True,
    pin: str = "",
    more: tuple[PendingJob, ...] = (),
) -> Any:
    """v runs 8 GPUs on c0, out of its protection; w waits for 8 GPUs of ceres (jupiter is full of protected work of
    a third allocation x). `usage_*`: per cluster, the usage of w and v there (their tree usage is the sum)."""
    nodes = nodes or two()
    cluster_usage: dict[str, dict[str, float]] = {}
    for project, per in (("w", usage_w), ("v", usage_v)):
        for c, u in per.items():
            cluster_usage.setdefault(c, {})[project] = u
    usage = {"w": sum(usage_w.values()), "v": sum(usage_v.values()), "x": 0.0}
    run = [
        running(
            "v1",
            "v",
            8,
            on="c0",
            started_at=NOW - 2 * HOUR,
            protected_for=HOUR,
            pin=pin,
            clusters=(pin,) if pin else (),
        )
    ]
    if len(nodes) > 1:
        run.append(running("x1", "x", 8, on="j0", started_at=NOW, protected_for=8 * HOUR))
    return schedule(
        snapshot(
            nodes,
            tree=tree(w=0.4, v=0.4, x=0.2),
            usage=usage,
            running=run,
            pending=[pending("w1", "w", 8, clusters=("ceres",), submitted_at=NOW - 60), *more],
            settings=settings or PolicySettings(),
            levels=("cluster",),
            cluster_usage=cluster_usage if per_cluster else None,
        )
    )


ANYWHERE = (pending("w2", "w", 1, submitted_at=NOW),)  # w's demand also accepts every cluster
OFF = PolicySettings(cluster_fair_share=False)


@pytest.mark.parametrize(
    ("usage_w", "usage_v", "settings", "per_cluster", "more", "want"),
    [
        # v spent its usage on ceres (over its part there), w as much on jupiter: equal on the tree, so the tree's
        # standing refuses w; on ceres w stands at its tree ratio, v at its (higher) ceres ratio: v's GPUs go to w
        ({"jupiter": 1e5}, {"ceres": 1e5}, None, True, (), {"v1": "w1"}),
        ({"jupiter": 1e5}, {"ceres": 1e5}, OFF, True, (), {}),  # the tree's alone
        ({"jupiter": 1e5}, {"ceres": 1e5}, None, False, (), {}),  # usage per cluster not known: the tree's alone
        # w's demand accepts both clusters and it is over its part of ceres, where v has used little: although
        # less served on the tree, w may not take v's GPUs there
        ({"ceres": 1.5e5}, {"ceres": 57600.0, "jupiter": 142400.0}, None, True, ANYWHERE, {}),
        ({"ceres": 1.5e5}, {"ceres": 57600.0, "jupiter": 142400.0}, OFF, True, ANYWHERE, {"v1": "w1"}),
        # the same usage, but w's demand can run only on ceres: its whole entitlement is there (its owed is
        # tree-wide, ADR 0062), so it is not over-served for using ceres alone
        ({"ceres": 1.5e5}, {"ceres": 57600.0, "jupiter": 142400.0}, None, True, (), {"v1": "w1"}),
        # v is over its part of ceres (all its usage there) but less served than w over the tree: w, over-served on
        # the whole, never takes GPUs from v, whatever either did on ceres (one budget)
        ({"jupiter": 3e5}, {"ceres": 2e5}, None, True, (), {}),
        ({"jupiter": 3e5}, {"ceres": 2e5}, OFF, True, (), {}),
        # far less served on both: preempted either way
        ({"ceres": 1e3}, {"ceres": 1e6}, None, True, (), {"v1": "w1"}),
    ],
)
def test_strict_improvement_on_a_cluster_reads_its_standing_there(
    usage_w: dict[str, float],
    usage_v: dict[str, float],
    settings: PolicySettings | None,
    per_cluster: bool,
    more: tuple[PendingJob, ...],
    want: dict[str, str],
) -> None:
    assert preempted(case(usage_w, usage_v, settings, per_cluster=per_cluster, more=more)) == want


def test_the_preemption_says_which_standing_decided() -> None:
    result = case({"jupiter": 1e5}, {"ceres": 1e5})
    (p,) = result.preemptions
    check = p.evidence["check"]
    tree_ratios = check["tree"]  # the tree's figures refused it; the cluster's standing (the worse) allowed it
    assert tree_ratios["waiting_ratio_after"] > tree_ratios["victim_ratio_after"]
    assert check["waiting_ratio_after"] < check["victim_ratio_after"]
    on = p.evidence["standing_on_cluster"]
    assert on["cluster"] == "ceres" and on["waiting"]["read"] == "tree" and on["victim"]["read"] == "cluster"
    assert (on["waiting"]["allocation"], on["victim"]["allocation"]) == ("w", "v")


def test_an_allocation_pinned_to_the_cluster_stands_there_with_its_whole_entitlement() -> None:
    # v is pinned to ceres (its jobs accept ceres alone, as the bridge narrows them): its part of ceres is its whole
    # entitlement, so its 1e5 on ceres reads as on the tree
    # (equal to w's): w is refused as with the tree's standing
    assert preempted(case({"jupiter": 1e5}, {"ceres": 1e5}, pin="ceres")) == {}


def test_one_cluster_decides_as_the_trees_standing() -> None:
    one = (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),)
    for usage_w, usage_v in (({"ceres": 1e5}, {"ceres": 1e5}), ({"ceres": 1e3}, {"ceres": 1e6})):
        with_usage = case(usage_w, usage_v, nodes=one)
        without = case(usage_w, usage_v, nodes=one, per_cluster=False)
        assert preempted(with_usage) == preempted(without)
        assert [p.evidence for p in with_usage.preemptions] == [p.evidence for p in without.preemptions]


def test_a_gangs_reservation_dates_releases_by_the_standing_on_their_cluster() -> None:
    """A 16-GPU gang of w for ceres (two nodes, each held by v's work out of protection) can be reserved only if
    those releases can be dated, i.e. w may preempt v there once the nodes are needed: true on ceres' standing,
    not on the tree's. (No victim search reaches it here: a gang's search is capped to 0.)"""
    nodes = (
        Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
        Node("c1", 8, "H100", ("ceres",), "ready", "ceres"),
        Node("j0", 8, "H100", ("jupiter",), "ready", "jupiter"),
        Node("j1", 8, "H100", ("jupiter",), "ready", "jupiter"),
    )
    run = [
        running(f"v{i}", "v", 8, on=n, started_at=NOW - HOUR / 2, protected_for=HOUR)
        for i, n in enumerate(("c0", "c1"))
    ]
    run += [running(f"x{i}", "x", 8, on=n, started_at=NOW, protected_for=8 * HOUR) for i, n in enumerate(("j0", "j1"))]

    def reserved(settings: PolicySettings) -> list[str | None]:
        result = schedule(
            snapshot(
                nodes,
                tree=tree(w=0.4, v=0.4, x=0.2),
                usage={"w": 2e5, "v": 2e5, "x": 0.0},
                running=run,
                pending=[pending("g", "w", 16, clusters=("ceres",))],
                settings=settings,
                levels=("cluster",),
                cluster_usage={"ceres": {"v": 2e5}, "jupiter": {"w": 2e5}},
            )
        )
        return [r.get("cluster") for r in result.evidence["reservations"]]

    assert reserved(PolicySettings(gang_preemption_searches_per_cycle=0)) == ["ceres"]
    assert reserved(PolicySettings(gang_preemption_searches_per_cycle=0, cluster_fair_share=False)) == []
