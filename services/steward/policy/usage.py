"""Usage accounting (DESIGN.md "Usage window").

Usage is GPU-seconds, optionally weighted per GPU model, charged to the allocation that funded the
work (unfunded occupancy is not charged), either over a sliding window (default 7 days) or with
exponential decay (a half-life). `window_usage` is the batch definition; `UsageWindow` is the same
figure kept incrementally (amortised O(log n) per interval), exact at the window edges: an interval
ending exactly at the left edge contributes nothing, one straddling it contributes only its part
inside the window, and a project whose intervals have all left the window is back to exactly 0.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from steward.domain.policy_settings import PolicySettings
from steward.policy.errors import UsageError
from steward.policy.model import Node, RunningJob

LN2 = math.log(2.0)


@dataclass(frozen=True, slots=True)
class Interval:
    """`gpus` GPUs of `model` charged to `project` from `start` to `end` (seconds)."""

    project: str
    start: float
    end: float
    gpus: int
    model: str = "default"

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise UsageError(self.project, f"interval ends ({self.end}) before it starts ({self.start})")
        if self.gpus < 0:
            raise UsageError(self.project, f"negative GPU count {self.gpus}")


def window_contribution(start: float, end: float, weighted_gpus: float, now: float, window_s: float) -> float:
    """Window rule: GPU-seconds of [start, end] inside [now - window_s, now]."""
    lo = max(start, now - window_s)
    hi = min(end, now)
    return weighted_gpus * (hi - lo) if hi > lo else 0.0


def decay_contribution(start: float, end: float, weighted_gpus: float, now: float, half_life_s: float) -> float:
    """Decay rule: ∫ gpus · 2^(-(now - t)/half_life) dt over [start, min(end, now)]."""
    hi = min(end, now)
    if hi <= start:
        return 0.0
    k = LN2 / half_life_s
    return weighted_gpus * (math.exp(-k * (now - hi)) - math.exp(-k * (now - start))) / k


def contribution(interval: Interval, now: float, settings: PolicySettings) -> float:
    """One interval's usage at `now` under the settings' mode and GPU-model weights."""
    wg = interval.gpus * settings.model_weight(interval.model)
    if settings.usage_mode == "decay":
        return decay_contribution(interval.start, interval.end, wg, now, settings.half_life_s)
    return window_contribution(interval.start, interval.end, wg, now, settings.window_s)


def window_usage(intervals: Iterable[Interval], now: float, settings: PolicySettings) -> dict[str, float]:
    """Batch definition: usage per project at `now` (the reference the incremental form must equal)."""
    out: dict[str, float] = {}
    for iv in intervals:
        c = contribution(iv, now, settings)
        if c > 0.0 or iv.project not in out:
            out[iv.project] = out.get(iv.project, 0.0) + c
    return out


def entitled_horizon_s(settings: PolicySettings) -> float:
    """Length of time that usage is measured over: the window, or for decay the integral of the
    decay kernel (half_life / ln 2), so that "entitled in window" = entitlement × capacity × this."""
    if settings.usage_mode == "decay":
        return settings.half_life_s / LN2
    return settings.window_s


def running_intervals(
    running: Iterable[RunningJob], nodes: Mapping[str, Node] | None = None
) -> list[tuple[str, float, float, str]]:
    """Open intervals (project, start, weighted-by-model GPUs as (gpus, model) parts) of funded running
    jobs: unfunded occupancy is not charged (DESIGN.md "Unfunded occupancy")."""
    out: list[tuple[str, float, float, str]] = []
    for job in running:
        if not job.funded:
            continue
        for node_id, count in job.placement:
            model = nodes[node_id].model if nodes is not None and node_id in nodes else "default"
            out.append((job.project, job.started_at, float(count), model))
    return out


class UsageWindow:
    """Incremental usage per project. Not a value: an accumulator the simulator or a projection
    feeds in time order (no IO, no clock; time only moves when the caller says so).

    `add(interval)` charges a closed interval (it may end up to the current time or later, which
    advances the clock to its end); `usage(now, running=...)` returns the figure per project at
    `now`, adding the open intervals of funded running jobs.
    """

    __slots__ = (
        "_by_end",
        "_by_start",
        "_count",
        "_decay",
        "_full",
        "_now",
        "_seq",
        "_strad_g",
        "_strad_ge",
        "settings",
    )

    def __init__(self, settings: PolicySettings | None = None) -> None:
        self.settings = settings or PolicySettings()
        self._now = -math.inf
        self._seq = 0
        # window mode
        self._by_start: list[tuple[float, int, str, float, float]] = []  # (start, seq, project, end, wg)
        self._by_end: list[tuple[float, int, str, float]] = []  # (end, seq, project, wg)
        self._full: dict[str, float] = {}
        self._strad_ge: dict[str, float] = {}
        self._strad_g: dict[str, float] = {}
        self._count: dict[str, int] = {}
        # decay mode: project -> (value at ref time, ref time)
        self._decay: dict[str, tuple[float, float]] = {}

    @property
    def now(self) -> float:
        return self._now

    def advance(self, now: float) -> None:
        """Move the clock to `now` (never backwards), expiring what leaves the window."""
        if now < self._now:
            raise UsageError("*", f"time went backwards: {now} < {self._now}")
        self._now = now
        if self.settings.usage_mode == "decay":
            return
        left = now - self.settings.window_s
        while self._by_start and self._by_start[0][0] < left:
            start, seq, project, end, wg = heapq.heappop(self._by_start)
            self._full[project] -= wg * (end - start)
            if end > left:
                self._strad_ge[project] = self._strad_ge.get(project, 0.0) + wg * end
                self._strad_g[project] = self._strad_g.get(project, 0.0) + wg
                heapq.heappush(self._by_end, (end, seq, project, wg))
            else:
                self._forget(project)
        while self._by_end and self._by_end[0][0] <= left:
            end, _seq, project, wg = heapq.heappop(self._by_end)
            self._strad_ge[project] -= wg * end
            self._strad_g[project] -= wg
            self._forget(project)

    def add(self, interval: Interval) -> None:
        """Charge a finished interval."""
        if interval.end > self._now:
            self.advance(interval.end)
        wg = interval.gpus * self.settings.model_weight(interval.model)
        project = interval.project
        if self.settings.usage_mode == "decay":
            value, ref = self._decay.get(project, (0.0, self._now))
            k = LN2 / self.settings.half_life_s
            value *= math.exp(-k * (self._now - ref))
            value += decay_contribution(interval.start, interval.end, wg, self._now, self.settings.half_life_s)
            self._decay[project] = (value, self._now)
            return
        left = self._now - self.settings.window_s
        self._full.setdefault(project, 0.0)
        self._strad_g.setdefault(project, 0.0)
        self._strad_ge.setdefault(project, 0.0)
        if interval.end <= left or wg == 0.0:
            return
        self._seq += 1
        self._count[project] = self._count.get(project, 0) + 1
        if interval.start >= left:
            self._full[project] += wg * (interval.end - interval.start)
            heapq.heappush(self._by_start, (interval.start, self._seq, project, interval.end, wg))
        else:
            self._strad_ge[project] += wg * interval.end
            self._strad_g[project] += wg
            heapq.heappush(self._by_end, (interval.end, self._seq, project, wg))

    def usage(
        self,
        now: float,
        running: Iterable[RunningJob] = (),
        nodes: Mapping[str, Node] | None = None,
    ) -> dict[str, float]:
        """Usage per project at `now` (advancing to it), with funded running jobs charged from their
        start (their open intervals) — the `Snapshot.usage` a cycle needs."""
        self.advance(now)
        out: dict[str, float] = {}
        if self.settings.usage_mode == "decay":
            k = LN2 / self.settings.half_life_s
            for project, (value, ref) in self._decay.items():
                out[project] = value * math.exp(-k * (now - ref))
        else:
            left = now - self.settings.window_s
            for project, full in self._full.items():
                if self._count.get(project, 0) == 0:
                    out[project] = 0.0
                    continue
                strad = self._strad_ge[project] - left * self._strad_g[project]
                out[project] = max(0.0, full + strad)
        for project, start, gpus, model in running_intervals(running, nodes):
            wg = gpus * self.settings.model_weight(model)
            if self.settings.usage_mode == "decay":
                c = decay_contribution(start, now, wg, now, self.settings.half_life_s)
            else:
                c = window_contribution(start, now, wg, now, self.settings.window_s)
            out[project] = out.get(project, 0.0) + c
        return out

    def _forget(self, project: str) -> None:
        n = self._count[project] - 1
        self._count[project] = n
        if n == 0:  # exact at the edges: no float residue once nothing is left in the window
            self._full[project] = 0.0
            self._strad_ge[project] = 0.0
            self._strad_g[project] = 0.0
