"""ADR 0028: the preemption loop of issue 18, reproduced on a hand-made scenario. An unfunded lane
job (its project has no allocation) kept being started ahead of the order on the one GPU a funded
job waited for, preempted by it at once, and started again when its grace ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.sim.run import run_scenario
from tests.unit.sim.builders import job, write_scenario


def loop_scenario(folder: Path) -> Path:
    rows = [job("u1", 0, 2000, 1, "u", "debug", 600, 0)]  # "u" is not in the tree: unfunded
    # funded batch work of "a", one job a minute: each arrival is a cycle
    rows += [job(f"a{k}", 10 + 60 * k, 3600, 1, "a", "batch", 3600, 1) for k in range(20)]
    return write_scenario(folder, rows, nodes=1, gpus_per_node=1, tree={"a": 1.0})


@pytest.mark.parametrize(("policy", "most"), [("steward", 2), ("ai2", 2)])
def test_no_preemption_loop_on_one_gpu(tmp_path: Path, policy: str, most: int) -> None:
    figures = run_scenario(loop_scenario(tmp_path), policy).figures
    assert figures["preemptions"] <= most
    assert figures["protection_violations"] == 0
