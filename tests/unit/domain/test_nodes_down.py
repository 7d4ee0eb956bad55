"""Issue 23: a node the cluster manager under an executor (Slurm) holds out of service reaches the ledger in
that executor's heartbeat (`down`), takes no new work while it is named, and is ready again once a heartbeat
no longer names it."""

from __future__ import annotations

import pytest

from steward.domain.commands import PlaceJob, ReportHeartbeat
from steward.domain.decide import decide
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.state import LedgerState
from tests.unit.domain.builders import apply, submit, tree, with_nodes


def cluster() -> LedgerState:
    return with_nodes(tree(cluster={"a": 1.0}, a={"a1": 1.0}), count=2)


def test_a_node_reported_down_takes_no_work_until_a_heartbeat_no_longer_names_it() -> None:
    state = cluster()
    (beat,) = decide(state, ReportHeartbeat("local", {}, [], ["n1"]), 10.0)
    assert beat.payload["down"] == ["n1"] and beat.payload["recovered"] == []
    state = apply(state, ReportHeartbeat("local", {}, [], ["n1"]), submit("j1"), now=10.0)
    assert {n.node_id: n.state for n in state.nodes.values()} == {"n0": "ready", "n1": "unhealthy"}
    with pytest.raises(InvalidTransition, match="takes no new work"):
        decide(state, PlaceJob("j1", {"n1": [0]}, funded=True), 11.0)
    (still,) = decide(state, ReportHeartbeat("local", {}, [], ["n1"]), 20.0)
    assert still.payload["recovered"] == []  # named again: stays out of service
    state = apply(state, ReportHeartbeat("local", {}), now=30.0)
    assert state.nodes["n1"].state == "ready"


def test_a_heartbeat_without_down_nodes_keeps_its_recorded_form() -> None:
    (beat,) = decide(cluster(), ReportHeartbeat("local", {}), 10.0)
    assert "down" not in beat.payload


@pytest.mark.parametrize("node", ["n9", ""])
def test_an_executor_reports_only_its_own_nodes_down(node: str) -> None:
    with pytest.raises(InvalidCommand, match="not its own"):
        decide(cluster(), ReportHeartbeat("other", {}, [], [node]), 10.0)
