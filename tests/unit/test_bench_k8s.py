"""`steward bench k8s` says why it waits for its nodes, and gives up with that reason instead of waiting out its
timeout in silence (a run folder kept a previous run's drain: 203 nodes draining, the bench waited 25 min)."""

from __future__ import annotations

import pytest

from steward.bench.k8s import not_ready, round_progress, wait_ready

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


def test_once_its_nodes_are_ready_the_bench_says_so_instead_of_leaving_its_waiting_line_last() -> None:
    """Session 17: the last line read "waiting: 22 of the bench's 50 nodes ready" through a half-hour round."""
    reads = iter([{}, {"bench-k8s-0": "ready"}, dict.fromkeys(NAMES, "ready")])
    lines: list[str] = []
    wait_ready(NAMES, lambda: next(reads), 60.0, lines.append, every_s=0.0, poll_s=0.0)
    assert lines == ["waiting: 0 of the bench's 3 nodes ready in Steward; 3 not registered yet",
                     "waiting: 1 of the bench's 3 nodes ready in Steward; 2 not registered yet",
                     "all 3 of the bench's nodes ready in Steward"]
    quiet: list[str] = []
    wait_ready(NAMES, lambda: dict.fromkeys(NAMES, "ready"), 60.0, quiet.append)
    assert quiet == []  # ready at once: nothing to take back


@pytest.mark.parametrize(("bound", "elapsed", "says"), [
    (0, 0.2, "steward: 0 of 2000 pods bound after 0 s"),
    (812, 95.6, "steward: 812 of 2000 pods bound after 96 s"),
])
def test_a_round_says_how_many_of_its_pods_are_bound(bound: int, elapsed: float, says: str) -> None:
    assert round_progress("steward", bound, 2000, elapsed) == says
