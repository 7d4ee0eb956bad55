"""The debug quota and qualification (DESIGN.md "Debug quota and the time-to-first-GPU SLO", ADR 0029)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.debug_quota import (
    Qualification,
    debug_quota_gpus,
    default_debug_quota_gpus,
    is_debug_work,
    qualify,
    qualify_all,
    qualify_in,
)
from steward.policy.errors import InvalidDebugQuota, UnknownAllocation
from steward.policy.model import AllocationTree
from tests.unit.policy.builders import nested, pending, running, tree

S = PolicySettings.steward()
MIN = 600.0  # a debug job's protection: 10 minutes


def dbg(id: str, project: str = "a", gpus: int = 1, at: float = 0.0, **kw: Any) -> Any:
    return pending(id, project, gpus, submitted_at=at, min_runtime_s=kw.pop("min_runtime_s", MIN),
                   klass=kw.pop("klass", "debug"), **kw)


def rdbg(id: str, project: str = "a", gpus: int = 1, at: float = 0.0, **kw: Any) -> Any:
    return running(id, project, gpus, submitted_at=at, min_runtime_s=kw.pop("min_runtime_s", MIN),
                   klass=kw.pop("klass", "debug"), **kw)


@pytest.mark.parametrize(("klass", "min_runtime_s", "gpus", "expected"), [
    ("debug", 600.0, 1, True),
    ("debug", 900.0, 2, True),           # at the limits of ADR 0007's small and short
    ("debug", 901.0, 1, False),          # asks for more protection than debug work does
    ("debug", 600.0, 3, False),          # larger than lane_max_gpus
    ("debug", 0.0, 1, False),            # unfunded by its own choice
    ("interactive", 0.0, 1, True),       # a session always
    ("interactive", 28800.0, 2, True),
    ("interactive", 28800.0, 4, False),
    ("batch", 600.0, 1, False),
])
def test_is_debug_work(klass: str, min_runtime_s: float, gpus: int, expected: bool) -> None:
    assert is_debug_work(klass, min_runtime_s, gpus, S) is expected


@pytest.mark.parametrize(("entitlement", "capacity", "share", "floor", "expected"), [
    (0.105, 320, 1.0, 4, 34),   # Philly's 6214e9: 33.6 GPUs of entitlement (the default share, 1.0)
    (0.105, 320, 0.5, 4, 17),   # share 0.5: 16.8
    (0.225, 320, 0.5, 4, 36),   # Philly's largest project, ee9e8c: 72 GPUs
    (0.02, 320, 1.0, 4, 6),     # Philly's smallest, ed69ec: 6.4 GPUs
    (0.02, 320, 0.5, 4, 4),     # share 0.5: 3.2 -> the floor
    (0.1, 48, 1.0, 4, 5),       # a 6-node cluster, a 10 % project: 4.8 GPUs
    (0.4, 48, 1.0, 4, 19),      # its 40 % neighbour: 19.2
    (0.25, 48, 0.5, 4, 6),      # share 0.5, four equal projects: 12 GPUs -> 6
    (1 / 6, 48, 0.5, 4, 4),     # six equal projects: 8 GPUs -> 4
    (0.0, 320, 0.5, 4, 4),      # no entitlement: the floor
    (0.5, 100, 0.0, 32, 32),    # share 0, floor 32: ADR 0007's fixed lane cap
    (0.5, 100, 1.0, 0, 50),
])
def test_default_quota(entitlement: float, capacity: float, share: float, floor: int, expected: int) -> None:
    s = S.with_(debug_quota_share=share, debug_quota_floor_gpus=floor)
    assert default_debug_quota_gpus(entitlement, capacity, s) == expected


@pytest.mark.parametrize(("quotas", "project", "expected"), [
    ({}, "a1", 24),                     # default: 1.0 x (0.5 x 0.5) x 96
    ({"a1": 3}, "a1", 3),               # set on the project
    ({"a1": 0}, "a1", 0),               # a manager may turn it off
    ({"a": 7}, "a1", 7),                # set on the parent: applies to each leaf below
    ({"a": 7}, "a2", 7),
    ({"a": 7, "a2": 1}, "a2", 1),       # the nearest set quota wins
    ({"a": 7}, "b", 4),                 # another branch: its default, 4 GPUs of entitlement
    ({}, "nobody", 0),                  # no allocation: no quota
])
def test_quota_of(quotas: dict[str, int], project: str, expected: int) -> None:
    t = AllocationTree.build([("a", None, 0.5), ("a1", "a", 0.5), ("a2", "a", 0.5), ("b", None, 0.5 / 12)],
                             debug_quotas=quotas)
    assert debug_quota_gpus(t, project, 96, S) == expected


@pytest.mark.parametrize(("quotas", "error"), [
    ({"x": 3}, UnknownAllocation),
    ({"a": -1}, InvalidDebugQuota),
    ({"a": 1.5}, InvalidDebugQuota),
    ({"a": True}, InvalidDebugQuota),
    ({"a": "3"}, InvalidDebugQuota),
])
def test_quota_validation(quotas: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=r"'x'|debug quota"):
        AllocationTree.build([("a", None, 0.5)], debug_quotas=quotas)


def test_quota_float_whole_number_and_nested_form_round_trip() -> None:
    t = nested({"a": {"share": 0.5, "debug_quota": 8.0, "children": {"a1": 0.5}}, "b": 0.5})
    assert t.debug_quota("a") == 8 and t.debug_quota("a1") == 8 and t.debug_quota("b") is None
    assert t.debug_quota_set_on("a1") == "a"
    assert AllocationTree.from_nested(t.to_nested()) == t
    assert t.with_share("b", 0.4).debug_quota("a1") == 8          # kept across a share change
    assert t.with_debug_quota("a", None).debug_quota("a1") is None
    assert t.with_debug_quota("b", 2) != t
    with pytest.raises(InvalidDebugQuota):
        t.with_debug_quota("b", -2)


JOB = dbg("j", at=100.0, gpus=2)


@pytest.mark.parametrize(("job", "quota", "running_", "waiting", "expected"), [
    # nothing else: within
    (JOB, 4, [], [], Qualification(True, "within_quota", 4, 0, 0)),
    # exactly fills the quota
    (JOB, 4, [rdbg("r", gpus=2, at=50.0)], [], Qualification(True, "within_quota", 4, 2, 0)),
    (JOB, 4, [rdbg("r", gpus=1, at=50.0)], [dbg("w", gpus=2, at=60.0)], Qualification(False, "over_quota", 4, 1, 2)),
    # running debug work submitted after it does not count against it (it ran in the ordinary order)
    (JOB, 4, [rdbg("r", gpus=2, at=150.0)], [], Qualification(True, "within_quota", 4, 0, 0)),
    # a leaving job (preemption requested) no longer counts
    (JOB, 2, [rdbg("r", gpus=2, at=50.0, preemption_requested_at=90.0)], [],
     Qualification(True, "within_quota", 2, 0, 0)),
    # other projects' work, batch work and unprotected debug work do not count
    (JOB, 2, [rdbg("r", "b", gpus=2), running("r2", "a", 2, submitted_at=1.0)],
     [dbg("w", "b", 2), pending("w2", "a", 2), dbg("w3", min_runtime_s=0.0)],
     Qualification(True, "within_quota", 2, 0, 0)),
    # waiting work after it does not count; the same submit time is ordered by id
    (JOB, 2, [], [dbg("z", at=100.0), dbg("a", at=100.0)], Qualification(False, "over_quota", 2, 0, 1)),
    (JOB, 2, [], [dbg("z", at=100.0), dbg("k", at=200.0)], Qualification(True, "within_quota", 2, 0, 0)),
    # a session counts as debug work
    (dbg("s", klass="interactive", min_runtime_s=0.0, at=100.0), 1, [rdbg("r", klass="interactive", at=1.0)], [],
     Qualification(False, "over_quota", 1, 1, 0)),
    # quota 0: nothing qualifies
    (JOB, 0, [], [], Qualification(False, "over_quota", 0, 0, 0)),
    # not debug work
    (pending("b", "a", 1, klass="batch"), 4, [], [], Qualification(False, "not_debug", 4, 0, 0)),
    (dbg("long", min_runtime_s=3600.0), 4, [], [], Qualification(False, "not_debug", 4, 0, 0)),
    (dbg("free", min_runtime_s=0.0), 4, [], [], Qualification(False, "unfunded_by_request", 4, 0, 0)),
])
def test_qualify(job: Any, quota: int, running_: list[Any], waiting: list[Any], expected: Qualification) -> None:
    assert qualify(job, quota, running_, waiting, S) == expected
    # the whole-queue form agrees on debug work
    if expected.reason in ("within_quota", "over_quota"):
        assert qualify_all({job.project: quota}, running_, [*waiting, job], S)[job.id] == expected


def test_no_allocation_and_the_preview_from_the_tree() -> None:
    t = tree(a=0.5)
    stray = dbg("s", "nobody")
    assert qualify_in(stray, t, 16, [], [], S) == Qualification(False, "no_allocation", 0, 0, 0)
    # a: 0.5 x 16 = 8 GPUs of entitlement, its default quota
    assert qualify_in(dbg("j", gpus=2, at=9.0), t, 16, [rdbg("r", gpus=2)], [], S).to_dict() == {
        "qualified": True, "reason": "within_quota", "quota_gpus": 8, "in_use_gpus": 2, "ahead_gpus": 0,
    }
    # over the quota: 7 of its debug GPUs run or wait ahead
    assert qualify_in(dbg("k", gpus=2, at=9.0), t, 16, [rdbg("r", gpus=2)], [dbg(f"w{i}", at=1.0) for i in range(5)],
                      S).reason == "over_quota"


def test_a_burst_qualifies_a_prefix() -> None:
    """Issue 4: a burst of 50 one-GPU debug jobs of one project; quota 8 -> the first 8 qualify."""
    burst = [dbg(f"j{i:02d}", at=float(i)) for i in range(50)]
    q = qualify_all({"a": 8}, [], burst, S)
    assert [q[j.id].qualified for j in burst] == [True] * 8 + [False] * 42
    assert q["j20"] == Qualification(False, "over_quota", 8, 0, 20)
