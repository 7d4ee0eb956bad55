"""Routing in the baselines of the two-clusters family (issue 25, ADR 0066): `tiresias` routes through
steward's routing, and the two routing baselines (`random-cluster`, `least-loaded`) pin each job at submit to
one admissible cluster. Whatever routes, a job never runs on a model or cluster it excluded, a gang never
spans clusters, and the random one is reproducible by its seed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steward.domain.clusters import admits
from steward.policy.cycle import schedule
from steward.policy.model import CycleResult, Snapshot
from steward.sim.engine import Engine, Router
from steward.sim.generate import generate
from steward.sim.policies import POLICIES, ROUTING, settings_for, tree_for
from steward.sim.routing import least_loaded, load, random_cluster, router_for
from steward.sim.run import simulate
from steward.sim.scenario import Scenario, TraceJob, load_scenario
from steward.sim.tiresias import Tiresias


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    g = generate("two-clusters", 3, {"nodes": 8, "jobs": 200})
    return load_scenario(g.write(tmp_path_factory.mktemp("two")))


def recording(inner: Callable[[Snapshot], CycleResult], seen: list[tuple[str, tuple[tuple[str, int], ...]]]) -> Any:
    def run(snapshot: Snapshot) -> CycleResult:
        result = inner(snapshot)
        seen.extend((p.job_id, p.assignments) for p in result.placements)
        return result

    return run


def run(sc: Scenario, policy: str, router: Router | None = None) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """Every placement of a whole run (job, assignments)."""
    seen: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    listener = Tiresias() if policy == "tiresias" else None
    inner: Callable[[Snapshot], CycleResult] = listener if listener is not None else schedule
    if policy in ROUTING and router is None:
        router = router_for(policy)
    engine = Engine(sc, settings_for(policy, sc), tree_for(sc), recording(inner, seen), listener=listener,
                    router=router)
    engine.run()
    return seen


@pytest.mark.parametrize("policy", ["tiresias", "random-cluster", "least-loaded"])
def test_no_job_runs_on_a_model_or_cluster_it_excluded_and_gangs_stay_in_one_cluster(two: Scenario,
                                                                                       policy: str) -> None:
    nodes = {n.name: n for n in two.nodes}
    jobs = {j.job_id: j for j in two.jobs}
    seen = run(two, policy)
    assert len({j for j, _ in seen}) == len(two.jobs)  # every job ran
    clusters_of: dict[str, set[str]] = {}
    for job_id, assignments in seen:
        spec = jobs[job_id]
        used = [nodes[n] for n, _ in assignments]
        assert len({n.cluster for n in used}) == 1, f"{job_id} spans clusters"
        assert all(admits(spec.gpu_models, spec.clusters, n.gpu_model, n.cluster) for n in used), (job_id, used)
        clusters_of.setdefault(job_id, set()).add(used[0].cluster)
    assert set().union(*clusters_of.values()) == {"ceres", "jupiter"}
    if policy in ROUTING:  # pinned at submit: every run of a job on its one cluster
        assert all(len(c) == 1 for c in clusters_of.values())
    assert any(len(spec_clusters) == 1 and spec.gpus > 8 for spec_clusters, spec in
               ((clusters_of[j], jobs[j]) for j in clusters_of))  # gangs were among them


def picks(router: Router, sc: Scenario) -> list[tuple[str, ...]]:
    both = ("ceres", "jupiter")
    engine = Engine(sc, settings_for("steward", sc), tree_for(sc), schedule)
    return [router(engine, j, both) for j in sc.jobs]


def test_random_routing_is_reproducible_by_its_seed_and_varies_with_it(two: Scenario) -> None:
    first, again, other = picks(random_cluster(1), two), picks(random_cluster(1), two), picks(random_cluster(2), two)
    assert first == again
    assert first != other
    counts = {c: sum(p == (c,) for p in first) for c in ("ceres", "jupiter")}
    assert min(counts.values()) > len(two.jobs) // 4  # both clusters drawn, roughly evenly
    # a whole run under the same seed places every job alike
    assert run(two, "random-cluster") == run(two, "random-cluster")


def job(gpus: int) -> TraceJob:
    return TraceJob(job_id="x", submit_s=0.0, duration_s=60.0, gpus=gpus, tenant="t", job_class="batch",
                    min_runtime_s=60.0, resumable=True)


@pytest.mark.parametrize(("free", "queued", "admissible", "expected"), [
    # (free GPUs per cluster, GPUs waiting pinned per cluster, the job's admissible clusters, its route)
    ({"ceres": 32, "jupiter": 32}, {}, ("ceres", "jupiter"), ("ceres",)),  # a tie: the name
    ({"ceres": 0, "jupiter": 32}, {}, ("ceres", "jupiter"), ("jupiter",)),  # busy ceres
    ({"ceres": 32, "jupiter": 32}, {"ceres": 8}, ("ceres", "jupiter"), ("jupiter",)),  # waiting work counts
    ({"ceres": 16, "jupiter": 8}, {"ceres": 0, "jupiter": 0}, ("ceres", "jupiter"), ("ceres",)),
    ({"ceres": 32, "jupiter": 0}, {}, ("jupiter",), ("jupiter",)),  # only one admissible: that one
])
def test_least_loaded_routes_to_the_least_loaded_admissible_cluster(two: Scenario, free: dict[str, int],
                                                                     queued: dict[str, int],
                                                                     admissible: tuple[str, ...],
                                                                     expected: tuple[str, ...]) -> None:
    engine = Engine(two, settings_for("steward", two), tree_for(two), schedule)
    engine.cluster_free.update(free)
    engine.cluster_queued.update(queued)
    assert engine.rec.cluster_capacity == {"ceres": 32, "jupiter": 32}
    assert load(engine, "ceres") == (32 - free["ceres"] + queued.get("ceres", 0)) / 32
    assert least_loaded()(engine, job(2), admissible) == expected


def test_the_routing_baselines_are_steward_on_one_cluster(tmp_path: Path) -> None:
    sc = load_scenario(generate("short-1gpu", 0, {"nodes": 4, "jobs": 120}).write(tmp_path))
    ref = simulate(sc, "steward").figures
    for name in ROUTING:
        assert name in POLICIES
        figs = simulate(sc, name).figures
        assert {k: v for k, v in figs.items() if k not in ("policy", "wall_s")} == \
            {k: v for k, v in ref.items() if k not in ("policy", "wall_s")}


TINY: dict[str, Any] = {
    "clusters": {"ceres": {"nodes": 1, "gpus_per_node": 8, "gpu_model": "H100"},
                 "jupiter": {"nodes": 1, "gpus_per_node": 8, "gpu_model": "A100"}},
    "tree": {"p": 0.5, "q": 0.5},
}
ROWS = ("job_id,submit_s,duration_s,gpus,tenant,class,min_runtime_s,resumable,gpu_models,clusters\n"
        "big,0,1000,8,p,batch,1000,1,,ceres\n"  # fills ceres until 1000, protected throughout
        "small,10,100,4,q,batch,60,1,,\n")  # could run on either


def pinned(cluster: str) -> Router:
    return lambda engine, job, admissible: (cluster,) if len(admissible) > 1 else admissible


@pytest.mark.parametrize(("router", "earliest", "occupancy"), [
    # steward's own routing: small goes to jupiter at 10, where there was room (ceres had none before 1000)
    (None, 1.0, {"ceres": 1.0, "jupiter": 1.0}),
    # pinned to ceres at submit: it waits until 1000 while jupiter had room from 10 (big is protected until then;
    # q, less served, would preempt it once out of its protection: test_routed_churn.py). Occupancy is hour by hour
    # (as the cluster-wide figure): ceres busy 8 x 1000 + 4 x 100 against the GPU-s of work it could run in
    # that hour, 8 x 1000 + 4 x 990 waiting + 4 x 100; jupiter idle while 4 x 990 it could run waited
    (pinned("ceres"), 0.0, {"ceres": 8400 / 12360, "jupiter": 0.0}),
    (pinned("jupiter"), 1.0, {"ceres": 1.0, "jupiter": 1.0}),
])
def test_the_share_routed_where_it_could_start_earliest_and_occupancy_per_cluster(
        tmp_path: Path, router: Router | None, earliest: float, occupancy: dict[str, float]) -> None:
    import yaml

    (tmp_path / "t.csv").write_text(ROWS)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "tiny", "trace": "t.csv", **TINY}))
    sc = load_scenario(tmp_path / "s.yaml")
    engine = Engine(sc, settings_for("steward", sc), tree_for(sc), schedule, router=router)
    figs = engine.run().figures("steward", "tiny", 2, 0.0)
    assert (figs["routed_jobs"], figs["routed_earliest_fraction"]) == (1, earliest)
    assert {c: f["occupancy"] for c, f in figs["by_cluster"].items()} == pytest.approx(occupancy, abs=1e-6)
