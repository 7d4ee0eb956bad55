"""`Snapshot.usage` kept incrementally for the simulator.

Closed intervals (finished runs) are charged to the policy's own `UsageWindow`; the open intervals
of funded running jobs, which `UsageWindow.usage(now, running=...)` would sum job by job at every
cycle, are kept here as per-project sums so a cycle's usage costs O(projects), not O(running jobs):

- window: a run started at s contributes w·(now − max(s, now − W)), so per project
  Σ = G_recent·now − S_recent + G_old·W, where "recent" runs started inside the window (G: weighted
  GPUs, S: Σ weighted GPUs × start) and "old" ones before it; runs move from recent to old as the
  window's left edge passes their start.
- decay: a run contributes w·(1 − e^(−k(now − s)))/k, so Σ = (G − e^(−k(now − r))·E)/k with
  E = Σ w·e^(k(s − r)) against a reference time r: 0 until k(t − r) passes `REBASE` (e^709.8 is the float
  range: a trace in epoch seconds under a 7-day half-life, or a tiny half-life, overflowed), then E is
  scaled to r = t. Runs that never pass it (every trace measured, docs/results.md) compute what they did.

The figures equal `UsageWindow.usage(now, running)` (a unit test checks it to 1e-9 relative).
"""

from __future__ import annotations

import heapq
import math

from steward.domain.policy_settings import PolicySettings
from steward.policy.usage import LN2, Interval, UsageWindow

REBASE = 512.0
"""Decay mode: k·(t − r) past which E is moved to a later reference time r (e^512 ≈ 1e222 leaves room for
Σ w over any trace below the float range, e^709.8)."""


class SimUsage:
    def __init__(self, settings: PolicySettings) -> None:
        self.settings = settings
        self.closed = UsageWindow(settings)
        self.decay = settings.usage_mode == "decay"
        self.window = settings.window_s
        self.k = LN2 / settings.half_life_s
        self.g_recent: dict[str, float] = {}
        self.s_recent: dict[str, float] = {}
        self.g_old: dict[str, float] = {}
        self.e_sum: dict[str, float] = {}
        self.ref = 0.0  # decay: the reference time r of E (module docstring)
        self.old: set[str] = set()  # run keys already past the window's left edge
        self.heap: list[tuple[float, str, str, float]] = []  # (start, run key, project, weighted gpus)
        self.open_runs: dict[str, tuple[str, float, float, int, str]] = {}  # key -> project, start, wg, ...

    def start(self, key: str, project: str, start: float, gpus: int, model: str = "default") -> None:
        """A funded run begins (`key` names this run, not the job: a job restarts under a new key)."""
        wg = gpus * self.settings.model_weight(model)
        self.open_runs[key] = (project, start, wg, gpus, model)
        if self.decay:
            self._rebase(start)
            self.g_recent[project] = self.g_recent.get(project, 0.0) + wg
            self.e_sum[project] = self.e_sum.get(project, 0.0) + wg * math.exp(self.k * (start - self.ref))
            return
        self.g_recent[project] = self.g_recent.get(project, 0.0) + wg
        self.s_recent[project] = self.s_recent.get(project, 0.0) + wg * start
        heapq.heappush(self.heap, (start, key, project, wg))

    def end(self, key: str, end: float) -> None:
        """The run stops at `end`: its interval becomes a closed one of the policy's `UsageWindow`."""
        project, start, wg, gpus, model = self.open_runs.pop(key)
        if self.decay:
            self.g_recent[project] -= wg
            self.e_sum[project] -= wg * math.exp(self.k * (start - self.ref))
        elif key in self.old:
            self.old.discard(key)
            self.g_old[project] -= wg
        else:
            self.g_recent[project] -= wg
            self.s_recent[project] -= wg * start
        if end > start:
            self.closed.add(Interval(project, start, end, gpus, model))

    def usage(self, now: float) -> dict[str, float]:
        out = self.closed.usage(now)
        if self.decay:
            self._rebase(now)
            scale = math.exp(-self.k * (now - self.ref))
            for project, g in self.g_recent.items():
                if g:
                    out[project] = out.get(project, 0.0) + max(0.0, (g - scale * self.e_sum[project]) / self.k)
            return out
        left = now - self.window
        heap = self.heap
        while heap and heap[0][0] < left:
            start, key, project, wg = heapq.heappop(heap)
            if key not in self.open_runs or self.open_runs[key][1] != start:
                continue  # ended already
            self.old.add(key)
            self.g_recent[project] -= wg
            self.s_recent[project] -= wg * start
            self.g_old[project] = self.g_old.get(project, 0.0) + wg
        for project, g in self.g_recent.items():
            c = g * now - self.s_recent[project] + self.g_old.get(project, 0.0) * self.window
            if c:
                out[project] = out.get(project, 0.0) + max(0.0, c)
        for project, g in self.g_old.items():
            if g and project not in self.g_recent:
                out[project] = out.get(project, 0.0) + g * self.window
        return out

    def _rebase(self, t: float) -> None:
        """Decay: move E's reference time to `t` once k·(t − r) passes `REBASE` (module docstring)."""
        if self.k * (t - self.ref) <= REBASE:
            return
        scale = math.exp(-self.k * (t - self.ref))
        for project in self.e_sum:
            self.e_sum[project] *= scale
        self.ref = t
