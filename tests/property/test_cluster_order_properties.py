"""The order of waiting jobs per cluster (issue 25, ADR 0080), on random snapshots: with two clusters, the cycle's
order is every job at its allocation's standing on the cluster it accepts where that allocation ranks best (the
worse of the tree's standing and its usage there ÷ its part there, the part recomputed here from the snapshot's
figures alone) and never ahead of a job of its own project before it that may run where it may, so the
allocations whose waiting work accepts one cluster only are in that cluster's own order, and on every cluster a
project's jobs keep their priority order; with one cluster, the order is the tree's exactly."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.property.test_cluster_properties import CLUSTERS, snapshots

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.model import AllocationTree, Node, PendingJob, RunningJob, Snapshot
from steward.policy.ordering import demand_of, order_pending, standing
from steward.policy.usage import entitled_horizon_s

NOW = 100_000.0
SHARES = {"a": 0.5, "b": 0.3, "c": 0.2}


@st.composite
def two_clusters(draw: st.DrawFn) -> Snapshot:
    """Two clusters of 1-3 eight-GPU nodes, some funded work running, 1-12 waiting jobs accepting one cluster or
    both (priorities and submit times at random), usage per cluster at random (the tree's is their sum)."""
    nodes = [Node(f"{c}{i}", 8, "H100", (c, "b0"), "ready", c)
             for c in CLUSTERS for i in range(draw(st.integers(1, 3)))]
    running = []
    for k in range(draw(st.integers(0, 4))):
        n = draw(st.sampled_from(nodes))
        running.append(RunningJob(f"r{k}", draw(st.sampled_from(tuple(SHARES))), 1, ((n.id, 1),), NOW - 5000.0,
                                  NOW + 3600.0, True))
    pending = [
        PendingJob(f"p{k}", draw(st.sampled_from(tuple(SHARES))), draw(st.sampled_from((1, 8, 16, 64))),
                   float(draw(st.integers(0, 5))), 3600.0, priority=draw(st.integers(0, 2)),
                   clusters=tuple(draw(st.lists(st.sampled_from(CLUSTERS), max_size=1))))
        for k in range(draw(st.integers(1, 12)))
    ]
    cluster_usage = {c: {p: draw(st.floats(0, 5e5)) for p in SHARES} for c in CLUSTERS}
    usage = {p: sum(cluster_usage[c][p] for c in CLUSTERS) for p in SHARES}
    return Snapshot(now=NOW, nodes=tuple(nodes), tree=AllocationTree.flat(SHARES), usage=usage,
                    running=tuple(running), pending=tuple(pending), settings=PolicySettings(cluster_order=True),
                    cluster_usage=cluster_usage)


def expected_order(snap: Snapshot, only: str | None = None) -> list[str]:
    """ADR 0080 from first principles, on a flat tree: a project's part of a cluster is its entitlement × the
    cluster's GPUs ÷ the GPUs of the clusters its jobs (waiting and running) accept; its standing there the worse
    of the tree's and its usage there ÷ (part × capacity × window); a job's key the least of (standing, project)
    over the clusters it accepts, but no better than that of a job of its project ahead of it (priority, submit
    time, id) that may run on a cluster it may run on. `only`: the jobs of the projects whose every waiting job
    accepts that cluster alone."""
    assert snap.cluster_usage is not None
    cap = {c: float(sum(n.gpus for n in snap.nodes if n.cluster == c)) for c in CLUSTERS}
    whole = sum(cap.values())
    accepts: dict[str, set[str]] = {}
    for j in snap.pending:
        accepts.setdefault(j.project, set()).update(j.clusters or CLUSTERS)
    for r in snap.running:
        accepts.setdefault(r.project, set()).update(r.clusters or CLUSTERS)
    tree_ratio = standing(snap.tree, snap.usage, int(whole), snap.settings, demand_of(snap)).ratio
    window = entitled_horizon_s(snap.settings)

    def on(p: str, c: str) -> float:
        part = SHARES[p] * cap[c] / sum(cap[x] for x in accepts[p])
        return snap.cluster_usage[c][p] / (part * whole * window)  # type: ignore[index]

    def key(j: PendingJob) -> tuple[float, str]:
        return min((max(tree_ratio[j.project], on(j.project, c)), j.project) for c in (j.clusters or CLUSTERS))

    def queue(j: PendingJob) -> tuple[int, float, str]:
        return -j.priority, j.submitted_at, j.id

    # never ahead of a job of its own project before it that may run on a cluster it may run on
    keys: dict[str, tuple[float, str]] = {}
    mine = sorted(snap.pending, key=queue)
    for i, j in enumerate(mine):
        keys[j.id] = max([key(j)] + [keys[x.id] for x in mine[:i] if x.project == j.project
                                     and set(x.clusters or CLUSTERS) & set(j.clusters or CLUSTERS)])
    jobs = [j for j in snap.pending if only is None or all(x.clusters == (only,) for x in snap.pending
                                                           if x.project == j.project)]
    return [j.id for j in sorted(jobs, key=lambda j: (keys[j.id], queue(j)))]


@settings(max_examples=200, deadline=None)
@given(two_clusters())
def test_the_order_is_each_job_at_its_best_standing_on_a_cluster_it_accepts(snap: Snapshot) -> None:
    got = list(schedule(snap).order)
    assert got == expected_order(snap)
    # restricted to the allocations whose work waits for one cluster, the order is that cluster's: by the standing
    # on it
    jobs = {j.id: j for j in snap.pending}
    for c in CLUSTERS:
        assert [i for i in got if i in expected_order(snap, c)] == expected_order(snap, c)
        # and on every cluster, each project's jobs that may run there keep their order (priority, submit, id)
        for p in SHARES:
            there = [jobs[i] for i in got if jobs[i].project == p and c in (jobs[i].clusters or CLUSTERS)]
            assert there == sorted(there, key=lambda j: (-j.priority, j.submitted_at, j.id))


@settings(max_examples=100, deadline=None)
@given(two_clusters())
def test_with_the_setting_off_or_no_usage_per_cluster_the_order_is_the_trees(snap: Snapshot) -> None:
    cap = sum(n.gpus for n in snap.nodes)
    tree = [j.id for j in order_pending(snap.pending, standing(snap.tree, snap.usage, cap, snap.settings,
                                                                   demand_of(snap)), snap.usage, snap.settings).jobs]
    assert list(schedule(replace(snap, cluster_usage=None)).order) == tree
    for off_settings in (PolicySettings(), PolicySettings(cluster_order=True, cluster_fair_share=False)):
        off = replace(snap, settings=off_settings)
        assert list(schedule(off).order) == [j.id for j in order_pending(
            off.pending, standing(off.tree, off.usage, cap, off.settings, demand_of(off)), off.usage,
            off.settings).jobs]


@settings(max_examples=150, deadline=None)
@given(snapshots(), st.dictionaries(st.sampled_from(tuple(SHARES)), st.floats(0, 1e6)))
def test_one_cluster_orders_as_the_tree_exactly(snap: Snapshot, other: dict[str, float]) -> None:
    snap = replace(snap, settings=replace(snap.settings, cluster_order=True))
    one = replace(snap, nodes=tuple(replace(n, cluster="ceres", path=("ceres", *n.path[1:])) for n in snap.nodes))
    cap = sum(n.gpus for n in one.nodes if n.state == "ready")
    tree = order_pending(one.pending, standing(one.tree, one.usage, cap, one.settings, demand_of(one)), one.usage,
                         one.settings)
    for cluster_usage in (None, {"ceres": dict(one.usage)}, {"ceres": other}):
        assert list(schedule(replace(one, cluster_usage=cluster_usage)).order) == [j.id for j in tree.jobs]
