"""The contract's times have one home (issue 19, "One home for each rule"): the ledger's placement record,
the policy's protection and session cap (the scheduler and the simulator) and the Session workflow's
warnings are the same numbers for the same job and policy. Before, a session that asked for a shorter cap
was protected for its `min_runtime` by the ledger and the workflows but for the policy's whole cap by the
scheduler, and an operator's `max_min_runtime_s` bounded only the scheduler's protection."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest

from steward.domain import protection
from steward.domain.decide import placement_contract
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import Job
from steward.policy import contract, sessions
from steward.policy.model import JobClass
from steward_workflows.session import warning_times
from tests.unit.policy.builders import pending, running

H = 3600.0

CASES = [
    # (name, class, min_runtime_s, session cap, max min_runtime)
    ("batch", "batch", 2 * H, 8 * H, 8 * H),
    ("batch beyond the policy's cap", "batch", 6 * H, 8 * H, 4 * H),
    ("session with the policy's cap", "interactive", 0.0, 6 * H, 8 * H),
    ("session asking for a shorter cap", "interactive", 2 * H, 6 * H, 8 * H),
    ("session cap beyond the contract's", "interactive", 0.0, 10 * H, 8 * H),
]


def _job(klass: str, min_runtime_s: float) -> Job:
    return Job(job_id="j", project="a", gpus=1, min_runtime_s=min_runtime_s, command=("true",), resumable=True,
               job_class=klass,
               priority=0, submitted_at=0.0)


@pytest.mark.parametrize(("name", "klass", "min_runtime_s", "cap_s", "max_s"), CASES, ids=[c[0] for c in CASES])
def test_the_ledger_and_the_policy_protect_for_the_same_time(name: str, klass: str, min_runtime_s: float,
                                                             cap_s: float, max_s: float) -> None:
    settings = replace(PolicySettings(), session_cap_s=cap_s, max_min_runtime_s=max_s)
    recorded = placement_contract(_job(klass, min_runtime_s), True, cap_s, max_s)
    planned = contract.protection_s(cast(JobClass, klass), min_runtime_s, settings)
    assert recorded["protection_s"] == planned == protection.protection_s(klass, min_runtime_s, True, cap_s, max_s)
    assert recorded["protection_s"] <= max_s
    if klass == "interactive":
        job = running("j", started_at=100.0, klass="interactive", min_runtime_s=min_runtime_s)
        cap = float(str(recorded["session_cap_s"]))
        assert sessions.session_cap_at(job, settings) == 100.0 + cap == 100.0 + planned


def test_warnings_are_the_same_for_the_scheduler_and_the_workflow() -> None:
    settings = replace(PolicySettings(), session_cap_s=H, session_warnings_s=(1800.0, 300.0, 2 * H, 0.0))
    job = running("j", started_at=0.0, klass="interactive", min_runtime_s=0.0)
    cap = sessions.session_cap_at(job, settings)
    assert sessions.session_warning_times(job, settings) == tuple(warning_times(0.0, cap, [1800.0, 300.0, 2 * H, 0.0]))
    assert sessions.session_warning_times(job, settings) == (1800.0, 3300.0)  # none at or before the start


def test_unfunded_work_has_no_protection_and_the_policys_unfunded_grace() -> None:
    settings = replace(PolicySettings(), unfunded_grace_s=5.0)
    assert contract.protected_until(pending("j"), 10.0, False, settings) == 10.0
    assert contract.grace_s(False, settings) == 5.0 == protection.grace_s(False, settings.preemption_grace_s, 5.0)
    assert contract.grace_s(True, settings) == settings.preemption_grace_s
