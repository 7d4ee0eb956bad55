"""The debug lane (DESIGN.md "Debug quota and the time-to-first-GPU SLO"; ADR 0007, 0021, 0029).

A *lane job* is debug work (debug_quota.py `is_debug_work`: a session, or a small debug job asking
for short protection) when the policy has a lane. Each cycle places the *qualified* lane jobs (inside
their allocation's debug quota, debug_quota.py `qualify`) before the fair-share walk. A qualified job
that does not fit and would be funded is searched victims for before other blocked work: first
*unfunded* work only (it runs "only on idle capacity ... and is preemptible at once", with a short
grace), then funded work under the normal rules (out of protection, strict improvement), then, with
`lane_trade`, its own allocation's work (ADR 0021). Lane jobs over the quota queue as ordinary
funded work. The quota replaces ADR 0007's fixed per-allocation cap (`lane_project_gpus`).
"""

from __future__ import annotations

from steward.domain.policy_settings import PolicySettings
from steward.policy.debug_quota import is_debug_work
from steward.policy.model import JobClass, PendingJob


def is_lane_job(klass: JobClass, min_runtime_s: float, gpus: int, settings: PolicySettings) -> bool:
    """ADR 0007, 0029: debug work, when the policy has a lane (the baselines have none)."""
    return settings.lane and is_debug_work(klass, min_runtime_s, gpus, settings)


def lane_pending(job: PendingJob, settings: PolicySettings) -> bool:
    return is_lane_job(job.klass, job.min_runtime_s, job.gpus, settings)
