"""When the supervisor restarts a process that died (ADR 0058): pure, so the rule is tested without clocks.

A death after the process stayed up `stable_s` restarts it after `first_s`; each further death that comes
sooner doubles the wait, up to `max_s` (1 s, 2 s, 4 s ... 30 s by default): a process that cannot start
(its port taken, its database away) is retried forever, at most twice a minute, without spinning."""

from __future__ import annotations

from dataclasses import dataclass

from steward.backoff import doubling_delay


@dataclass(frozen=True)
class Backoff:
    first_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 60.0  # up this long, and the next death starts from `first_s` again


@dataclass(frozen=True)
class Watched:
    """One supervised process: when its current run started, how many deaths in a row came before it had
    stayed up `stable_s`, and when its restart is due (None while it runs)."""

    started_at: float
    quick_deaths: int = 0
    due_at: float | None = None
    restarts: int = 0

    @property
    def waiting(self) -> bool:
        return self.due_at is not None


def died(w: Watched, now: float, policy: Backoff) -> Watched:
    """It was seen dead at `now`: its restart is due after the backoff."""
    streak = 0 if now - w.started_at >= policy.stable_s else w.quick_deaths
    delay = doubling_delay(streak, policy.first_s, policy.max_s)
    return Watched(w.started_at, streak + 1, now + delay, w.restarts)


def delay_of(w: Watched, now: float) -> float:
    return max((w.due_at or now) - now, 0.0)


def due(w: Watched, now: float) -> bool:
    return w.due_at is not None and now >= w.due_at


def restarted(w: Watched, now: float) -> Watched:
    return Watched(now, w.quick_deaths, None, w.restarts + 1)
