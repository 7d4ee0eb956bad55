"""The rate limit shared by the API's replicas (ADR 0047) serves a client what its bucket holds, however many of
its requests are in flight at once: one lease per key at a time in a replica (ADR 0075). Before, each request in
flight took a lease of its own and only the last one's remainder was kept, so a client far below its rate (the
soak's submitter, 2 requests/s against 50/s) drained the shared bucket and was answered HTTP 429."""

from __future__ import annotations

import asyncio
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


class CountedWaits(SharedRateLimiter):
    """Counts the requests that waited for the store (`take_async` calls `take` in a thread only then)."""

    waits = 0

    def take(self, key: str, cost: float = 1.0) -> float:
        self.waits += 1
        return super().take(key, cost)


async def _requests(limiters: list[CountedWaits], now: list[float], n: int, every_s: float) -> list[float]:
    """`n` requests of one client, one every `every_s` (clock) seconds, round robin over the replicas; each
    replica's background refills finish before the next request (the store is fast enough for the client)."""
    waits = []
    for i in range(n):
        limiter = limiters[i % len(limiters)]
        waits.append(await limiter.take_async("stw_client"))
        await asyncio.gather(*limiter.refills)
        now[0] += every_s
    return waits


def test_a_client_within_its_rate_waits_for_the_store_only_once(tmp_path: Path) -> None:
    """ADR 0079: the lease is topped up in the background before it runs out, so a client within its rate finds
    tokens in memory on every request but its first (before, one request in every lease waited for a round
    trip on a request thread: a tenth of the soak's requests)."""
    now = [1_000.0]
    limiter = CountedWaits(_store(tmp_path), rate_per_s=50.0, burst=100.0, lease=20.0, clock=lambda: now[0])
    waits = asyncio.run(_requests([limiter], now, 300, 1.0))
    assert waits == [0.0] * 300
    assert limiter.waits == 1
    assert limiter.round_trips <= 300 // 10 + 1  # a refill takes at least half a lease


LIMITS = {
    # replicas, lease -> a client at 200 requests/s against 50/s and a burst of 100, for 10 s
    "one replica, small lease": (1, 2.0),
    "one replica, default lease": (1, 20.0),
    "three replicas, default lease": (3, 20.0),
    "three replicas, half the burst": (3, 50.0),
}


@pytest.mark.parametrize("name", list(LIMITS))
def test_background_refills_never_serve_more_than_the_shared_bucket(tmp_path: Path, name: str) -> None:
    """Whatever the replicas and the lease, with refills in the background a client over its rate is served
    no more than burst + rate x elapsed in all, at any time, and no less than that minus a lease per replica."""
    replicas, lease = LIMITS[name]
    store = _store(tmp_path)
    now = [1_000.0]
    limiters = [CountedWaits(store, rate_per_s=50.0, burst=100.0, lease=lease, clock=lambda: now[0])
                for _ in range(replicas)]
    served = 0
    for second in range(1, 11):
        waits = asyncio.run(_requests(limiters, now, 200, 1 / 200))
        served += waits.count(0.0)
        assert served <= 100 + 50 * second, (second, served)
    assert served >= 100 + 50 * 10 - replicas * lease - 50, served
