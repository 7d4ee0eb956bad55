"""Invariants of several clusters and GPU models (issue 25, ADR 0057), on random snapshots: a job is never
placed on a model or cluster it excluded, a gang never spans clusters, a preemption made for a routed job
frees GPUs it may use in one cluster, a routed placement always carries its routing evidence, and weights
of 1.0 charge exactly the unweighted usage."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.policy.builders import check_routing

from steward.domain.policy_settings import PolicySettings, UsageMode
from steward.policy.cycle import schedule
from steward.policy.model import AllocationTree, Node, PendingJob, RunningJob, Snapshot
from steward.policy.usage import Interval, window_usage

NOW = 100_000.0
MODELS = ("H100", "A100", "V100")
CLUSTERS = ("ceres", "jupiter")
PROJECTS = ("a", "b", "c")
MODES: tuple[UsageMode, ...] = ("window", "decay")


@st.composite
def snapshots(draw: st.DrawFn, max_running: int = 6) -> Snapshot:
    nodes = []
    for i in range(draw(st.integers(1, 10))):
        cluster = draw(st.sampled_from(CLUSTERS))
        nodes.append(Node(f"n{i}", draw(st.sampled_from((4, 8))), draw(st.sampled_from(MODELS)),
                          (cluster, f"b{i // 3}"), "ready", cluster))
    free = {n.id: n.gpus for n in nodes}
    running = []
    for k in range(draw(st.integers(0, max_running))):
        n = draw(st.sampled_from(nodes))
        if free[n.id] == 0:
            continue
        g = draw(st.integers(1, free[n.id]))
        free[n.id] -= g
        start = NOW - draw(st.floats(0, 20_000))
        funded = draw(st.booleans())
        running.append(RunningJob(f"r{k}", draw(st.sampled_from(PROJECTS)), g, ((n.id, g),), start,
                                  start + (draw(st.floats(0, 10_000)) if funded else 0.0), funded))
    pending = []
    for k in range(draw(st.integers(1, 12))):
        models = tuple(draw(st.lists(st.sampled_from(MODELS), max_size=2, unique=True)))
        clusters = tuple(draw(st.lists(st.sampled_from(CLUSTERS), max_size=1, unique=True)))
        pending.append(PendingJob(f"p{k}", draw(st.sampled_from(PROJECTS)), draw(st.sampled_from((1, 2, 4, 8, 12, 16))),
                                  float(k), draw(st.sampled_from((0.0, 3600.0))), gpu_models=models,
                                  clusters=clusters))
    return Snapshot(now=NOW, nodes=tuple(nodes), tree=AllocationTree.flat({"a": 0.5, "b": 0.3, "c": 0.2}),
                    usage={p: draw(st.floats(0, 1e6)) for p in PROJECTS}, running=tuple(running),
                    pending=tuple(pending), settings=PolicySettings(), topology_levels=())


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_placements_honour_what_the_job_accepts_and_stay_in_one_cluster(snap: Snapshot) -> None:
    check_routing(snap, schedule(snap))


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_a_preemption_for_a_job_frees_gpus_it_may_use_in_one_cluster(snap: Snapshot) -> None:
    preemptions_stay_in_one_cluster(snap)


@settings(max_examples=100, deadline=None)
@given(snapshots(max_running=24))
def test_a_preemption_for_a_reserved_gang_frees_gpus_in_one_cluster(snap: Snapshot) -> None:
    # crowded: routed gangs hold reservations, and their victim search may add their reserved nodes (ADR 0071)
    preemptions_stay_in_one_cluster(snap)


def preemptions_stay_in_one_cluster(snap: Snapshot) -> None:
    result = schedule(snap)
    nodes = {n.id: n for n in snap.nodes}
    jobs = {j.id: j for j in snap.pending}
    victims = {r.id: r for r in snap.running}
    by_beneficiary: dict[str, set[str]] = {}
    for pre in result.preemptions:
        job = jobs.get(pre.for_job_id)
        if job is None:
            continue
        for node_id, _ in victims[pre.victim_id].placement:
            n = nodes[node_id]
            by_beneficiary.setdefault(job.id, set()).add(n.cluster)
            assert not job.clusters or n.cluster in job.clusters
            assert not job.gpu_models or n.model in job.gpu_models
    assert all(len(c) == 1 for c in by_beneficiary.values()), by_beneficiary


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PROJECTS), st.floats(0, 50_000), st.floats(0, 50_000),
                          st.integers(0, 8), st.sampled_from(MODELS)), max_size=20),
       st.sampled_from(MODES))
def test_weights_of_one_charge_the_unweighted_usage(rows: list[tuple[str, float, float, int, str]],
                                                     mode: UsageMode) -> None:
    intervals = [Interval(p, min(a, b), max(a, b), g, m) for p, a, b, g, m in rows]
    plain = PolicySettings(window_s=20_000.0, usage_mode=mode)
    ones = PolicySettings(window_s=20_000.0, usage_mode=mode,
                          gpu_model_weights=dict.fromkeys(MODELS, 1.0))
    assert window_usage(intervals, 60_000.0, ones) == window_usage(intervals, 60_000.0, plain)
    halves = PolicySettings(window_s=20_000.0, usage_mode=mode,
                            gpu_model_weights=dict.fromkeys(MODELS, 0.5))
    got = window_usage(intervals, 60_000.0, halves)
    for project, value in window_usage(intervals, 60_000.0, plain).items():
        assert abs(got[project] - value / 2) <= 1e-9 * max(1.0, value)


@settings(max_examples=150, deadline=None)
@given(snapshots(max_running=24))  # crowded, so that gangs wait and reserve
def test_a_reservation_stays_in_one_cluster_on_nodes_the_gang_accepts(snap: Snapshot) -> None:
    # ADR 0071: a routed gang's reservation is on one cluster, only on nodes of models and clusters it accepts,
    # and says which cluster; work placed on reserved nodes stays routed as every placement is
    result = schedule(snap)
    nodes = {n.id: n for n in snap.nodes}
    jobs = {j.id: j for j in snap.pending}
    first = result.reservation
    if first is not None and first.cluster is not None:  # a routed gang's (a one-cluster reservation has none)
        assert first.evidence["routing"]["cluster"] == first.cluster
    for r in result.evidence["reservations"]:
        job = jobs[r["job_id"]]
        held = [nodes[n] for n in r["nodes"]]
        # one cluster, and the one named when the gang is routed (a one-cluster reservation names none)
        clusters = {n.cluster for n in held}
        assert len(clusters) == 1 and clusters == {r.get("cluster", held[0].cluster)}, r
        assert all(not job.gpu_models or n.model in job.gpu_models for n in held), r
        assert all(not job.clusters or n.cluster in job.clusters for n in held), r
        assert sum(n.gpus for n in held) >= job.gpus
    check_routing(snap, result)
