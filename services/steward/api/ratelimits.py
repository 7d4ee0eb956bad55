"""Rate limits shared by every API replica: one token bucket per key (a token id, a JWT subject, a client
address) in the store's `api_rate_buckets` table (migrations/versions/0007_api_rate_buckets.py), taken
from in leases (ADR 0047).

A replica takes up to `lease` tokens from the shared bucket in one transaction and spends them locally,
so a key costs one store round trip per `lease` requests, not one per request. Tokens are only ever
spent after being taken from the shared bucket, so all replicas together never serve a key more than
`burst` at once plus `rate` per second: the limit holds whatever the number of replicas. A lease not
spent on one replica (the client moved to another) is lost, which only makes the limit stricter, by at
most `lease` tokens per replica. A refusal is remembered locally until the bucket could allow the
request, so a client over its limit costs no round trip per refused request.

One lease per key at a time in a replica (ADR 0075): requests of one key that arrive while its lease is being
taken (a client with several requests in flight, e.g. the submissions of a busy script, when the store or the
request threads are slow) wait for it and spend what it brought, instead of each taking a lease of its own.
Before, each took one and kept only the last one's remainder: `lease` tokens lost per request in flight, so
a client far below its rate drained the shared bucket and was refused (HTTP 429 in the soak).

When the store cannot be reached, each replica falls back to its own bucket of the same size (the
limit then holds per replica; logged once)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Column, Float, MetaData, String, Table, text

from steward.auth.ratelimit import RateLimiter
from steward.store.eventstore import EventStore

log = logging.getLogger("steward.api")

metadata = MetaData()
api_rate_buckets = Table(
    "api_rate_buckets",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("tokens", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)


def _refill_sql(dialect: str) -> str:
    least, greatest = ("LEAST", "GREATEST") if dialect == "postgresql" else ("MIN", "MAX")
    return (
        "INSERT INTO api_rate_buckets AS b (key, tokens, updated_at) VALUES (:key, :burst, :now) "
        "ON CONFLICT (key) DO UPDATE SET "
        f"tokens = {least}(:burst, b.tokens + {greatest}(0, :now - b.updated_at) * :rate), "
        f"updated_at = {greatest}(b.updated_at, :now) "
        "RETURNING tokens"
    )


class SharedRateLimiter:
    """`RateLimiter.take`'s contract (0.0: allowed; else the seconds to wait) over the shared buckets."""

    def __init__(self, store: EventStore, rate_per_s: float, burst: float, lease: float = 10.0,
                 clock: Callable[[], float] = time.time, max_keys: int = 100_000) -> None:
        self.store = store
        self.rate = rate_per_s
        self.burst = burst
        self.lease = max(1.0, min(lease, burst))
        self.clock = clock
        self.max_keys = max_keys
        self._sql = text(_refill_sql(store.dialect))
        self._spend = text("UPDATE api_rate_buckets SET tokens = tokens - :taken WHERE key = :key")
        self._local: dict[str, float] = {}  # leased tokens not yet spent
        self._refused: dict[str, float] = {}  # key -> time before which the shared bucket cannot allow it
        self._lock = threading.Lock()
        self._leasing: dict[str, threading.Lock] = {}  # key -> held while a lease for it is being taken
        self._fallback = RateLimiter(rate_per_s, burst)
        self._failing = False
        self.round_trips = 0

    def take_local(self, key: str, cost: float = 1.0) -> float | None:
        """`take` when it needs no store round trip (a lease covers it, or a refusal still holds), else None."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            left = self._local.get(key, 0.0)
            if left >= cost:
                self._local[key] = left - cost
                return 0.0
            until = self._refused.get(key)
            now = self.clock()
            if until is not None and now < until:
                return until - now
        return None

    def take(self, key: str, cost: float = 1.0) -> float:
        """0.0 when allowed; otherwise the seconds until a request would be allowed. May read the store."""
        local = self.take_local(key, cost)
        if local is not None:
            return local
        with self._lock:
            leasing = self._leasing.setdefault(key, threading.Lock())
        with leasing:  # one lease per key at a time: a request arriving meanwhile spends what it brings
            local = self.take_local(key, cost)
            if local is not None:
                return local
            return self._take_leased(key, cost)

    def _take_leased(self, key: str, cost: float) -> float:
        with self._lock:
            left = self._local.get(key, 0.0)
        want = max(self.lease, cost) - left
        now = self.clock()
        try:
            granted, available = self._lease(key, want, now)
        except Exception as err:  # the store is unreachable: this replica's own bucket meanwhile
            if not self._failing:
                log.warning("shared rate limits unavailable (%s): limiting per replica until the store answers", err)
            self._failing = True
            return self._fallback.take(key, cost)
        self._failing = False
        with self._lock:
            if len(self._leasing) > self.max_keys:
                self._leasing = {k: v for k, v in self._leasing.items() if v.locked()}
            tokens = self._local.get(key, 0.0) + granted  # what is left here, with what the lease brought
            if tokens >= cost:
                self._local[key] = tokens - cost
                self._refused.pop(key, None)
                if len(self._local) > self.max_keys:
                    self._local.clear()
                return 0.0
            self._local[key] = tokens
            wait = max((cost - tokens - available) / self.rate, 0.001)
            self._refused[key] = now + wait
            if len(self._refused) > self.max_keys:
                self._refused = {k: t for k, t in self._refused.items() if t > now}
            return wait

    async def take_async(self, key: str, cost: float = 1.0) -> float:
        """`take` from the event loop: a thread only when the store must be asked."""
        local = self.take_local(key, cost)
        if local is not None:
            return local
        return await asyncio.to_thread(self.take, key, cost)

    def _lease(self, key: str, want: float, now: float) -> tuple[float, float]:
        """Take up to `want` whole tokens from the shared bucket: (taken, what it still holds)."""
        self.round_trips += 1
        with self.store.engine.begin() as conn:
            available = float(conn.execute(self._sql, {"key": key, "burst": self.burst, "now": now,
                                                       "rate": self.rate}).scalar_one())
            taken = float(min(want, int(available)))
            if taken > 0:
                conn.execute(self._spend, {"key": key, "taken": taken})
        return taken, available - taken
