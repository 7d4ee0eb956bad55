"""Clusters and GPU models in the ledger (issue 25, ADR 0057; steward.domain.clusters): nodes in named
clusters, GPU model weights as a checked change of the policy setting, and jobs naming the models and
clusters they accept, each refusal naming what is wrong; old events replay as "any" in the default cluster."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.clusters import (
    DEFAULT_CLUSTER,
    admits,
    catalogue,
    largest_gang,
    largest_in,
    registered_catalogue,
    require_known_request,
)
from steward.domain.commands import RegisterNode, SetAllocations, SetGpuModelWeights, SetPolicy, SubmitJob
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import DomainError
from steward.domain.events import Event
from steward.domain.state import LedgerState, evolve


def fold(commands: list[Any], state: LedgerState | None = None) -> LedgerState:
    state = state or LedgerState()
    for cmd in commands:
        for ev in decide(state, cmd, 10.0):
            state = evolve(state, ev, 10.0)
    return state


BASE = fold([
    SetAllocations("cluster", {"p": 1.0}, "setup"),
    RegisterNode("h1", 8, "H100", ["h1"], cluster="ceres"),
    RegisterNode("h2", 8, "H100", ["h2"], cluster="ceres"),
    RegisterNode("a1", 8, "A100", ["a1"], cluster="jupiter"),
    RegisterNode("v1", 4, "V100", ["v1"], cluster="jupiter"),
])


def job(gpus: int = 1, models: list[str] | None = None, clusters: list[str] | None = None) -> SubmitJob:
    return SubmitJob("j", "p", gpus, 60.0, ["true"], gpu_models=models or [], clusters=clusters or [])


@pytest.mark.parametrize(("cmd", "refusal"), [
    (job(1, ["H100", "A100"]), None),
    (job(1, None, ["jupiter"]), None),
    (job(12, ["A100", "V100"]), None),  # one cluster, its two models: 12 GPUs
    (job(16), None),  # all of ceres
    (job(1, ["B200"]), "unknown GPU model 'B200': the registered GPU models are A100, H100, V100"),
    (job(1, ["B200", "X"]), "unknown GPU models 'B200', 'X'"),
    (job(1, None, ["mars"]), "unknown cluster 'mars': the registered clusters are ceres, jupiter"),
    (job(1, ["H100", "H100"]), "gpu_models names one twice"),
    (job(1, [""]), "gpu_models must name each gpu model"),
    (job(17), "largest placement this cluster could ever give is 16 GPUs (cluster 'ceres', all 2 registered"),
    (job(9, ["A100"]), "is 8 GPUs (cluster 'jupiter', all 1 registered node it accepts)"),
    (job(8, ["H100"], ["jupiter"]), "is 0 GPUs"),  # no node is both
], ids=["models", "cluster", "gang on two models", "whole cluster", "unknown model", "unknown models",
        "unknown cluster", "twice", "empty name", "gang across clusters", "gang too big for the model",
        "nothing admissible"])
def test_a_job_request_is_checked(cmd: SubmitJob, refusal: str | None) -> None:
    if refusal is None:
        (ev,) = decide(BASE, cmd, 10.0)
        assert ev.payload.get("gpu_models", []) == cmd.gpu_models and ev.payload.get("clusters", []) == cmd.clusters
        return
    with pytest.raises(DomainError) as err:
        decide(BASE, cmd, 10.0)
    assert refusal in err.value.message


class _EmptyButTaken(list[str]):
    """An empty list that is true: a request naming nothing that still goes through the whole check."""

    def __bool__(self) -> bool:
        return True


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.sampled_from(["H100", "A100"]), st.sampled_from(["", "ceres"])),
                max_size=4))
def test_a_request_naming_nothing_returns_early_as_the_whole_check_would(nodes: list[tuple[int, str, str]]) -> None:
    """`require_known_request` returns at once for a job naming no model and no cluster (most submissions); the
    whole check, run on the same empty request, refuses nothing either, whatever nodes are registered."""
    cat = catalogue(nodes)
    plain = SubmitJob("j", "p", 1, 60.0, ["true"], gpu_models=_EmptyButTaken(), clusters=_EmptyButTaken())
    require_known_request(plain, cat.models, cat.clusters)  # the whole check: raises nothing
    require_known_request(job(), cat.models, cat.clusters)  # the early return: the same


def test_the_request_is_recorded_only_when_made_and_replays_as_any() -> None:
    (plain,) = decide(BASE, job(), 10.0)
    assert "gpu_models" not in plain.payload and "clusters" not in plain.payload  # the shape before clusters
    assert evolve(BASE, plain, 10.0).jobs["j"].gpu_models == ()
    (asked,) = decide(BASE, job(2, ["H100"], ["ceres"]), 10.0)
    j = evolve(BASE, asked, 10.0).jobs["j"]
    assert (j.gpu_models, j.clusters) == (("H100",), ("ceres",))


def test_nodes_join_a_named_cluster_or_the_default_one() -> None:
    (named,) = decide(LedgerState(), RegisterNode("x", 8, "H100", ["x"], cluster="ceres"), 0.0)
    (plain,) = decide(LedgerState(), RegisterNode("y", 8, "H100", ["y"]), 0.0)
    assert named.payload["cluster"] == "ceres" and "cluster" not in plain.payload
    old = Event("node-z", "NodeRegistered", {"node_id": "z", "gpus": 8, "gpu_model": "H100", "path": ["z"],
                                             "executor": "local"})  # recorded before clusters
    assert evolve(LedgerState(), old, 0.0).nodes["z"].cluster == DEFAULT_CLUSTER


@pytest.mark.parametrize(("weights", "reason", "refusal"), [
    ({"A100": 0.55}, "older", None),
    ({"A100": 0.55, "V100": 0.25}, "older", None),
    ({"A100": 0.55}, " ", "needs a reason"),
    ({}, "x", "name at least one GPU model"),
    ({"B200": 2.0}, "x", "unknown GPU model 'B200': the registered GPU models are A100, H100, V100"),
    ({"A100": 0.0}, "x", "must be > 0"),
    ({"A100": -1.0}, "x", "must be > 0"),
    ({"A100": float("inf")}, "x", "must be a finite number"),
    ({"A100": float("nan")}, "x", "must be a finite number"),
], ids=["one", "two", "no reason", "none", "unknown", "zero", "negative", "infinite", "nan"])
def test_weights_are_checked_and_recorded_as_a_policy_change(weights: dict[str, float], reason: str,
                                                              refusal: str | None) -> None:
    cmd = SetGpuModelWeights(weights, reason)
    if refusal is not None:
        (ev,) = decide_or_reject(BASE, cmd, 10.0)
        assert ev.type == "CommandRejected" and refusal in ev.payload["reason"], ev.payload
        return
    (ev,) = decide(BASE, cmd, 10.0)
    assert (ev.stream, ev.type) == ("policy", "PolicySet")
    assert ev.payload == {"changed": {"gpu_model_weights": weights}, "settings": {"gpu_model_weights": weights},
                          "reason": reason}
    assert evolve(BASE, ev, 10.0).policy["gpu_model_weights"] == weights


def test_weights_named_later_keep_the_others_and_other_settings_stay() -> None:
    state = fold([SetPolicy({"window_s": 3600.0}, "short"), SetGpuModelWeights({"A100": 0.5}, "a"),
                  SetGpuModelWeights({"V100": 0.25}, "v")], BASE)
    assert state.policy == {"window_s": 3600.0, "gpu_model_weights": {"A100": 0.5, "V100": 0.25}}


def test_weights_wait_for_a_registered_node() -> None:
    (ev,) = decide_or_reject(LedgerState(), SetGpuModelWeights({"H100": 1.0}, "early"), 0.0)
    assert ev.type == "CommandRejected" and "no node is registered yet" in ev.payload["reason"]


@pytest.mark.parametrize(("models", "clusters", "model", "cluster", "ok"), [
    ((), (), "X", "", True),
    (("H100",), (), "H100", "c", True),
    (("H100",), (), "A100", "c", False),
    ((), ("default",), "A100", "", True),  # "" is the default cluster
    ((), ("ceres",), "A100", "jupiter", False),
    (("A100",), ("jupiter",), "A100", "jupiter", True),
])
def test_admits(models: tuple[str, ...], clusters: tuple[str, ...], model: str, cluster: str, ok: bool) -> None:
    assert admits(models, clusters, model, cluster) is ok


def test_the_largest_gang_is_one_clusters() -> None:
    nodes = [(8, "H100", "ceres"), (8, "H100", "ceres"), (8, "A100", "jupiter"), (4, "V100", "jupiter")]
    assert largest_gang(nodes) == (16, 2, "ceres")
    assert largest_gang(nodes, ["A100", "V100"]) == (12, 2, "jupiter")
    assert largest_gang(nodes, ["B200"]) == (0, 0, "")
    assert largest_gang([(8, "H100", ""), (8, "H100", "")]) == (16, 2, "default")


def _largest_node_by_node(nodes: list[tuple[int, str, str]], models: list[str],
                          clusters: list[str]) -> tuple[int, int, str]:
    """The rule as first written (per node, before the catalogue): the reference the catalogue must equal."""
    per: dict[str, tuple[int, int]] = {}
    for gpus, model, cluster in nodes:
        if admits(models, clusters, model, cluster):
            name = cluster or DEFAULT_CLUSTER
            total, count = per.get(name, (0, 0))
            per[name] = (total + gpus, count + 1)
    if not per:
        return 0, 0, ""
    name = min(per, key=lambda c: (-per[c][0], c))
    return per[name][0], per[name][1], name


_MODELS = st.sampled_from(["H100", "A100", "V100"])
_CLUSTERS = st.sampled_from(["", "ceres", "jupiter", DEFAULT_CLUSTER])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 16), _MODELS, _CLUSTERS), max_size=30),
       st.lists(_MODELS, max_size=2, unique=True), st.lists(_CLUSTERS.filter(bool), max_size=2, unique=True))
def test_the_catalogue_gives_the_largest_gang_of_the_nodes(nodes: list[tuple[int, str, str]], models: list[str],
                                                         clusters: list[str]) -> None:
    assert largest_in(catalogue(nodes), models, clusters) == _largest_node_by_node(nodes, models, clusters)
    assert catalogue(nodes).models == tuple(sorted({m for _, m, _ in nodes}))


def test_a_submission_reads_the_nodes_registered_just_before_it() -> None:
    """The catalogue is read once per node table (the ledger asks it for every submission): a node registered,
    or a heartbeat, makes a new table, so a submission right after sees it (a stale catalogue would refuse
    the 24-GPU gang, or accept the unknown model)."""
    assert registered_catalogue(BASE.nodes) is registered_catalogue(BASE.nodes)
    with pytest.raises(DomainError, match="largest placement"):
        decide(BASE, job(24, clusters=["ceres"]), 10.0)
    with pytest.raises(DomainError, match="unknown GPU model 'B200'"):
        decide(BASE, job(1, models=["B200"]), 10.0)
    grown = fold([RegisterNode("h3", 8, "H100", ["h3"], cluster="ceres"),
                  RegisterNode("b1", 8, "B200", ["b1"], cluster="ceres")], BASE)
    assert [e.type for e in decide(grown, job(24, clusters=["ceres"]), 10.0)] == ["JobSubmitted"]
    assert [e.type for e in decide(grown, job(1, models=["B200"]), 10.0)] == ["JobSubmitted"]
    with pytest.raises(DomainError, match="largest placement"):  # the older table still reads its own nodes
        decide(BASE, job(24, clusters=["ceres"]), 10.0)
