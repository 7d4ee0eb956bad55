"""`steward bench k8s` says why it waits for its nodes, and gives up with that reason instead of waiting out its
timeout in silence (a run folder kept a previous run's drain: 203 nodes draining, the bench waited 25 min)."""

from __future__ import annotations

import pytest

from steward.bench.k8s import not_ready

NAMES = ["bench-k8s-0", "bench-k8s-1", "bench-k8s-2"]


@pytest.mark.parametrize(("states", "says"), [
    ({n: "ready" for n in NAMES} | {"local-0": "draining"}, None),  # other nodes do not matter
    ({}, "0 of the bench's 3 nodes ready in Steward; 3 not registered yet"),
    ({"bench-k8s-0": "ready"}, "1 of the bench's 3 nodes ready in Steward; 2 not registered yet"),
    ({n: "draining" for n in NAMES}, "0 of the bench's 3 nodes ready in Steward; 3 draining (a drain left by an "
                                     "earlier run in this run folder: `steward node resume NODE --reason ...`, or "
                                     "a fresh STEWARD_RUN_DIR)"),
    ({"bench-k8s-0": "unhealthy", "bench-k8s-1": "ready"},
     "1 of the bench's 3 nodes ready in Steward; 1 not registered yet, 1 unhealthy"),
])
def test_the_bench_says_which_of_its_nodes_are_not_ready(states: dict[str, str], says: str | None) -> None:
    assert not_ready(NAMES, states) == says
