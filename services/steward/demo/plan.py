"""The demo's replay plan: a slice of the Philly scenario trace, compressed in time by a factor S.

Pure functions of the scenario and the demo's options (no IO, no clock): what to submit and when (in real
seconds after the demo's start), the policy settings and the workflow timings scaled by the same S, and
the interactive sessions the driver opens and restores. docs/adr/0009-demo-time-compression.md says why
time is compressed this way and where the compression stops being faithful.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steward.config import REPO_ROOT
from steward.domain.policy_settings import PolicySettings
from steward.sim.scenario import Scenario, ScenarioPolicy, TraceJob

SAMPLE = REPO_ROOT / "examples" / "resumable_train.py"
DAY_S = 86400.0
# The contract's session warnings (DESIGN.md "Interactive sessions": 30 and 5 minutes before the cap).
SESSION_WARNINGS_S = (1800.0, 300.0)
# A real step of the sample job; shorter jobs take one step of their whole length.
STEP_S = 1.0
# The sample job's share of each step spent computing: the local node's real processes stay light.
WORK_FRACTION = 0.02


class PlanError(ValueError):
    """Demo options that cannot make a replay; the message names the option."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    speed: float = 120.0
    """S: trace seconds per real second."""
    start_day: float = 28.0
    """Where the slice starts in the trace (days after its first submission)."""
    hours: float = 24.0
    """The slice's length in trace hours (real minutes = hours x 60 / S)."""
    warm_factor: float = 1.5
    """Jobs still running at the slice's start are submitted at once, up to this many times the cluster's
    GPUs (oldest first): the cluster starts as busy as the trace had it instead of empty."""
    sessions: int = 4
    session_cap_h: float = 1.0
    """A demo session's cap in trace hours (the policy's default is 8 h)."""
    restore_after_min: float = 10.0
    """Trace minutes between a session stopping at its cap and the driver restoring it."""
    max_restores: int = 1000

    def check(self) -> None:
        if not (math.isfinite(self.speed) and self.speed >= 1):
            raise PlanError(f"--speed must be a number >= 1 (trace seconds per real second), got {self.speed}")
        if not (math.isfinite(self.start_day) and self.start_day >= 0):
            raise PlanError(f"--start-day must be >= 0, got {self.start_day}")
        if not (math.isfinite(self.hours) and self.hours > 0):
            raise PlanError(f"--hours must be > 0, got {self.hours}")
        if not (math.isfinite(self.warm_factor) and self.warm_factor >= 0):
            raise PlanError(f"--warm must be >= 0, got {self.warm_factor}")
        if self.sessions < 0:
            raise PlanError(f"--sessions must be >= 0, got {self.sessions}")
        if not 0 < self.session_cap_h <= 8:
            raise PlanError(f"--session-cap-hours must be in (0, 8], got {self.session_cap_h}")
        if not (math.isfinite(self.restore_after_min) and self.restore_after_min >= 0):
            raise PlanError(f"--restore-after-minutes must be >= 0, got {self.restore_after_min}")

    def real(self, trace_s: float) -> float:
        """A trace duration in real seconds."""
        return trace_s / self.speed


@dataclass(frozen=True, slots=True)
class Submission:
    """One trace job as the driver submits it: `at_s` and every duration are real seconds."""

    at_s: float
    job_id: str
    trace_id: str
    project: str
    gpus: int
    min_runtime_s: float
    duration_s: float
    resumable: bool
    job_class: str
    warm: bool

    def command(self) -> list[str]:
        """The sample job for `duration_s` real seconds: real steps on the local executor, and the same
        length (`--steps` x `--step-s`) on the simulated one."""
        return sample_command(self.duration_s)

    def input(self) -> dict[str, Any]:
        """The `submitJob` input."""
        return {"jobId": self.job_id, "project": self.project, "gpus": self.gpus,
                "minRuntimeS": round(self.min_runtime_s, 3), "resumable": self.resumable,
                "jobClass": self.job_class, "command": self.command()}


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """An interactive session the driver opens at `at_s`, restoring it `restore_after_s` after each cap."""

    at_s: float
    session_id: str
    project: str
    gpus: int
    cap_s: float
    restore_after_s: float
    max_restores: int

    def input(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "project": self.project, "gpus": self.gpus,
                "capS": round(self.cap_s, 3), "command": sample_command(0.0)}


def sample_command(duration_s: float) -> list[str]:
    """examples/resumable_train.py for `duration_s` real seconds (0: until stopped)."""
    if duration_s <= 0:
        steps, step_s = 0, STEP_S
    elif duration_s >= STEP_S:
        steps, step_s = max(1, round(duration_s / STEP_S)), STEP_S
    else:
        steps, step_s = 1, round(duration_s, 3)
    return ["python3", str(SAMPLE), "--steps", str(steps), "--step-s", f"{step_s:g}",
            "--work-fraction", f"{WORK_FRACTION:g}"]


