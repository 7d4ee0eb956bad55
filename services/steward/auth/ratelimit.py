"""Per-token rate limits: a token bucket per key (a token id, a JWT subject, or a client address)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, rate_per_s: float, burst: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 100_000) -> None:
        self.rate = rate_per_s
        self.burst = burst
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, cost: float = 1.0) -> float:
        """0.0 when allowed; otherwise the seconds until a request would be allowed."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= cost:
                self._buckets[key] = (tokens - cost, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > self.max_keys:
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < self.burst / self.rate}
            return (cost - tokens) / self.rate
