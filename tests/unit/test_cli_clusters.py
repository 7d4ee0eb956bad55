"""The CLI's side of clusters and GPU models (issue 25, ADR 0057): `submit --gpu-model/--cluster` (repeatable
or a comma list), `gpu-models set MODEL=WEIGHT ...`, and `cluster apply` of a file with several clusters and
weights; a malformed argument or file is refused by name before anything is sent."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from steward.cli.jobs import names_of
from steward.cli.operate import parse_weights
from steward.cli.scenario_file import (
    ScenarioFileError,
    check_locally,
    cluster_file,
    load_yaml,
    prune_plan,
    tree_commands,
)
from steward.domain.commands import ROOT, RegisterNode
from steward.domain.state import LedgerState
from steward.sim.scenario import load_scenario
from tests.unit.sim.test_clusters import TWO as SIM_TWO
from tests.unit.sim.test_clusters import write

PHILLY = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"


@pytest.mark.parametrize(("given", "names"), [
    ([], []),
    (["H100"], ["H100"]),
    (["H100,A100", "V100"], ["H100", "A100", "V100"]),
    (["H100, A100,", "H100"], ["H100", "A100"]),
])
def test_names_are_repeatable_or_a_comma_list(given: list[str], names: list[str]) -> None:
    assert names_of(given) == names


@pytest.mark.parametrize(("pairs", "out"), [
    (["H100=1", "A100=0.55"], {"H100": 1.0, "A100": 0.55}),
    (["H100"], "expected MODEL=WEIGHT"),
    (["=1"], "expected MODEL=WEIGHT"),
    (["A100=cheap"], "the weight of 'A100' is not a number"),
    (["A100=1", "A100=2"], "named twice"),
])
def test_weights_are_model_equals_weight(pairs: list[str], out: Any) -> None:
    if isinstance(out, dict):
        assert parse_weights(pairs) == out
    else:
        with pytest.raises(ValueError, match=out):
            parse_weights(pairs)


TWO = {"clusters": {"ceres": {"nodes": 2, "gpus_per_node": 8, "gpu_model": "H100"},
                    "jupiter": {"nodes": 1, "gpus_per_node": 4, "gpu_model": "A100"}},
       "gpu_models": {"H100": 1.0, "A100": 0.55}}


def test_cluster_apply_registers_each_named_cluster_under_its_name() -> None:
    commands, weights = cluster_file(TWO, "sim")
    assert [(c.node_id, c.cluster, c.gpu_model, c.path) for c in commands] == [
        ("ceres-node000", "ceres", "H100", ["ceres", "ceres-node000"]),
        ("ceres-node001", "ceres", "H100", ["ceres", "ceres-node001"]),
        ("jupiter-node000", "jupiter", "A100", ["jupiter", "jupiter-node000"]),
    ]
    check_locally(LedgerState(), commands)  # the ledger's own guards accept them
    assert weights == {"H100": 1.0, "A100": 0.55}
    one, no_weights = cluster_file({"cluster": {"nodes": 1, "gpus_per_node": 8}}, "local")
    assert no_weights == {}
    assert [(c.node_id, c.cluster) for c in one] == [("node000", "")]  # the default cluster, as before


@pytest.mark.parametrize(("own", "executors"), [
    ({}, ["sim", "sim", "sim"]),  # none named: the --executor option's, as before
    ({"ceres": "ceres"}, ["ceres", "ceres", "sim"]),
    ({"ceres": "ceres", "jupiter": "local"}, ["ceres", "ceres", "local"]),
])
def test_each_cluster_may_name_its_own_executor(own: dict[str, str], executors: list[str]) -> None:
    """ADR 0068: a cluster with its own executor, registered by one `cluster apply` of several clusters."""
    data = {"clusters": {name: spec | ({"executor": own[name]} if name in own else {})
                         for name, spec in TWO["clusters"].items()}}
    commands, _ = cluster_file(data, "sim")
    assert [c.executor for c in commands] == executors
    check_locally(LedgerState(), commands)
    one, _ = cluster_file({"cluster": {"nodes": 1, "gpus_per_node": 8, "executor": "slurm-a"}}, "local")
    assert [c.executor for c in one] == ["slurm-a"]


@pytest.mark.parametrize(("data", "message"), [
    ({**TWO, "cluster": {"nodes": 1, "gpus_per_node": 8}}, "not both"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 8, "executor": ""}}}, "clusters.c.executor: expected the id"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 8, "executor": 7}}}, "clusters.c.executor: expected the id"),
    ({"clusters": {}}, "clusters: name at least one cluster"),
    ({"clusters": {"c": {"nodes": [{"name": "x"}]}}}, r"clusters.c.nodes\[0\].gpus: expected a number"),
    ({"clusters": {"c": {"nodes": 1}}}, "clusters.c.gpus_per_node: expected a number"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 80_000}}},
     "clusters.c.gpus_per_node: a node has at most 1,024 GPUs, got 80,000"),
    ({"clusters": {"c": {"nodes": [{"name": "x", "gpus": 2**31 - 1}]}}},
     r"clusters.c.nodes\[0\].gpus: a node has at most 1,024 GPUs, got 2,147,483,647"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 8, "racks": 2}}}, "clusters.c: unknown field 'racks'"),
    ({**TWO, "gpu_models": {"H100": "one"}}, "gpu_models.H100: expected a number"),
    ({**TWO, "gpu_models": {"V100": 0.25}}, "gpu_models: no node has the model 'V100'"),
    ({"gpu_models": {"H100": 1}}, "no 'cluster:' section"),
])
def test_a_bad_file_is_refused_by_name(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioFileError, match=message):
        cluster_file(data, "local")


@pytest.mark.parametrize(("gpus", "error"), [(1_024, None), (1_025, "'c-node000' has 1,025 GPUs"),
                                           (80_000, "'c-node000' has 80,000 GPUs")])
def test_cluster_apply_checks_the_ledger_s_bound_before_anything_is_sent(gpus: int, error: str | None) -> None:
    """ADR 0082: the ledger's bound (1,024 GPUs a node) is checked on the file first, by its parser (as the
    simulator reads it) and by `check_locally` (the ledger's decision), so a typo registers none of the file's
    nodes."""
    if error is None:
        commands, _ = cluster_file({"clusters": {"c": {"nodes": 2, "gpus_per_node": gpus}}}, "local")
        check_locally(LedgerState(), commands)
        return
    with pytest.raises(ScenarioFileError, match=f"a node has at most 1,024 GPUs, got {gpus:,}"):
        cluster_file({"clusters": {"c": {"nodes": 2, "gpus_per_node": gpus}}}, "local")
    too_many = [RegisterNode("c-node000", gpus, "H100", ["c", "c-node000"], cluster="c")]
    with pytest.raises(ScenarioFileError, match=f"{error}: a node has at most 1,024 GPUs"):
        check_locally(LedgerState(), too_many)


@pytest.mark.parametrize(("tree", "pins", "error"), [
    ({"lab": {"share": 0.5, "pin": "ceres", "children": {"p": 1.0}}, "other": 0.5}, {"lab": "ceres"}, None),
    ({"lab": {"share": 0.5}}, {}, None),
    ({"lab": {"share": 0.5, "pin": "bad name"}}, {}, "tree.lab: pin: the cluster name 'bad name' must be"),
], ids=["pinned", "no pin", "bad name"])
def test_tree_apply_reads_a_pin_from_the_scenario_file(tree: dict[str, Any], pins: dict[str, str],
                                                       error: str | None) -> None:
    if error is not None:
        with pytest.raises(ScenarioFileError, match=re.escape(error)):
            tree_commands({"tree": tree}, "r")
        return
    top = tree_commands({"tree": tree}, "r")[0]
    assert top.pins == pins


def test_the_live_stack_and_the_simulator_read_a_scenario_file_alike(tmp_path: Path) -> None:
    """One parser of the file (`sim.scenario`): `steward tree apply` and `cluster apply` record the allocations,
    shares, pins, display names and nodes (names, paths, models) the simulator and the what-if run on."""
    two = {**SIM_TWO, "tree": {"lab": {"share": 0.6, "name": "The lab", "pin": "ceres", "children": {"p": 1.0}},
                               "q": 0.4}}
    for path in (PHILLY, write(tmp_path, two, "j,0,60,1,p,batch,60,1,,\n")):
        sc, data = load_scenario(path), load_yaml(path)
        nodes, _ = cluster_file(data, "x")
        assert [(c.node_id, c.gpus, c.gpu_model, tuple(c.path), c.cluster or "default") for c in nodes] == [
            (n.name, n.gpus, n.gpu_model, n.path, n.cluster) for n in sc.nodes]
        commands = tree_commands(data, "r")
        assert {name: (cmd.parent, share, cmd.pins.get(name, ""), cmd.display_names.get(name))
                for cmd in commands for name, share in cmd.shares.items()} == {
            a.name: (a.parent or ROOT, a.share, a.pin, a.display_name) for a in sc.allocations.values()}
        check_locally(LedgerState(), [*nodes])


def test_prune_retires_only_the_file_s_clusters_and_executors_nodes_it_no_longer_lists() -> None:
    """ADR 0078: nodes named before the one parser (`node-19`) beside today's (`node019`) are the file's to
    retire; a node of another executor in the same cluster, or of another cluster, is not."""
    commands, _ = cluster_file({"cluster": {"nodes": 2, "gpus_per_node": 8}}, "sim")
    registered = [{"id": c.node_id, "cluster": "default", "executor": "sim"} for c in commands] + [
        {"id": "node-19", "cluster": "default", "executor": "sim"},
        {"id": "node-01", "cluster": "default", "executor": "sim"},
        {"id": "gpu-host", "cluster": "default", "executor": "local"},
        {"id": "ceres-node000", "cluster": "ceres", "executor": "sim"},
    ]
    assert [n["id"] for n in prune_plan(commands, registered)] == ["node-01", "node-19"]


@pytest.mark.parametrize("gpus", ["1025", "80000", str(2**40)])
def test_node_register_names_the_bound_before_sending(gpus: str) -> None:
    """`steward node register --gpus N` beyond the bound: the ledger's reason, exit 2, nothing sent (even a count
    beyond GraphQL's 32-bit Int, which the API would refuse with a message about Int)."""
    from typer.testing import CliRunner

    from steward.cli.main import app
    from steward.cli.output import CliError

    result = CliRunner().invoke(app, ["node", "register", "typo", "--gpus", gpus, "--path", "z/typo"])
    err = result.exception
    assert isinstance(err, CliError) and err.code == 2, result.output
    assert f"node 'typo' has {int(gpus):,} GPUs: a node has at most 1,024 GPUs" in err.message
