"""The budget figures are as of a log position (ADR 0075): over the window ending when the read model's position
was recorded, from every event recorded before it, so they are the budget module's own figures over the log for
the window they state, whatever the API's clock says and whatever the ledger is recording meanwhile.

The bug this holds: the ledger stamps an event's `recorded_at` when it decides and commits afterwards; figures
computed in between over a window ending at the API's clock (after that stamp) did not count the event, and
`test_books_agree` found GraphQL's `entitledInWindow` 150 GPU-s short of the budget module's over the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from steward.api.figures import OVERVIEW_TYPES, AllocationFigures, OverviewFold
from steward.api.readmodel import ReadModel
from steward.bus.envelope import command_envelope
from steward.domain import budget
from steward.domain.commands import Command, PlaceJob, RegisterNode, ReportJobExited, ReportJobStarted, SubmitJob
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore

from .test_live_model import TREE, _store

WINDOW = 3600.0


def _messages(commands: list[Command]) -> list[tuple[str, bytes | None]]:
    return [("test", command_envelope(c, actor="t", role="admin").encode()) for c in commands]


def _log(store: EventStore) -> list[tuple[str, dict[str, object], float]]:
    return [(r.type, dict(r.payload), r.recorded_at) for r in store.iterate() if r.type in OVERVIEW_TYPES]


class Stack:
    """A ledger on a clock of its own and an API read model on another, over one SQLite store."""

    def __init__(self, tmp: Path) -> None:
        self.store = _store(tmp)
        self.ledger_now = 1_000.0
        self.api_now = 1_000.0
        self.ledger = Ledger(self.store, consumer_name="test", clock=lambda: self.ledger_now)
        # a model that catches up only when told (`refresh(force=True)`), as if its feed were slow
        self.read = ReadModel(self.store, clock=lambda: self.api_now, head_ttl_s=1e9, figures_every_s=0.0)
        self.figures: list[AllocationFigures] = []

    def record(self, at: float, commands: list[Command]) -> None:
        self.ledger_now = at
        self.ledger.process(_messages(commands), {})

    def decided_not_committed(self, at: float, commands: list[Command]) -> Callable[[], None]:
        """The ledger decides (and stamps) a batch at `at`; the returned call commits it."""
        self.ledger_now = at
        prepared = self.ledger.prepare(_messages(commands), {})

        def commit() -> None:
            self.ledger.record(prepared)
            self.ledger.committed(prepared)
        return commit


def _setup(stack: Stack) -> None:
    stack.record(1_000.0, TREE)
    stack.record(1_100.0, [SubmitJob("j1", "a1", 2, 60, ["true"]), SubmitJob("j2", "b1", 1, 60, ["true"])])
    stack.record(1_200.0, [PlaceJob("j1", {"n1": [0, 1]}, True, {}), PlaceJob("j2", {"n2": [0]}, True, {})])
    stack.record(1_300.0, [ReportJobStarted("j1", 1, 5), ReportJobStarted("j2", 1, 6)])


def _late_node(stack: Stack) -> None:
    """A node decided at 1,500 and committed after the figures were computed at 1,600 (the 150 GPU-s case)."""
    stack.read.refresh(force=True)
    commit = stack.decided_not_committed(1_500.0, [RegisterNode("n3", 8, "h100", ["z", "n3"])])
    stack.api_now = 1_600.0
    stack.figures = stack.read.figures(WINDOW)
    commit()


def _unread(stack: Stack) -> None:
    """Events committed after the model's last catch-up: the model is at an older position than the store."""
    stack.read.refresh(force=True)
    stack.record(1_500.0, [ReportJobExited("j2", 1, 0), RegisterNode("n3", 8, "h100", ["z", "n3"])])
    stack.api_now = 1_600.0
    stack.figures = stack.read.figures(WINDOW)


def _started_earlier(stack: Stack) -> None:
    """The model's last event was recorded at 1,500 and says the process started at 1,450 by the executor's
    clock: the budget module counts the events recorded before the window's end, so not that one (yet)."""
    stack.record(1_400.0, [SubmitJob("j3", "b1", 1, 60, ["true"])])
    stack.record(1_500.0, [ReportJobExited("j2", 1, 0)])
    stack.record(1_500.0, [PlaceJob("j3", {"n2": [1]}, True, {}), ReportJobStarted("j3", 1, 7, 1_450.0)])
    stack.read.refresh(force=True)
    stack.api_now = 1_600.0
    stack.figures = stack.read.figures(WINDOW)
    assert stack.store.read()[-1].type == "JobStarted"
    stack.record(1_700.0, [ReportJobExited("j3", 1, 0)])


CASES: dict[str, tuple[Callable[[Stack], None], float]] = {
    # what happens after the setup -> the time the figures must end at (the model's position's recorded time)
    "an event decided before the API's clock, committed after the read": (_late_node, 1_300.0),
    "events committed but not read yet by the model": (_unread, 1_300.0),
    "the model's last event started its run earlier by the executor's clock": (_started_earlier, 1_500.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_figures_are_the_budget_modules_over_the_log_for_the_window_they_state(tmp_path: Path, name: str) -> None:
    act, ends_at = CASES[name]
    stack = Stack(tmp_path)
    _setup(stack)
    act(stack)
    figs = stack.figures
    (w0, w1), = {(f.window_start, f.window_end) for f in figs}
    expected, _capacity = budget.period_figures(_log(stack.store), w0, w1)
    zero = dict.fromkeys(budget.FIGURES, 0.0)
    for f in figs:
        e = expected.get(f.name, zero)
        assert (f.owed, f.delivered, f.demand_in_window, f.entitled_in_window) == pytest.approx(
            (e["owed_gpu_s"], e["delivered_gpu_s"], e["demand_gpu_s"], e["entitled_gpu_s"]), abs=1e-6), f.name
    assert (w0, w1) == (ends_at - WINDOW, ends_at)  # as of the model's position: when it was recorded
    assert stack.read.figures_head(WINDOW) == stack.read.live.position


def test_a_fold_holds_the_events_recorded_at_its_time_until_the_log_moves_past_it() -> None:
    fold = OverviewFold()
    fold.see(1, "NodeRegistered", {"node_id": "n1", "gpus": 8}, 10.0)
    fold.see(2, "NodeRegistered", {"node_id": "n2", "gpus": 8}, 20.0)
    fold.advance(2, 20.0)
    assert (fold.position, fold.as_of, fold.capacity) == (2, 20.0, [(10.0, 8)])
    fold.advance(2, 20.5)  # a pinned time after the position: the event at 20 is before it
    assert fold.capacity == [(10.0, 8), (20.0, 16)]
