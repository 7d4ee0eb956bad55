"""`SchedulerState.catch_up` charges every funded attempt that ended, whatever the window's clock.

The scheduler's usage window advances its clock to each cycle's `now`; an attempt whose end was recorded
just before a cycle but read after it ends *before* that clock. It still ran (DESIGN.md "Usage window":
usage is GPU-seconds of funded occupancy), so it is charged; only the window's edge clips it. The API's
queue (`steward.api.queue`) folds through the same `SchedulerState`. The events are recorded by the real
embedded store (SQLite) at chosen times, as the ledger would record them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from steward.domain.commands import (
    CancelJob,
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
)
from steward.domain.decide import decide
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import TERMINAL_STATES, LedgerState, evolve
from steward.policy.usage import Interval, window_usage
from steward.scheduler.bridge import policy_node, running_job
from steward.scheduler.service import SchedulerState
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.migrate import upgrade
from steward.store.recorder import EventRecorder
from tests.unit.domain.builders import submit

T0 = 1_700_000_000.0
WINDOW_S = 3600.0
SETTINGS = PolicySettings.steward(window_s=WINDOW_S)


class Recorder:
    """Decides commands with the pure domain and appends their events to a real store at `at`."""

    def __init__(self, store: EventStore, state: LedgerState) -> None:
        self.store, self.state = store, state

    def __call__(self, at: float, *commands: Command) -> None:
        for cmd in commands:
            events = decide(self.state, cmd, at)
            for ev in events:
                self.state = evolve(self.state, ev, at)
            with self.store.engine.begin() as conn:
                EventRecorder(self.store).append(conn, [PendingAppend(events, {"actor": "test"})], now=at)


@pytest.fixture()
def record(tmp_path: Path) -> Recorder:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    rec = Recorder(store, LedgerState())
    rec(T0, SetAllocations("cluster", {"a": 0.5, "b": 0.5}, "test"), SetAllocations("a", {"a1": 1.0}, "test"),
        SetAllocations("b", {"b1": 1.0}, "test"), RegisterNode("n0", 4, "V100", ["blk0", "n0"]))
    return rec


@dataclass(frozen=True)
class Case:
    name: str
    started: float  # seconds after T0
    ended: float  # when the exit is recorded
    clock: float  # the cycle that ran before the exit was read (the window's clock)
    read_at: float  # the cycle after it


CASES = [
    Case("ended just before the window's clock", started=100.0, ended=399.999, clock=400.0, read_at=401.0),
    Case("ended well before the window's clock", started=100.0, ended=200.0, clock=900.0, read_at=901.0),
    Case("ended exactly at the window's clock", started=100.0, ended=400.0, clock=400.0, read_at=401.0),
    Case("ended after the window's clock", started=100.0, ended=500.0, clock=400.0, read_at=501.0),
    Case("started before the window's edge, ended before the clock", started=100.0, ended=3800.0,
         clock=3900.0, read_at=3901.0),
    Case("ended before the window's edge: nothing left to charge", started=100.0, ended=200.0,
         clock=3900.0, read_at=3901.0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_ended_attempt_is_charged_even_when_it_ended_before_the_window_clock(
        record: Recorder, case: Case) -> None:
    record(T0 + 1, submit("j", "a1", gpus=2, min_runtime_s=60), PlaceJob("j", {"n0": [0, 1]}, funded=True))
    record(T0 + case.started, ReportJobStarted("j", 1, 42, started_at=T0 + case.started))
    view = SchedulerState(SETTINGS)
    view.catch_up(record.store)
    view.cycle(T0 + case.clock)  # the cycle that ran while the job still held its GPUs
    record(T0 + case.ended, ReportJobExited("j", 1, 0))  # recorded before that cycle's clock, read after
    view.catch_up(record.store)
    assert view.state.jobs["j"].state == "COMPLETED"
    charged = view.usage.usage(T0 + case.read_at).get("a1", 0.0)
    expected = window_usage([Interval("a1", T0 + case.started, T0 + case.ended, 2, "V100")],
                            T0 + case.read_at, SETTINGS)["a1"]
    assert charged == pytest.approx(expected, abs=1e-6)


def test_fair_share_order_counts_the_attempt_that_ended_before_the_clock(record: Recorder) -> None:
    """a1 ran 2 GPUs for 300 s and ended just before a cycle; b1 ran nothing. The next cycle ranks b1's
    waiting job first (the most under-served goes first), which it would not if a1's usage was dropped
    and the tie broke by submit time."""
    record(T0 + 1, submit("j", "a1", gpus=2, min_runtime_s=60), PlaceJob("j", {"n0": [0, 1]}, funded=True))
    record(T0 + 100, ReportJobStarted("j", 1, 42, started_at=T0 + 100))
    record(T0 + 101, submit("wa", "a1", gpus=4, min_runtime_s=60), submit("wb", "b1", gpus=4, min_runtime_s=60))
    view = SchedulerState(SETTINGS)
    view.catch_up(record.store)
    view.cycle(T0 + 400.0)
    record(T0 + 399.5, ReportJobExited("j", 1, 0))
    view.catch_up(record.store)
    result = view.cycle(T0 + 401.0)
    assert list(result.order)[:2] == ["wb", "wa"]


def test_the_view_folds_as_evolve_does_and_keeps_no_ended_jobs(record: Recorder) -> None:
    """`catch_up` folds job-local events into its own table in place and drops ended jobs once the table
    doubled: after each of several catch-ups the view holds exactly the jobs not ended of the reference fold
    (`evolve`, event by event), with the same GPU use and nodes, and a table that does not grow with the
    history (evolve copied the whole table per job event, and the view kept every job)."""
    view = SchedulerState(SETTINGS)
    at = T0 + 10
    for round_ in range(4):
        for k in range(60):
            at += 1
            job = f"r{round_}-{k}"
            record(at, submit(job, "a1", gpus=1, min_runtime_s=60))
            if k % 3 == 0:
                record(at, CancelJob(job, "not needed"))
                continue
            keeps_running = k == 1 and round_ < 3  # one job a round holds GPU `round_` to the end
            gpu = round_ if keeps_running else 3
            record(at, PlaceJob(job, {"n0": [gpu]}, funded=True), ReportJobStarted(job, 1, 42, started_at=at))
            if not keeps_running:
                record(at + 0.5, ReportJobExited(job, 1, 0))
        record(at + 1, submit(f"w{round_}", "b1", gpus=4, min_runtime_s=60))
        view.catch_up(record.store)
        expected = {j: job for j, job in record.state.jobs.items() if job.state not in TERMINAL_STATES}
        assert {j for j in view.state.jobs if j not in expected} <= {
            j for j, job in record.state.jobs.items() if job.state in TERMINAL_STATES}
        assert {j: view.state.jobs[j] for j in expected} == expected
        assert view.state.used == record.state.used and view.state.nodes == record.state.nodes
        assert len(view.state.jobs) <= 2 * len(expected) + 64
    assert len(record.state.jobs) == 244 and len(view.state.jobs) < 150


def test_the_usage_per_cluster_is_the_trees_split_where_each_attempt_ran(record: Recorder) -> None:
    """ADR 0076: with two clusters the view keeps each cluster's usage (ended attempts by the cluster of their
    node, running ones too), and the figures per cluster sum to the tree's; with one cluster it keeps none for
    the cycle (None: the tree's standing alone)."""
    view = SchedulerState(SETTINGS)
    view.catch_up(record.store)
    assert view.usage_by_cluster(T0 + 10, [], {}) is None  # no node of a second cluster
    record(T0 + 1, RegisterNode("c0", 4, "H100", ["ceres", "c0"], cluster="ceres"))
    record(T0 + 2, submit("j", "a1", gpus=2, min_runtime_s=60), PlaceJob("j", {"n0": [0, 1]}, funded=True),
           submit("k", "b1", gpus=4, min_runtime_s=60), PlaceJob("k", {"c0": [0, 1, 2, 3]}, funded=True))
    record(T0 + 100, ReportJobStarted("j", 1, 42, started_at=T0 + 100),
           ReportJobStarted("k", 1, 43, started_at=T0 + 100))
    record(T0 + 400, ReportJobExited("j", 1, 0))  # j's 2 GPUs × 300 s on the default cluster; k still runs
    view.catch_up(record.store)
    view.cycle(T0 + 1000)
    nodes = {nid: policy_node(n) for nid, n in view.state.nodes.items()}
    running = [running_job(j, T0 + 1000) for j in view.state.jobs.values() if j.state == "RUNNING"]
    per = view.usage_by_cluster(T0 + 1000, running, nodes)
    assert per is not None
    tree = view.usage.usage(T0 + 1000, running, nodes)
    assert per["ceres"]["b1"] == pytest.approx(4 * 900) and per["ceres"].get("a1", 0.0) == 0.0
    assert sum(p.get("a1", 0.0) for p in per.values()) == pytest.approx(tree["a1"]) == pytest.approx(2 * 300)
    assert sum(p.get("b1", 0.0) for p in per.values()) == pytest.approx(tree["b1"])
