"""Doubling waits between tries, the one rule (pure: no clock, no randomness; the caller sleeps, and draws any
jitter itself): a first wait, doubled after each failure in a row, never above a cap.

Its readers: a Kafka client's start waiting for the broker (`steward.bus.waiting.bootstrap_delay`, ADR 0064), the
supervisor restarting a process that died (`steward.infra.restarts.died`, ADR 0058), and the Kubernetes executor's
list-and-watch after a failed request (`steward.executor.kubernetes_watch.Backoff`, with jitter). A support module
below them all (bus is an adapter, infra and executor are services); not the domain: how long a process waits to
reach a broker or an API server again is no rule of the lab's ledger."""

from __future__ import annotations

MAX_DOUBLINGS = 1023  # 2.0 ** 1024 overflows a float; long before this, any cap above the first wait is reached


def doubling_delay(step: int, first_s: float, cap_s: float, jitter: float = 1.0) -> float:
    """The wait after `step` earlier waits in a row (0: the first wait): `first_s` doubled `step` times, at most
    `cap_s`, times `jitter` (a factor the caller drew, in [0, 1]; 1: none). However long the streak, no overflow."""
    if step < 0:
        raise ValueError(f"step counts earlier waits, from 0; got {step}")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter is a factor in [0, 1]; got {jitter}")
    return min(cap_s, first_s * 2.0 ** min(step, MAX_DOUBLINGS)) * jitter
