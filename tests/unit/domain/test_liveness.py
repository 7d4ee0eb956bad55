"""When a start (or a poll) waiting in its executor's queue is lost (ADR 0069), pure: only when the executor's
last recorded heartbeat is `lost_after_s` old or it never sent one; a busy executor's queue is a wait."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.liveness import HEARTBEAT_REPORT_S, MIN_RECHECK_S, start_wait

L = 60.0


@pytest.mark.parametrize(("heard_at", "now", "lost", "recheck_s", "why"), [
    (None, 1060.0, True, 0.0, "has sent no heartbeat"),  # never heard: silent
    (1000.0, 1060.0, True, 0.0, "silent for 60 s"),  # exactly a window old: silent
    (900.0, 1060.0, True, 0.0, "silent for 160 s"),  # long gone
    (1059.0, 1060.0, False, 59.0, "alive: heartbeat 1 s ago"),  # busy: look again when that heartbeat is stale
    (1020.0, 1060.0, False, 20.0, "alive: heartbeat 40 s ago"),
    (1059.5, 1119.0, False, MIN_RECHECK_S, "alive: heartbeat 60 s ago"),  # stale in 0.5 s: not a busy loop
    (1070.0, 1060.0, False, L, "alive: heartbeat 0 s ago"),  # recorded a moment "after" now: fresh
])
def test_start_wait(heard_at: float | None, now: float, lost: bool, recheck_s: float, why: str) -> None:
    verdict = start_wait("k8s", heard_at, 60.0, now, L)
    assert verdict.lost is lost
    assert verdict.recheck_s == pytest.approx(recheck_s)
    assert why in verdict.reason and "executor 'k8s'" in verdict.reason


@pytest.mark.parametrize(("queued", "shown"), [
    (0, "queued at executor 'k8s'"),
    (12, "queued behind 12 other placement(s) not yet started at executor 'k8s'"),
])
def test_a_wait_says_what_it_waits_behind(queued: int, shown: str) -> None:
    verdict = start_wait("k8s", 1000.0, 125.0, 1010.0, L, queued)
    assert not verdict.lost and verdict.reason.startswith(shown) and "waited 125 s" in verdict.reason


@pytest.mark.parametrize("lost_after_s", [0.0, -1.0])
def test_no_window_is_refused(lost_after_s: float) -> None:
    with pytest.raises(ValueError, match="lost_after_s must be positive"):
        start_wait("k8s", 1000.0, 0.0, 1000.0, lost_after_s)


def test_an_executor_reporting_at_the_default_rate_is_never_silent_for_the_default_window() -> None:
    assert HEARTBEAT_REPORT_S * 2 < L


@given(heard_at=st.floats(0, 1e6), elapsed=st.floats(0, 1e4), lost_after_s=st.floats(0.5, 3600))
def test_a_dead_executor_is_declared_lost_within_the_window_of_its_last_heartbeat(
        heard_at: float, elapsed: float, lost_after_s: float) -> None:
    """Looking again after `recheck_s` (as the JobRun does) with no new heartbeat reaches a loss no later
    than `lost_after_s` (or MIN_RECHECK_S) after that heartbeat; a busy verdict never comes once it is stale."""
    now = heard_at + elapsed
    elapsed = now - heard_at  # as the rule sees it (rounded)
    verdict = start_wait("x", heard_at, 0.0, now, lost_after_s)
    assert verdict.lost is (elapsed >= lost_after_s)
    looks = 0
    while not verdict.lost:  # at most one more look than the arithmetic says (floating-point rounding)
        now += verdict.recheck_s
        looks += 1
        verdict = start_wait("x", heard_at, 0.0, now, lost_after_s)
    assert looks <= 2
    assert now <= heard_at + max(lost_after_s, elapsed) + 2 * MIN_RECHECK_S
