"""`Engine._with_backfill`: when a cycle holds reservations, the trimmed queue is widened with the
short work behind the chain heads that could backfill reserved nodes, up to the *latest* due time of
all the cycle's reservations (one per under-served allocation, ADR 0007 point 7), not the first's;
and each earlier reservation's own short work too, which may lie behind the latest one's candidates.

The policy here is a scripted one (a real `Scheduler`: a function from a snapshot to a result) that
holds the reservations of each case and records the queues it was handed, so the test sees exactly
which jobs the engine added. Every waiting job is a twin of the others (one project, one GPU, batch,
asks for protection): only their protection differs, which the twin chains do not key on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from steward.policy.model import CycleResult, Reservation, Snapshot
from steward.sim.engine import Engine
from steward.sim.policies import settings_for, tree_for
from steward.sim.scenario import load_scenario
from tests.unit.sim.builders import job, write_scenario

LONG = 28800.0  # protection of the 45 jobs at the head of the chain (the cap: 8 h)
SHORT = (600.0, 2000.0, 4000.0)  # protection of the jobs behind them, ids "p600", "p2000", "p4000"


@dataclass
class Case:
    name: str
    due_in: tuple[float, ...]
    """Seconds from now until each reservation of the cycle is due (in the cycle's order)."""
    added: set[str]
    """Jobs the engine must hand the cycle again, beyond the trimmed queue."""


CASES = [
    Case("no reservation: no second cycle", (), set()),
    Case("one reservation admits work protected no longer than its due time", (1000.0,), {"p600"}),
    Case("the latest of several reservations counts, not the first", (500.0, 3000.0, 1500.0), {"p600", "p2000"}),
    Case("order of the reservations does not matter", (3000.0, 500.0), {"p600", "p2000"}),
    Case("three reservations, all later than every protection", (5000.0, 4500.0, 4000.0),
         {"p600", "p2000", "p4000"}),
    Case("every reservation due before any short protection ends: nothing to add", (100.0, 300.0), set()),
]


class ScriptedPolicy:
    """Holds the case's reservations at every cycle and records the waiting jobs it was shown."""

    def __init__(self, due_in: tuple[float, ...]) -> None:
        self.due_in = due_in
        self.shown: list[list[str]] = []

    def __call__(self, snapshot: Snapshot) -> CycleResult:
        self.shown.append([j.id for j in snapshot.pending])
        now = snapshot.now
        reservations = [{"job_id": f"gang{r}", "nodes": [], "ready_at": now + d} for r, d in enumerate(self.due_in)]
        first = (
            Reservation("gang0", (), (), now + self.due_in[0], {}) if self.due_in else None
        )
        return CycleResult(
            now=now, placements=(), preemptions=(), stops=(), explanations={}, reservation=first,
            fragmentation=0.0, order=(), evidence={"reservations": reservations, "preemption_searches": 0,
                                                   "lane_searches": 0},
        )


def engine_with_queue(tmp_path: Path, policy: ScriptedPolicy, narrow: bool) -> Engine:
    rows = [job(f"long{i:02d}", submit=0, duration=LONG, min_runtime=LONG) for i in range(45)]
    rows += [job(f"p{p:.0f}", submit=1, duration=p, min_runtime=p) for p in SHORT]
    rows.append(job("tail", submit=2, duration=LONG, min_runtime=LONG))  # the chain's last job
    scenario = load_scenario(write_scenario(tmp_path, rows, tree={"a": 1.0}, nodes=1, gpus_per_node=4))
    engine = Engine(scenario, settings_for("steward", scenario), tree_for(scenario), policy)
    engine.narrow = narrow
    for j in engine.jobs:
        engine._arrive(j)
    return engine


@pytest.mark.parametrize("narrow", [True, False], ids=["narrow view", "full heads"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_short_work_behind_the_heads_is_added_up_to_the_latest_due_time(
    tmp_path: Path, case: Case, narrow: bool
) -> None:
    policy = ScriptedPolicy(case.due_in)
    engine = engine_with_queue(tmp_path, policy, narrow)
    engine._cycle()
    first = policy.shown[0]
    assert "tail" in first and not {"p600", "p2000", "p4000"} & set(first)  # trimmed: heads and last job
    if not case.added:
        assert len(policy.shown) == 1
        assert engine.stats.reruns == 0
        return
    assert len(policy.shown) == 2
    assert set(policy.shown[1]) - set(first) == case.added
    assert engine.stats.reruns == 1


@pytest.mark.parametrize("narrow", [True, False], ids=["narrow view", "full heads"])
def test_an_earlier_reservation_admits_short_work_beyond_the_latest_ones_candidates(
    tmp_path: Path, narrow: bool
) -> None:
    """Reservations due in 1,000 s and 3,000 s: the first jobs behind the heads short enough for the
    later one (8 jobs protected for 2,000 s) fill its candidates (free // gpus + 1 + slack = 7), and
    the one job that may backfill the earlier reservation's nodes (600 s) lies behind them. It is
    added too: on the whole philly trace the engine missed such a job (a funded 4-GPU job protected
    for 150 s, 27th of its chain, backfilling a reservation due in 299 s while another was due in
    1,981 s), and the trimmed queue decided differently from the full one from then on."""
    rows = [job(f"long{i:02d}", submit=0, duration=LONG, min_runtime=LONG) for i in range(45)]
    rows += [job(f"mid{i}", submit=1, duration=2000.0, min_runtime=2000.0) for i in range(8)]
    rows.append(job("p600", submit=2, duration=600.0, min_runtime=600.0))
    rows.append(job("tail", submit=3, duration=LONG, min_runtime=LONG))
    scenario = load_scenario(write_scenario(tmp_path, rows, tree={"a": 1.0}, nodes=1, gpus_per_node=4))
    policy = ScriptedPolicy((3000.0, 1000.0))
    engine = Engine(scenario, settings_for("steward", scenario), tree_for(scenario), policy)
    engine.narrow = narrow
    for j in engine.jobs:
        engine._arrive(j)
    engine._cycle()
    first = set(policy.shown[0])
    assert "tail" in first and "p600" not in first
    added = set(policy.shown[1]) - first
    assert "p600" in added  # the earlier reservation's candidate
    assert {f"mid{i}" for i in range(7)} <= added | first and "mid7" not in added  # the later one's
