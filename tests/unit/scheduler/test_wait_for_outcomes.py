"""The scheduler waits for the ledger to record its decisions while the ledger makes progress on them (issue 26:
a fixed 15 s let a cycle re-plan on a view the ledger had not yet reached, and 451 of 2,000 pods were decided
twice). Table-driven: each case says when (in seconds after the wait began) each message's outcome is recorded."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from steward.scheduler.service import wait_for_outcomes


@dataclass
class Ledger:
    """A scripted ledger and clock: message `m` is recorded from `at[m]` seconds on (never when absent)."""

    at: dict[str, float]
    now: float = 0.0

    def recorded(self, message_id: str) -> bool:
        when = self.at.get(message_id)
        return when is not None and self.now >= when

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


CASES = [
    # (name, recorded at, stall, limit, waited for all, about when the wait ends)
    ("idle ledger: at once", {"a": 0.0, "b": 0.0}, 15.0, 120.0, True, 0.0),
    ("slow but steady: waits past the stall time", {f"m{i}": 10.0 * i for i in range(1, 8)}, 15.0, 120.0, True, 70.0),
    ("stalled: re-plans after the stall time", {"a": 1.0, "b": None}, 15.0, 120.0, False, 16.0),
    ("nothing ever: re-plans after the stall time", {"a": None}, 15.0, 120.0, False, 15.0),
    ("steady past the limit: re-plans at the limit", {f"m{i}": 10.0 * i for i in range(1, 20)}, 15.0, 120.0,
     False, 120.0),
    ("no messages: nothing to wait for", {}, 15.0, 120.0, True, 0.0),
]


@pytest.mark.parametrize(("name", "at", "stall", "limit", "expected", "ends"), CASES, ids=[c[0] for c in CASES])
def test_waits_while_the_ledger_makes_progress(name: str, at: dict[str, float | None], stall: float, limit: float,
                                               expected: bool, ends: float) -> None:
    ledger = Ledger({m: t for m, t in at.items() if t is not None})
    result = wait_for_outcomes(ledger.recorded, list(at), stall_s=stall, limit_s=limit,
                               clock=ledger.clock, sleep=ledger.sleep)
    assert result is expected
    assert ends <= ledger.now <= ends + 0.1


def test_a_stop_ends_the_wait() -> None:
    ledger = Ledger({})
    stop = threading.Event()
    stop.set()
    assert wait_for_outcomes(ledger.recorded, ["a"], stop=stop, clock=ledger.clock, sleep=ledger.sleep) is False
    assert ledger.now == 0.0
