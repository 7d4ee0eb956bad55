"""The time-slicing contract (DESIGN.md "The time-slicing contract")."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import (
    asks_for_funding,
    funding_path,
    has_entitlement_left,
    is_protected,
    lost_gpu_s,
    lost_work_s,
    protected_until,
    protection_s,
    requeue,
    start,
)
from steward.policy.model import Placement
from tests.unit.policy.builders import HOUR, NOW, pending, running

S = PolicySettings()


@pytest.mark.parametrize(
    ("klass", "min_runtime", "expected"),
    [
        ("batch", 0.0, 0.0),
        ("batch", 2 * HOUR, 2 * HOUR),
        ("batch", 12 * HOUR, 8 * HOUR),  # capped by policy
        ("debug", 600.0, 600.0),
        ("interactive", 0.0, 8 * HOUR),  # a session is protected for its cap
    ],
)
def test_protection_is_min_runtime_capped_by_policy(klass, min_runtime, expected):
    assert protection_s(klass, min_runtime, S) == expected


def test_protection_runs_from_each_start_and_unfunded_has_none():
    job = pending("j", min_runtime_s=HOUR)
    assert protected_until(job, 100.0, True, S) == 100.0 + HOUR
    assert protected_until(job, 5000.0, True, S) == 5000.0 + HOUR
    assert protected_until(job, 100.0, False, S) == 100.0


@pytest.mark.parametrize(
    ("job", "funding", "expected"),
    [
        (pending("j", min_runtime_s=0.0), True, False),
        (pending("j", min_runtime_s=60.0), True, True),
        (pending("j", min_runtime_s=0.0, klass="interactive"), True, True),
        (pending("j", min_runtime_s=0.0), False, True),  # the pre-budget baseline funds everything
    ],
)
def test_min_runtime_zero_is_unfunded_by_choice(job, funding, expected):
    assert asks_for_funding(job, PolicySettings(funding=funding)) is expected


@pytest.mark.parametrize(
    ("in_use", "quota", "expected"),
    [
        ({}, {"d": 10, "p": 5}, None),
        ({"d": 4, "p": 4.9}, {"d": 10, "p": 5}, None),  # entitlement left, even if the job overshoots
        ({"d": 4, "p": 5}, {"d": 10, "p": 5}, "p"),
        ({"d": 10, "p": 1}, {"d": 10, "p": 5}, "d"),  # a parent without entitlement left blocks
    ],
)
def test_funded_while_the_allocation_has_entitlement_left(in_use, quota, expected):
    assert has_entitlement_left(("d", "p"), in_use, quota) == expected
    assert has_entitlement_left((), in_use, quota) == ""


@pytest.mark.parametrize(
    ("settings", "in_use", "expected"),
    [
        (PolicySettings.steward(), {"d": 10, "p": 1}, None),  # the sibling's overshoot is its own
        (PolicySettings.steward(), {"d": 4, "p": 5}, "p"),  # the project's own quota still binds
        (PolicySettings.ai2(), {"d": 10, "p": 1}, "d"),  # ADR 0002: every level
        (PolicySettings.fair_tree(), {"d": 10, "p": 1}, "d"),
        (PolicySettings.steward(overshoot_is_own=False), {"d": 10, "p": 1}, "d"),
    ],
    ids=["steward-sibling-overshoot", "steward-own-quota", "ai2", "fair-tree", "steward-switched-off"],
)
def test_a_siblings_overshoot_does_not_use_up_the_parent(settings, in_use, expected):
    """ADR 0017: d's quota 10 is full only because p's sibling ran its last job past its own share."""
    quota = {"d": 10, "p": 5}
    assert has_entitlement_left(funding_path(("d", "p"), settings), in_use, quota) == expected


@pytest.mark.parametrize(
    ("kw", "expected_s"),
    [
        ({"started_at": NOW - 1000, "last_checkpoint_at": None}, 1000 + 60),
        ({"started_at": NOW - 1000, "last_checkpoint_at": NOW - 100}, 100 + 60),
        ({"started_at": NOW - 1000, "last_checkpoint_at": NOW - 100, "resumable": False}, 1000 + 60),
    ],
    ids=["never-checkpointed", "recent-checkpoint", "not-resumable"],
)
def test_lost_work_is_since_last_checkpoint_plus_restart(kw, expected_s):
    job = running("r", gpus=4, **kw)
    assert lost_work_s(job, NOW, S) == expected_s
    assert lost_gpu_s(job, NOW, S) == 4 * expected_s


def test_protection_state():
    job = running("r", started_at=NOW - 10, protected_for=HOUR)
    assert is_protected(job, NOW)
    assert not is_protected(job, NOW + HOUR)
    assert not is_protected(running("u", funded=False, started_at=NOW), NOW)


def test_requeue_keeps_the_original_submit_time_and_start_builds_the_running_job():
    job = pending("j", "a", 2, submitted_at=123.0, min_runtime_s=HOUR, priority=3)
    run = start(job, Placement("j", "a", (("n0", 2),), True, NOW + HOUR, {}), NOW)
    assert run.protected_until == NOW + HOUR and run.funded and run.submitted_at == 123.0
    back = requeue(run)
    assert back == job
