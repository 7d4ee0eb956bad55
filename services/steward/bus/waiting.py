"""How long a Kafka client waits before its next try to reach the broker at start-up (ADR 0064). Pure: the
caller measures the time and sleeps; this only says how long, or that it is time to give up."""

from __future__ import annotations

FIRST_DELAY_S = 0.5  # the first wait; it doubles with each failed try ...
MAX_DELAY_S = 2.0  # ... up to this, so a broker that is back is reached within 2 s (plus one try)


def bootstrap_delay(failures: int, waited_s: float, limit_s: float) -> float | None:
    """Seconds to wait after the `failures`-th failed try in a row (1 for the first), `waited_s` seconds after
    the first try began, or None: give up (the wait reached `limit_s`). The delay never carries the wait past
    the limit, so the last try happens at the limit, not after it."""
    if failures < 1:
        raise ValueError(f"failures counts failed tries, from 1; got {failures}")
    if limit_s <= 0 or waited_s >= limit_s:
        return None
    delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2.0 ** min(failures - 1, 16))
    return min(delay, limit_s - waited_s)
