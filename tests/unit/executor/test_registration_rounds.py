"""ADR 0082 from the executors' side: the Kubernetes and Slurm executors register their nodes from each inventory
round (again when a node's registration changes: a device plugin's allocatable GPUs, a new topology label), under
a new message id, so the ledger decides it. A node the operator drained stays drained across those rounds, and a
node listing more GPUs than the bound is refused with the reason (recorded) and said in the executor's log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from steward.domain.commands import DrainNode, RegisterNode, SetAllocations
from steward.domain.decide import decide_or_reject
from steward.domain.state import LedgerState, evolve
from steward.executor.kubernetes_inventory import registrations as kube_registrations
from steward.executor.retirement import Retirements, warn_if_refused
from steward.executor.slurm_commands import SlurmNode
from steward.executor.slurm_inventory import registrations as slurm_registrations


def kube_node(gpus: int | str, spine: str = "s1") -> dict[str, Any]:
    return {"metadata": {"name": "gpu-1", "labels": {"network.topology.nvidia.com/spine": spine}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def slurm_node(gpus: int) -> SlurmNode:
    return SlurmNode("gpu-1", gpus, "H100", frozenset({"IDLE"}), "")


ROUNDS: list[tuple[str, Any]] = [
    ("kubernetes", lambda gpus, spine: kube_registrations([kube_node(gpus, spine)], "k8s-a")),
    ("slurm", lambda gpus, spine: slurm_registrations([slurm_node(gpus)], {"gpu-1": [spine, "gpu-1"]}, "hpc")),
]


def record(state: LedgerState, *commands: Any) -> tuple[LedgerState, list[str]]:
    types = []
    for cmd in commands:
        for ev in decide_or_reject(state, cmd, 1.0):
            types.append(ev.type)
            state = evolve(state, ev, 1.0)
    return state, types


@pytest.mark.parametrize(("executor", "round_of"), ROUNDS, ids=[r[0] for r in ROUNDS])
def test_a_drained_node_stays_drained_across_the_executor_s_changed_registrations(
        executor: str, round_of: Any, tmp_path: Any) -> None:
    ids = Retirements(tmp_path / "nodes.json")
    (first,) = round_of(8, "s1")
    state, _ = record(LedgerState(), SetAllocations("cluster", {"p": 1.0}, "tree"), first)
    state, _ = record(state, DrainNode("gpu-1", "bad DIMM"))
    for gpus, spine in [(8, "s1"), (4, "s1"), (4, "s2")]:  # the same, fewer GPUs, another spine
        (again,) = round_of(gpus, spine)
        assert (ids.register_id(again) != ids.register_id(first)) is (again != first)  # the ledger decides it
        state, types = record(state, again)
        assert types == ["NodeRegistered"]
        node = state.nodes["gpu-1"]
        assert (node.state, node.gpus, node.path[0].removeprefix("spine-")) == ("draining", gpus, spine)


@pytest.mark.parametrize(("executor", "round_of"), ROUNDS, ids=[r[0] for r in ROUNDS])
def test_an_inventory_node_beyond_the_bound_is_refused_with_the_reason_and_logged(
        executor: str, round_of: Any, caplog: pytest.LogCaptureFixture) -> None:
    (node,) = round_of(80_000, "s1")
    log = logging.getLogger(f"test.{executor}")
    with caplog.at_level(logging.WARNING, logger=log.name):
        warn_if_refused(node, log)
        warn_if_refused(RegisterNode("ok", 8, "H100", ["s", "ok"]), log)
    (line,) = caplog.messages
    assert "node 'gpu-1' has 80,000 GPUs: a node has at most 1,024 GPUs" in line and "takes no Steward work" in line
    (ev,) = decide_or_reject(LedgerState(), node, 1.0)
    assert ev.type == "CommandRejected" and "80,000 GPUs" in ev.payload["reason"]
