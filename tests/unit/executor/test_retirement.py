"""ADR 0078: an executor retires the nodes it registered that its inventory no longer lists, once missing for a
while with none of its attempts on them, once; the nodes it registered and the retirements it sent are kept in
its folder, so a restart retires a node removed while it was stopped and registers a returning node anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.domain.commands import RegisterNode
from steward.executor.retirement import Retirements

NODE = RegisterNode("n1", 8, "H100", ["spine", "n1"], "hpc")


def test_a_missing_node_is_retired_after_the_wait_and_only_once(tmp_path: Path) -> None:
    r = Retirements(tmp_path / "retired.json", after_s=30.0)
    r.registered(["n1", "n2"])
    assert r.due(["n1", "n2"], set(), 0.0, "Slurm") == []
    assert r.due(["n2"], set(), 10.0, "Slurm") == []          # missing since 10
    assert r.due(["n2"], set(), 39.0, "Slurm") == []          # not long enough
    ((command, mid),) = r.due(["n2"], set(), 40.0, "Slurm")
    assert (command.node_id, command.reason) == ("n1", "gone from the Slurm inventory for 30 s")
    assert mid.startswith("retire-n1-")
    assert r.due(["n2"], set(), 100.0, "Slurm") == []         # sent once


@pytest.mark.parametrize(("listed", "busy", "retired"), [
    (["n1"], set(), []),             # listed again before the wait ended
    ([], {"n1"}, []),                # an attempt of the executor's still runs there
    ([], set(), ["n1"]),
])
def test_a_node_listed_again_or_busy_is_not_retired(listed: list[str], busy: set[str], retired: list[str]) -> None:
    r = Retirements(Path("/nonexistent/retired.json"), after_s=0.0)
    r.known = {"n1"}
    r.missing["n1"] = 0.0
    assert [c.node_id for c, _ in r.due(listed, busy, 5.0, "Kubernetes")] == retired


def test_a_restart_remembers_what_was_registered_and_retired(tmp_path: Path) -> None:
    path = tmp_path / "retired.json"
    first = Retirements(path, after_s=0.0)
    assert first.register_id(NODE) == "register-n1-8-spine/n1"  # unchanged for a node never retired
    first.registered(["n1", "n2"])
    again = Retirements(path, after_s=0.0)
    assert again.known == {"n1", "n2"}
    assert [c.node_id for c, _ in again.due(["n2"], set(), 0.0, "Slurm")] == ["n1"]
    third = Retirements(path)
    assert third.known == {"n2"}
    assert third.register_id(NODE) == "register-n1-8-spine/n1-r1"  # a node back after its retirement


def test_an_unreadable_file_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "retired.json"
    path.write_text("[not, an, object")
    assert Retirements(path).known == set()
