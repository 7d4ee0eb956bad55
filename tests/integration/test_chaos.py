"""`steward bench chaos`, shortened for CI (issue 22 "Chaos, proven"; ADR 0061): the soak's load on the
supervised stack while a random Steward process is SIGKILLed every 20 s and PostgreSQL, Kafka and Temporal
are each restarted once. Asserted: nothing accepted is lost, nothing is recorded twice, no job is stranded.
The gaps and latencies are reported (printed), never asserted: performance is the benchmarks' to measure."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from steward.bench import chaos
from steward.config import Settings
from steward.infra.processes import SUPERVISOR, Paths, read_pid, start_own, stop_own
from steward.infra.supervisor import supervised as supervised_names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


@pytest.fixture
def supervised(stack: dict[str, object]) -> Iterator[Paths]:
    """The session's stack with its supervisor, as `steward up` runs it (the session's stack has none)."""
    paths = Paths(Settings().run_dir)
    start_own(SUPERVISOR, paths, dict(os.environ) | {"STEWARD_METRICS_PORT": "off"})
    yield paths
    # the later tests share this stack: every process the bench killed runs again before the supervisor stops
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(read_pid(paths, n) is None for n in supervised_names(paths)):
        time.sleep(1)
    stop_own(SUPERVISOR, paths)
    assert all(read_pid(paths, n) is not None for n in supervised_names(paths)), "a killed process was not restarted"


def test_the_bench_refuses_a_stack_without_its_supervisor(stack: dict[str, object]) -> None:
    paths = Paths(Settings().run_dir)
    stop_own(SUPERVISOR, paths)
    with pytest.raises(chaos.ChaosError, match="steward up"):
        chaos.run(minutes=0.1)


def test_kills_and_restarts_lose_nothing_double_nothing_strand_nothing(supervised: Paths) -> None:
    result = chaos.run(minutes=1.5, clients=10, rate=1.0, agents=1, nodes=2, kill_every_s=20.0, probe_s=1.0,
                       services=True, drain_s=300.0, seed=22)
    print(json.dumps(result))  # the figures, for the log
    assert result["kills"] >= 3, result["killed"]
    restarted = sorted(r["service"] for r in result["service_restarts"] if r["ok"])  # in the order they ended
    assert restarted == sorted(chaos.SERVICES), result["service_restarts"]
    assert result["accepted"] > 0
    assert (result["lost"], result["doubled"], result["stranded"]) == (0, 0, 0), result
    assert result["ended"] + result["still_running"] == result["accepted"]
    assert read_pid(supervised, SUPERVISOR) is not None  # it kept the stack running throughout
