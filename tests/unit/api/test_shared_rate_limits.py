"""The rate limit shared by the API's replicas (ADR 0047) serves a client what its bucket holds, however many of
its requests are in flight at once: one lease per key at a time in a replica (ADR 0075). Before, each request in
flight took a lease of its own and only the last one's remainder was kept, so a client far below its rate (the
soak's submitter, 2 requests/s against 50/s) drained the shared bucket and was answered HTTP 429."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from steward.api.ratelimits import SharedRateLimiter

from .test_live_model import _store


class SlowStore(SharedRateLimiter):
    """A store round trip that takes a while (a loaded store, or request threads queued behind others)."""

    def _lease(self, key: str, want: float, now: float) -> tuple[float, float]:
        time.sleep(0.02)
        return super()._lease(key, want, now)


CASES = {
    # requests of one client in flight at once (no time passes: nothing refills) -> how many are served
    "30 in flight, within the burst": (30, 30),
    "the whole burst in flight": (100, 100),
    "past the burst: the burst and no more": (150, 100),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_clients_requests_in_flight_are_served_up_to_its_burst(tmp_path: Path, name: str) -> None:
    in_flight, served = CASES[name]
    limiter = SlowStore(_store(tmp_path), rate_per_s=50.0, burst=100.0, lease=10.0, clock=lambda: 1_000.0)
    with ThreadPoolExecutor(in_flight) as pool:
        waits = list(pool.map(lambda _: limiter.take("stw_client"), range(in_flight)))
    assert waits.count(0.0) == served
    assert all(w > 0 for w in waits if w != 0.0)
    assert limiter.round_trips <= served // 10 + 2  # one lease per 10 requests (and the refusal's)


def test_a_client_at_one_request_a_second_is_never_refused(tmp_path: Path) -> None:
    now = [1_000.0]
    limiter = SlowStore(_store(tmp_path), rate_per_s=50.0, burst=100.0, lease=10.0, clock=lambda: now[0])
    for _ in range(300):
        with ThreadPoolExecutor(2) as pool:  # two requests in flight each second
            assert list(pool.map(lambda _: limiter.take("stw_client"), range(2))) == [0.0, 0.0]
        now[0] += 1.0
