"""Several clusters and GPU models in the simulator (issue 25, ADR 0057): scenarios with `clusters:` and
`gpu_models:`, traces naming what a job accepts, the two-clusters family, and the routed placements of a
whole run (never a model or cluster a job excluded, never a gang across clusters, always the evidence)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from steward.policy.cycle import schedule
from steward.policy.model import CycleResult, Snapshot
from steward.sim.errors import ScenarioError
from steward.sim.generate import TWO_CLUSTER_WEIGHTS, GenerateError, generate
from steward.sim.run import simulate
from steward.sim.scenario import load_scenario
from tests.unit.policy.builders import check_routing

HEADER = "job_id,submit_s,duration_s,gpus,tenant,class,min_runtime_s,resumable,gpu_models,clusters\n"


def write(tmp_path: Path, doc: dict[str, Any], rows: str) -> Path:
    (tmp_path / "t.csv").write_text(HEADER + rows)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "two", "trace": "t.csv", **doc}))
    return path


TWO: dict[str, Any] = {
    "clusters": {"ceres": {"nodes": 2, "gpus_per_node": 8, "gpu_model": "H100"},
                 "jupiter": {"nodes": [{"name": "a", "gpus": 8, "gpu_model": "A100"},
                                       {"name": "v", "gpus": 4, "gpu_model": "V100"}]}},
    "gpu_models": {"H100": 1.0, "A100": 0.5},
    "tree": {"p": 0.5, "q": 0.5},
}


def test_a_scenario_declares_clusters_models_and_weights(tmp_path: Path) -> None:
    rows = "j1,0,60,16,p,batch,60,1,H100,\nj2,1,60,2,q,batch,60,1,A100|V100,jupiter\n"
    sc = load_scenario(write(tmp_path, TWO, rows))
    assert {(n.name, n.cluster, n.gpu_model, n.path[0]) for n in sc.nodes} == {
        ("ceres-node000", "ceres", "H100", "ceres"), ("ceres-node001", "ceres", "H100", "ceres"),
        ("jupiter-a", "jupiter", "A100", "jupiter"), ("jupiter-v", "jupiter", "V100", "jupiter")}
    assert sc.settings_overrides["gpu_model_weights"] == {"H100": 1.0, "A100": 0.5}
    assert [(j.gpu_models, j.clusters) for j in sc.jobs] == [(("H100",), ()), (("A100", "V100"), ("jupiter",))]
    # 12 GPUs of A100 and V100 in jupiter: a gang of 12 on them fits (one cluster, its two models)
    assert load_scenario(write(tmp_path, TWO, "j,0,60,12,p,batch,60,1,A100|V100,\n")).jobs[0].gpus == 12


@pytest.mark.parametrize(("weights", "problem"), [
    ({"V100": 0}, "--set gpu_model_weights: the weight of 'V100' must be > 0 (budget units per GPU-hour), got 0"),
    ({"V100": float("nan")}, "--set gpu_model_weights: the weight of 'V100' must be a finite number, got nan"),
    ({"V100": "cheap"}, "--set gpu_model_weights: the weight of 'V100' must be a finite number, got 'cheap'"),
])
def test_a_weight_set_on_the_command_line_follows_the_ledgers_rule(tmp_path: Path, weights: dict[str, Any],
                                                                   problem: str) -> None:
    """ADR 0098: `gpu_models:` refused a weight of 0 and `--set gpu_model_weights=...` took it (the V100's hours
    free in the simulated budgets); both follow `domain.clusters.weight_problem` now, as the ledger does."""
    from steward.sim.errors import OverrideError
    from steward.sim.policies import settings_for

    sc = load_scenario(write(tmp_path, TWO, "j1,0,60,1,p,batch,60,1,,\n"))
    with pytest.raises(OverrideError) as err:
        settings_for("steward", sc, {"gpu_model_weights": weights})
    assert str(err.value) == problem
    assert settings_for("steward", sc, {"gpu_model_weights": {"V100": 0.25}}).gpu_model_weights["V100"] == 0.25


def test_a_clusters_executor_is_the_live_stacks_and_the_simulator_ignores_it(tmp_path: Path) -> None:
    """ADR 0068: the file `steward cluster apply` registers two clusters with their own executors from
    simulates as it is."""
    doc = {**TWO, "clusters": {**TWO["clusters"], "ceres": {**TWO["clusters"]["ceres"], "executor": "ceres"}}}
    sc = load_scenario(write(tmp_path, doc, "j,0,60,1,p,batch,60,1,,\n"))
    assert sorted({n.cluster for n in sc.nodes}) == ["ceres", "jupiter"]


@pytest.mark.parametrize(("doc", "rows", "message"), [
    ({**TWO, "cluster": {"nodes": 1, "gpus_per_node": 8}}, "j,0,60,1,p,batch,60,1,,\n", "not both"),
    ({**TWO, "gpu_models": {"B200": 2.0}}, "j,0,60,1,p,batch,60,1,,\n", "no node has the model 'B200'"),
    ({**TWO, "gpu_models": {"H100": 0}}, "j,0,60,1,p,batch,60,1,,\n", "a weight must be > 0"),
    ({**TWO, "clusters": {"bad name": {"nodes": 1, "gpus_per_node": 8}}}, "j,0,60,1,p,batch,60,1,,\n",
     "the name 'bad name'"),
    (TWO, "j,0,60,1,p,batch,60,1,B200,\n", "gpu_models: unknown 'B200'"),
    (TWO, "j,0,60,1,p,batch,60,1,,mars\n", "clusters: unknown 'mars'"),
    # gangs never span clusters: 24 GPUs exist, 16 in the largest cluster
    (TWO, "j,0,60,24,p,batch,60,1,,\n", "the largest placement it accepts (in one cluster) has 16"),
], ids=["both", "unknown weight", "zero weight", "bad cluster name", "unknown model", "unknown cluster",
        "gang across clusters"])
def test_bad_clusters_and_requests_are_refused_by_name(tmp_path: Path, doc: dict[str, Any], rows: str,
                                                        message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(write(tmp_path, doc, rows))


def checking(seen: list[dict[str, Any]]) -> Any:
    """A scheduler that runs the policy and checks every placement against the snapshot it was made on."""

    def run(snapshot: Snapshot) -> CycleResult:
        result = schedule(snapshot)
        seen.extend(check_routing(snapshot, result))
        return result

    return run


@pytest.mark.parametrize("policy", ["steward", "fifo-priority", "ai2", "fair-tree"])
def test_every_placement_of_the_two_cluster_family_honours_what_the_job_accepts(tmp_path: Path, policy: str) -> None:
    g = generate("two-clusters", 2, {"nodes": 8, "jobs": 250})
    sc = load_scenario(g.write(tmp_path))
    seen: list[dict[str, Any]] = []
    result = simulate(sc, policy, scheduler=checking(seen))
    assert result.figures["jobs"] == 250
    assert len(seen) >= 250  # every job placed at least once, each with its routing evidence
    assert {r["cluster"] for r in seen} == {"ceres", "jupiter"}
    assert any(len(r["candidates"]) == 2 and not all(c["fits_now"] for c in r["candidates"]) for r in seen)


def test_the_family_has_three_models_two_clusters_weights_and_requests_that_fit(tmp_path: Path) -> None:
    g = generate("two-clusters", 5, {"nodes": 16, "jobs": 1500})
    sc = load_scenario(g.write(tmp_path))
    assert {(n.cluster, n.gpu_model) for n in sc.nodes} == {("ceres", "H100"), ("jupiter", "A100"), ("jupiter", "V100")}
    assert sc.settings_overrides["gpu_model_weights"] == TWO_CLUSTER_WEIGHTS
    batch = [j for j in sc.jobs if j.job_class == "batch"]
    named = sum(bool(j.gpu_models) for j in batch) / len(batch)
    pinned = sum(bool(j.clusters) for j in batch) / len(batch)
    assert 0.25 <= named <= 0.4 and 0.05 <= pinned <= 0.15
    assert all(not j.gpu_models and not j.clusters for j in sc.jobs if j.job_class != "batch")
    with pytest.raises(GenerateError, match="nodes must be >= 4"):
        generate("two-clusters", 0, {"nodes": 3})


# -- allocations pinned to a cluster (ADR 0067) ----------------------------------------------------------

PINNED: dict[str, Any] = {
    "clusters": {"ceres": {"nodes": 1, "gpus_per_node": 8, "gpu_model": "H100"},
                 "jupiter": {"nodes": 1, "gpus_per_node": 8, "gpu_model": "H100"}},
    "tree": {"lab": {"share": 0.5, "pin": "ceres", "children": {"p": 1.0}}, "q": 0.5},
}


@pytest.mark.parametrize(("tree", "rows", "message"), [
    ({"p": {"share": 1.0, "pin": "mars"}}, "j,0,60,1,p,batch,60,1,,\n",
     "tree.p: pin: unknown cluster 'mars'; the scenario's clusters are ceres, jupiter"),
    ({"p": {"share": 1.0, "pin": 3}}, "j,0,60,1,p,batch,60,1,,\n", "pin must be a cluster's name, got 3"),
    ({"lab": {"share": 1.0, "pin": "ceres", "children": {"p": {"share": 1.0, "pin": "jupiter"}}}},
     "j,0,60,1,p,batch,60,1,,\n", "tree.p: pin: 'lab' is pinned to cluster 'ceres'"),
    (PINNED["tree"], "j,0,60,1,p,batch,60,1,,jupiter\n",
     "line 2: job j: allocation 'p' is pinned to cluster 'ceres' (its jobs run only there), but the job asks "
     "for cluster jupiter"),
    (PINNED["tree"], "j,0,60,9,p,batch,60,1,,\n",
     "job j needs 9 GPUs, the largest placement it accepts (in one cluster (its allocation is pinned to "
     "'ceres')) has 8"),
], ids=["unknown cluster", "not a name", "subtree on two clusters", "asks another cluster", "too big for its pin"])
def test_bad_pins_are_refused_by_name(tmp_path: Path, tree: dict[str, Any], rows: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(write(tmp_path, {**PINNED, "tree": tree}, rows))


def test_a_pinned_allocations_jobs_wait_for_its_cluster_and_it_is_owed_what_that_cluster_could_deliver(
        tmp_path: Path) -> None:
    # p (under `lab`, pinned to ceres, entitled to all 16 GPUs) asks 16 GPUs for an hour: unpinned it runs on
    # both clusters at once; pinned, one job waits for the other on ceres, and each hour it is owed at most
    # ceres' 8 GPUs (the books' rule, ADR 0067): 8 + 8, not 16 + 8, so delivered/owed stays whole
    rows = "a,0,3600,8,p,batch,60,1,,\nb,0,3600,8,p,batch,60,1,,\n"
    tree: dict[str, Any] = {"lab": {"share": 1.0, "pin": "ceres", "children": {"p": 1.0}}}
    seen: list[dict[str, Any]] = []
    pinned = simulate(load_scenario(write(tmp_path, {**PINNED, "tree": tree}, rows)), "steward",
                      scheduler=checking(seen))
    assert {r["cluster"] for r in seen} == {"ceres"} and all(r["pinned_to"] == "ceres" for r in seen)
    unpinned = {"lab": {"share": 1.0, "children": {"p": 1.0}}}
    free = simulate(load_scenario(write(tmp_path, {**PINNED, "tree": unpinned}, rows)), "steward")
    assert free.recorder.end == pytest.approx(3600.0) and pinned.recorder.end == pytest.approx(7200.0)

    def row(result: Any, name: str) -> dict[str, Any]:
        return next(r for r in result.recorder.owed_delivered_table() if r["allocation"] == name)

    for name in ("p", "lab"):  # the pin holds for the subtree; the pinned node itself is capped too
        assert row(free, name)["owed_gpu_h"] == pytest.approx(16.0)
        assert row(pinned, name)["owed_gpu_h"] == pytest.approx(16.0)  # 8 an hour for two hours
        assert row(pinned, name)["delivered_gpu_h"] == pytest.approx(16.0)
        assert row(pinned, name)["ratio"] == pytest.approx(1.0)
    assert pinned.recorder.owed_ceiling_hourly("p") == pytest.approx(8 * 3600.0)
    assert free.recorder.owed_ceiling_hourly("p") is None


def test_the_file_tree_apply_reads_simulates_with_its_pins_and_display_names(tmp_path: Path) -> None:
    tree = {"lab": {"share": 1.0, "pin": "ceres", "name": "Vision Lab", "children": {"p": 1.0}}}
    sc = load_scenario(write(tmp_path, {**PINNED, "tree": tree}, "j,0,60,8,p,batch,60,1,,\n"))
    assert sc.allocations["lab"].pin == "ceres" and sc.allocations["p"].pin == ""


def test_the_trimmed_queue_decides_as_the_full_one_with_the_debug_quota_per_cluster(tmp_path: Path) -> None:
    # ADR 0073: a lane chain's head keeps the allocation's quota of jobs (sim/view.py); every part per cluster is
    # at most the quota, so the trimmed queue still qualifies and places as the full one does
    from steward.sim.engine import Engine
    from steward.sim.policies import settings_for, tree_for

    sc = load_scenario(generate("two-clusters", 1, {"nodes": 8, "jobs": 400}).write(tmp_path))

    def trace(trim: bool) -> list[dict[str, Any]]:
        engine = Engine(sc, settings_for("steward", sc), tree_for(sc), schedule, record_decisions=True)
        engine.trim, engine.skip = trim, False
        engine.run()
        assert engine.debug_parts  # the quota is per cluster here
        out: list[dict[str, Any]] = engine.stats.trace
        return out

    assert trace(True) == trace(False)