def plan_slice(scenario: Scenario, options: DemoOptions, tag: str) -> tuple[list[Submission], list[TraceJob]]:
    """The slice [start_day, start_day + hours) of the trace, compressed by S, plus a warm start: the jobs
    the trace had running at the slice's start, submitted at once with what is left of their duration.
    Returns the submissions (by time) and the trace jobs left out (their tenant has no allocation in the
    tree, which the live ledger refuses: the offline simulator runs them unfunded)."""
    options.check()
    start = options.start_day * DAY_S
    end = start + options.hours * 3600.0
    projects = set(scenario.projects)
    skipped = [j for j in scenario.jobs if j.tenant not in projects and j.submit_s < end]
    jobs = [j for j in scenario.jobs if j.tenant in projects]
    out: list[Submission] = []
    budget = options.warm_factor * scenario.capacity
    used = 0
    for j in jobs:  # by submit time (the loader sorts them)
        if j.submit_s >= start:
            break
        left = j.submit_s + j.duration_s - start
        if left <= 0 or used + j.gpus > budget:
            continue
        used += j.gpus
        out.append(_submission(j, 0.0, left, options, tag, warm=True))
    for j in jobs:
        if start <= j.submit_s < end:
            out.append(_submission(j, options.real(j.submit_s - start), j.duration_s, options, tag, warm=False))
    out.sort(key=lambda s: (s.at_s, not s.warm))
    return out, [j for j in skipped if j.submit_s >= start or j.submit_s + j.duration_s > start]


def _submission(j: TraceJob, at_s: float, duration_s: float, o: DemoOptions, tag: str, warm: bool) -> Submission:
    return Submission(at_s=at_s, job_id=f"{tag}-{j.job_id}", trace_id=j.job_id, project=j.tenant, gpus=j.gpus,
                      min_runtime_s=o.real(j.min_runtime_s), duration_s=o.real(duration_s),
                      resumable=j.resumable, job_class=j.job_class, warm=warm)


def session_projects(scenario: Scenario, count: int) -> list[str]:
    """`count` projects taking turns across the top of the tree (one per division first), so that the
    sessions compete under different parents."""
    by_division: dict[str, list[str]] = {}
    for name in scenario.projects:
        top = name
        while (parent := scenario.allocations[top].parent) is not None:
            top = parent
        by_division.setdefault(top, []).append(name)
    order: list[str] = []
    columns = list(by_division.values())
    for i in range(max((len(c) for c in columns), default=0)):
        order.extend(c[i] for c in columns if i < len(c))
    return [order[i % len(order)] for i in range(count)] if order else []


def plan_sessions(scenario: Scenario, options: DemoOptions, tag: str, first_at_s: float = 15.0,
                  every_s: float = 15.0) -> list[SessionPlan]:
    """The demo's interactive sessions: one GPU each, opened `every_s` real seconds apart."""
    options.check()
    return [SessionPlan(at_s=first_at_s + i * every_s, session_id=f"{tag}-session-{i + 1}", project=p, gpus=1,
                        cap_s=options.real(options.session_cap_h * 3600.0),
                        restore_after_s=options.real(options.restore_after_min * 60.0),
                        max_restores=options.max_restores)
            for i, p in enumerate(session_projects(scenario, options.sessions))]


def policy_settings(policy: ScenarioPolicy, options: DemoOptions) -> dict[str, Any]:
    """The scenario's policy with every duration divided by S (`steward policy set`)."""
    s = options.speed
    return {
        "window_s": policy.window_days * DAY_S / s,
        "max_min_runtime_s": policy.max_min_runtime_s / s,
        "session_cap_s": policy.session_cap_s / s,
        "session_warnings_s": [w / s for w in SESSION_WARNINGS_S],
        "checkpoint_interval_s": policy.checkpoint_interval_s / s,
        "restart_overhead_s": policy.restart_overhead_s / s,
        "preemption_grace_s": policy.preemption_grace_s / s,
        # ADR 0028's durations, scaled like the rest (unscaled, the settle time would last hours of
        # the demo's virtual time)
        **{k: v / s for k in _CHURN_KNOBS if (v := getattr(_STEWARD, k)) is not None},
    }


_STEWARD = PolicySettings.steward()
_CHURN_KNOBS = ("settle_s", "claim_hold_s", "preemption_gain_horizon_s")


def sim_checkpoint_s(options: DemoOptions, trace_checkpoint_s: float = 30.0) -> float:
    """How long the simulated executor takes to write a checkpoint, in real seconds."""
    return trace_checkpoint_s / options.speed


def slice_figures(submissions: Sequence[Submission], skipped: Iterable[TraceJob]) -> dict[str, Any]:
    """What the plan holds (printed by the demo and written to its status)."""
    warm = [s for s in submissions if s.warm]
    later = [s for s in submissions if not s.warm]
    return {"warm_jobs": len(warm), "warm_gpus": sum(s.gpus for s in warm), "arrivals": len(later),
            "arrival_gpus": sum(s.gpus for s in later), "skipped_unallocated": len(list(skipped)),
            "last_arrival_s": round(max((s.at_s for s in later), default=0.0), 1)}


def default_scenario() -> Path:
    return REPO_ROOT.parent / "shared" / "data" / "scenarios" / "philly.yaml"
