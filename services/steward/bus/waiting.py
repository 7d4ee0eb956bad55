"""How long a Kafka client waits before its next try to reach the broker at start-up (ADR 0064). Pure: the
caller measures the time and sleeps; this only says how long, or that it is time to give up."""

from __future__ import annotations

from steward.backoff import doubling_delay

FIRST_DELAY_S = 0.5  # the first wait; it doubles with each failed try ...
MAX_DELAY_S = 2.0  # ... up to this, so a broker that is back is reached within 2 s (plus one try)
FIRST_TRY_S = 5.0  # how long the first try may take to bootstrap; each later one 5 s more ...
MAX_TRY_S = 30.0  # ... up to kafka-python's own default: a broker that answers slowly (a loaded machine, a
# broker still loading its logs) is given as long as before, never less


def bootstrap_delay(failures: int, waited_s: float, limit_s: float) -> float | None:
    """Seconds to wait after the `failures`-th failed try in a row (1 for the first), `waited_s` seconds after
    the first try began, or None: give up (the wait reached `limit_s`). The delay never carries the wait past
    the limit, so the last try happens at the limit, not after it."""
    if failures < 1:
        raise ValueError(f"failures counts failed tries, from 1; got {failures}")
    if limit_s <= 0 or waited_s >= limit_s:
        return None
    return min(doubling_delay(failures - 1, FIRST_DELAY_S, MAX_DELAY_S), limit_s - waited_s)


def try_timeout_s(failures: int) -> float:
    """How long the try after `failures` failed tries in a row (0 for the first) may spend bootstrapping: a
    refused connection fails fast inside it (kafka-python retries at most 1 s apart), so this only bounds how
    long a broker that answers but is slow is waited for, and how often the wait is logged."""
    if failures < 0:
        raise ValueError(f"failures counts failed tries, from 0; got {failures}")
    return min(MAX_TRY_S, FIRST_TRY_S * (failures + 1))
