"""The supervisor's backoff (steward.infra.restarts): 1 s doubling to 30 s, from 1 s again after a minute up."""

from __future__ import annotations

import pytest

from steward.infra.restarts import Backoff, Watched, delay_of, died, due, restarted


@pytest.mark.parametrize(("uptimes", "delays"), [
    ([0.5], [1.0]),
    ([0.5, 0.5, 0.5, 0.5], [1.0, 2.0, 4.0, 8.0]),
    ([0.1] * 8, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]),
    ([0.5, 0.5, 61.0, 0.5], [1.0, 2.0, 1.0, 2.0]),  # stayed up a minute: the streak starts again
])
def test_backoff_doubles_up_to_its_cap_and_resets_once_stable(uptimes: list[float], delays: list[float]) -> None:
    policy = Backoff()
    now = 1000.0
    w = Watched(now)
    seen = []
    for up in uptimes:
        now += up
        w = died(w, now, policy)
        seen.append(delay_of(w, now))
        assert not due(w, now) and due(w, now + seen[-1])
        now += seen[-1]
        w = restarted(w, now)
    assert seen == pytest.approx(delays) and w.restarts == len(uptimes) and not w.waiting
