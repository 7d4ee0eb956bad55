"""The doubling backoff, one rule (`steward.backoff.doubling_delay`) read by three callers: each caller's waits,
table-driven with its own parameters (the sequences each produced before they shared the rule), and the rule's
properties (Hypothesis): never decreasing along a streak, never above the cap, jitter a factor of it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.backoff import doubling_delay
from steward.bus.waiting import FIRST_DELAY_S, MAX_DELAY_S, bootstrap_delay
from steward.executor.kubernetes_watch import BACKOFF_MAX_S, BACKOFF_S
from steward.executor.kubernetes_watch import Backoff as WatchBackoff
from steward.infra.restarts import Backoff as RestartBackoff
from steward.infra.restarts import Watched, delay_of, died, restarted

# (caller, its first wait and cap, the waits of a streak of failures)
SEQUENCES: list[tuple[str, float, float, list[float]]] = [
    ("kafka start (bus.waiting)", FIRST_DELAY_S, MAX_DELAY_S, [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]),
    ("supervisor (infra.restarts)", 1.0, 30.0, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]),
    ("supervisor, no wait", 0.0, 30.0, [0.0, 0.0, 0.0]),
    ("kubernetes watch (executor)", BACKOFF_S, BACKOFF_MAX_S, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]),
    ("kubernetes watch, a test's", 0.5, 4.0, [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]),
    ("a first wait above the cap", 5.0, 4.0, [4.0, 4.0]),
]


def kafka_waits(n: int) -> list[float]:
    return [bootstrap_delay(failures, 0.0, math.inf) or -1.0 for failures in range(1, n + 1)]


def supervisor_waits(first_s: float, max_s: float, n: int) -> list[float]:
    policy, now, w, out = RestartBackoff(first_s, max_s), 100.0, Watched(100.0), []
    for _ in range(n):
        now += 0.5  # died before it was stable: the streak goes on
        w = died(w, now, policy)
        out.append(delay_of(w, now))
        now += out[-1]
        w = restarted(w, now)
    return out


def watch_waits(first_s: float, max_s: float, n: int, draw: float) -> list[float]:
    b = WatchBackoff(first_s, max_s, rand=lambda: draw)
    return [b.wait_s() for _ in range(n)]


@pytest.mark.parametrize(("caller", "first_s", "cap_s", "waits"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_each_callers_waits_are_the_rules(caller: str, first_s: float, cap_s: float, waits: list[float]) -> None:
    n = len(waits)
    assert [doubling_delay(k, first_s, cap_s) for k in range(n)] == waits, caller
    if caller.startswith("kafka"):
        assert kafka_waits(n) == waits
    if caller.startswith("supervisor"):
        assert supervisor_waits(first_s, cap_s, n) == waits
    if caller.startswith("kubernetes"):
        assert watch_waits(first_s, cap_s, n, 1.0) == waits  # the largest draw: no jitter
        assert watch_waits(first_s, cap_s, n, 0.0) == [w / 2 for w in waits]  # the smallest: half of it


def test_the_supervisor_survives_a_streak_of_any_length() -> None:
    """A process that cannot start is retried forever: 1,100 quick deaths (about 9 hours at 30 s) raised
    OverflowError (2.0 ** 1100) before the supervisor's wait was the shared rule."""
    w = died(Watched(0.0, quick_deaths=1100), 1.0, RestartBackoff())
    assert delay_of(w, 1.0) == 30.0
    assert bootstrap_delay(10**6, 0.0, math.inf) == MAX_DELAY_S


def test_the_watch_backoff_starts_again_after_a_success() -> None:
    b = WatchBackoff(0.5, 4.0, rand=lambda: 1.0)
    assert [b.wait_s() for _ in range(3)] == [0.5, 1.0, 2.0]
    b.reset()
    assert b.wait_s() == 0.5


@pytest.mark.parametrize(("step", "jitter", "match"), [(-1, 1.0, "from 0"), (0, 1.5, r"\[0, 1\]"),
                                                       (0, -0.1, r"\[0, 1\]")])
def test_bad_arguments_are_refused(step: int, jitter: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        doubling_delay(step, 1.0, 2.0, jitter)


seconds = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(first_s=seconds, cap_s=seconds, step=st.integers(min_value=0, max_value=5000),
       jitter=st.floats(min_value=0.0, max_value=1.0))
def test_waits_never_decrease_and_never_pass_the_cap(first_s: float, cap_s: float, step: int, jitter: float) -> None:
    here, after = doubling_delay(step, first_s, cap_s), doubling_delay(step + 1, first_s, cap_s)
    assert here <= after <= cap_s
    assert 0.0 <= doubling_delay(step, first_s, cap_s, jitter) <= here
