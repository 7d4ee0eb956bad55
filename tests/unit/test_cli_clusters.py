"""The CLI's side of clusters and GPU models (issue 25, ADR 0057): `submit --gpu-model/--cluster` (repeatable
or a comma list), `gpu-models set MODEL=WEIGHT ...`, and `cluster apply` of a file with several clusters and
weights; a malformed argument or file is refused by name before anything is sent."""

from __future__ import annotations

import re
from typing import Any

import pytest

from steward.cli.jobs import names_of
from steward.cli.operate import parse_weights
from steward.cli.scenario_file import ScenarioFileError, check_locally, cluster_commands, tree_commands, weight_settings
from steward.domain.state import LedgerState


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
    commands = cluster_commands(TWO, "sim")
    assert [(c.node_id, c.cluster, c.gpu_model, c.path) for c in commands] == [
        ("ceres-node-0", "ceres", "H100", ["ceres", "block-0", "ceres-node-0"]),
        ("ceres-node-1", "ceres", "H100", ["ceres", "block-0", "ceres-node-1"]),
        ("jupiter-node-0", "jupiter", "A100", ["jupiter", "block-0", "jupiter-node-0"]),
    ]
    check_locally(LedgerState(), commands)  # the ledger's own guards accept them
    assert weight_settings(TWO) == {"H100": 1.0, "A100": 0.55}
    one = cluster_commands({"cluster": {"nodes": 1, "gpus_per_node": 8}}, "local")
    assert [(c.node_id, c.cluster) for c in one] == [("node-0", "")]  # the default cluster, as before


@pytest.mark.parametrize(("own", "executors"), [
    ({}, ["sim", "sim", "sim"]),  # none named: the --executor option's, as before
    ({"ceres": "ceres"}, ["ceres", "ceres", "sim"]),
    ({"ceres": "ceres", "jupiter": "local"}, ["ceres", "ceres", "local"]),
])
def test_each_cluster_may_name_its_own_executor(own: dict[str, str], executors: list[str]) -> None:
    """ADR 0068: a cluster with its own executor, registered by one `cluster apply` of several clusters."""
    data = {"clusters": {name: spec | ({"executor": own[name]} if name in own else {})
                         for name, spec in TWO["clusters"].items()}}
    commands = cluster_commands(data, "sim")
    assert [c.executor for c in commands] == executors
    check_locally(LedgerState(), commands)
    one = cluster_commands({"cluster": {"nodes": 1, "gpus_per_node": 8, "executor": "slurm-a"}}, "local")
    assert [c.executor for c in one] == ["slurm-a"]


@pytest.mark.parametrize(("data", "message"), [
    ({**TWO, "cluster": {"nodes": 1, "gpus_per_node": 8}}, "not both"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 8, "executor": ""}}}, "clusters.c.executor: expected the id"),
    ({"clusters": {"c": {"nodes": 1, "gpus_per_node": 8, "executor": 7}}}, "clusters.c.executor: expected the id"),
    ({"clusters": {}}, "expected a mapping of cluster name"),
    ({"clusters": {"c": {"nodes": [{"name": "x"}]}}}, "a count of nodes, not a list"),
    ({"clusters": {"c": {"nodes": 1}}}, "clusters.c: missing 'gpus_per_node'"),
    ({"gpu_models": {"H100": "one"}}, "gpu_models.H100: the weight must be a number"),
])
def test_a_bad_file_is_refused_by_name(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioFileError, match=message):
        if "clusters" in data:
            cluster_commands(data, "local")
        else:
            weight_settings(data)


@pytest.mark.parametrize(("tree", "pins", "error"), [
    ({"lab": {"share": 0.5, "pin": "ceres", "children": {"p": 1.0}}, "other": 0.5}, {"lab": "ceres"}, None),
    ({"lab": {"share": 0.5}}, {}, None),
    ({"lab": {"share": 0.5, "pin": "bad name"}}, {}, "tree node 'lab': pin (a cluster name) 'bad name' must be"),
], ids=["pinned", "no pin", "bad name"])
def test_tree_apply_reads_a_pin_from_the_scenario_file(tree: dict[str, Any], pins: dict[str, str],
                                                       error: str | None) -> None:
    if error is not None:
        with pytest.raises(ScenarioFileError, match=re.escape(error)):
            tree_commands({"tree": tree}, "r")
        return
    top = tree_commands({"tree": tree}, "r")[0]
    assert top.pins == pins
