"""The submit preview (DESIGN.md "The time-slicing contract": the researcher is told at submit when a job
will run unfunded, and why; "Debug quota": whether a job is qualified is shown at submit)."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import ENTITLEMENT_USED, NO_ALLOCATION, UNFUNDED_BY_REQUEST, funding_gap
from steward.policy.model import PendingJob, RunningJob
from steward.policy.outlook import duration, funded_by_project, funded_in_use, outlook
from tests.unit.policy.builders import HOUR, NOW, nested, pending, running

S = PolicySettings.steward()
# capacity 16: a1 is entitled to 0.5 * 0.5 * 16 = 4 GPUs, a2 to 4, b to 8
TREE = nested({"a": {"share": 0.5, "children": {"a1": 0.5, "a2": 0.5}}, "b": 0.5})
CAPACITY = 16.0

GAP_CASES: list[tuple[str, PendingJob, tuple[str, ...], dict[str, float], PolicySettings, str | None]] = [
    ("funded", pending("j", "a1"), ("a", "a1"), {"a1": 3.0}, S, None),
    ("no allocation", pending("j", "zz"), (), {}, S, NO_ALLOCATION),
    ("no protection asked", pending("j", "a1", min_runtime_s=0.0), ("a", "a1"), {}, S, UNFUNDED_BY_REQUEST),
    ("a session always asks", pending("j", "a1", min_runtime_s=0.0, klass="interactive"), ("a", "a1"), {}, S,
     None),
    ("entitlement used", pending("j", "a1"), ("a", "a1"), {"a1": 4.0}, S, ENTITLEMENT_USED),
    ("funding off: every job is funded", pending("j", "zz", min_runtime_s=0.0), (), {},
     PolicySettings.steward(funding=False), None),
]


@pytest.mark.parametrize(("name", "job", "path", "in_use", "settings", "gap"), GAP_CASES,
                         ids=[c[0] for c in GAP_CASES])
def test_funding_gap(name: str, job: PendingJob, path: tuple[str, ...], in_use: dict[str, float],
                     settings: PolicySettings, gap: str | None) -> None:
    quota = {"a": 8.0, "a1": 4.0}
    assert funding_gap(job, path, in_use, quota, settings) == gap


def test_the_memo_is_per_project_and_read_before_the_figures() -> None:
    """The cycle passes its memo: a project already known to have room is not checked again."""
    memo = {"a1": True}
    assert funding_gap(pending("j", "a1"), ("a", "a1"), {"a1": 99.0}, {"a1": 4.0}, S, memo) is None
    memo.clear()
    assert funding_gap(pending("j", "a1"), ("a", "a1"), {"a1": 99.0}, {"a1": 4.0}, S, memo) == ENTITLEMENT_USED
    assert memo == {"a1": False}


def test_funded_in_use_charges_every_level_of_funded_work_only() -> None:
    jobs = [running("r1", "a1", gpus=2), running("r2", "a2", gpus=1), running("r3", "a1", gpus=5, funded=False)]
    assert funded_in_use(funded_by_project(jobs), TREE) == {"a": 3.0, "a1": 2.0, "a2": 1.0}


def test_a_caller_may_tally_funded_gpus_itself() -> None:
    """The API passes the funded GPUs per project and only the project's own running work: same answer."""
    job = pending("j", "a1", min_runtime_s=600.0)
    others = [_run(4, "a1"), _run(1, "a2")]
    full = outlook(job, TREE, CAPACITY, others, [], S)
    tallied = outlook(job, TREE, CAPACITY, [others[0]], [], S, funded_gpus=funded_by_project(others))
    assert full == tallied and full.reason == ENTITLEMENT_USED


def _run(gpus: int, project: str = "a1", funded: bool = True, **kw: object) -> RunningJob:
    return running(f"r-{project}-{gpus}-{funded}-{len(kw)}", project, gpus=gpus, funded=funded, **kw)  # type: ignore[arg-type]


OUTLOOK_CASES: list[tuple[str, PendingJob, list[RunningJob], str, float, str]] = [
    ("room left: funded with its protection", pending("j", "a1", min_runtime_s=600.0), [_run(3)], "funded", 600.0,
     "funded: protected for 10m from each start ('a1' has 3 of 4 entitled GPUs in use)"),
    ("asks no protection", pending("j", "a1", min_runtime_s=0.0), [], UNFUNDED_BY_REQUEST, 0.0,
     "it asks for no protection (min runtime 0)"),
    ("entitlement used, with the figures", pending("j", "a1", min_runtime_s=600.0), [_run(4)], ENTITLEMENT_USED,
     0.0, "'a1' has 4 of its 4 entitled GPUs in use by funded work; the 10m of protection asked for"),
    ("unfunded work does not use the entitlement", pending("j", "a1", min_runtime_s=600.0),
     [_run(4, funded=False)], "funded", 600.0, "funded: protected for 10m"),
    ("not a project", pending("j", "a", min_runtime_s=600.0), [], NO_ALLOCATION, 0.0,
     "'a' has no allocation in the tree"),
]


@pytest.mark.parametrize(("name", "job", "run", "reason", "protection", "says"), OUTLOOK_CASES,
                         ids=[c[0] for c in OUTLOOK_CASES])
def test_outlook_funding(name: str, job: PendingJob, run: list[RunningJob], reason: str, protection: float,
                         says: str) -> None:
    o = outlook(job, TREE, CAPACITY, run, [], S)
    assert (o.reason, o.funded, o.protection_s) == (reason, reason == "funded", protection)
    assert says in o.message
    assert o.qualification is None  # batch work: no debug quota to report
    assert o.to_dict()["reason"] == reason


def test_entitlement_used_names_the_allocation_and_its_figures() -> None:
    o = outlook(pending("j", "a1", min_runtime_s=600.0), TREE, CAPACITY, [_run(4), _run(1, "a2")], [], S)
    assert (o.allocation, o.in_use_gpus, o.entitled_gpus, o.asked_protection_s) == ("a1", 4.0, 4.0, 600.0)


DEBUG = {"klass": "debug", "min_runtime_s": 300.0, "submitted_at": NOW}


def test_debug_work_inside_the_quota_is_qualified_and_says_so() -> None:
    tree = TREE.with_debug_quota("a1", 3)
    o = outlook(pending("j", "a1", gpus=1, **DEBUG), tree, CAPACITY,  # type: ignore[arg-type]
                [_run(1, klass="debug", min_runtime_s=300.0, submitted_at=NOW - HOUR)],
                [pending("w", "a1", gpus=1, klass="debug", min_runtime_s=300.0, submitted_at=NOW - 1)], S)
    q = o.qualification
    assert q is not None and (q.qualified, q.reason, q.quota_gpus, q.in_use_gpus, q.ahead_gpus) == (
        True, "within_quota", 3, 1, 1)
    assert "debug: qualified: inside 'a1' debug quota of 3 GPUs (1 running, 1 waiting ahead)" in o.message


def test_debug_work_beyond_the_quota_is_over_quota_and_queues_as_funded_work() -> None:
    tree = TREE.with_debug_quota("a1", 1)
    o = outlook(pending("j", "a1", gpus=1, **DEBUG), tree, CAPACITY,  # type: ignore[arg-type]
                [_run(1, klass="debug", min_runtime_s=300.0, submitted_at=NOW - HOUR)], [], S)
    assert o.qualification is not None and o.qualification.reason == "over_quota"
    assert o.funded and "queues as ordinary funded work" in o.message


def test_a_long_debug_job_is_not_debug_work() -> None:
    o = outlook(pending("j", "a1", klass="debug", min_runtime_s=4 * HOUR), TREE, CAPACITY, [], [], S)
    assert o.qualification is not None and o.qualification.reason == "not_debug"
    assert "at most 2 GPUs asking for at most 15m" in o.message


def test_the_job_itself_among_the_waiting_is_not_counted_ahead_of_itself() -> None:
    job = pending("j", "a1", gpus=2, **DEBUG)  # type: ignore[arg-type]
    o = outlook(job, TREE.with_debug_quota("a1", 2), CAPACITY, [], [job], S)
    assert o.qualification is not None and o.qualification.qualified


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (90, "1m30s"), (600, "10m"), (7200, "2h"),
                                               (3661, "1h1m1s")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_qualified_debug_work_is_funded_by_the_lane_when_the_entitlement_is_used() -> None:
    """ADR 0029 (contract.lane_funds): inside its debug quota, a debug job runs funded although its
    allocation has no entitlement left; over the quota it would run unfunded, and the preview says why."""
    used = [_run(4)]  # a1's 4 entitled GPUs are in use by funded batch work
    job = pending("j", "a1", gpus=1, **DEBUG)  # type: ignore[arg-type]
    inside = outlook(job, TREE.with_debug_quota("a1", 2), CAPACITY, used, [], S)
    assert (inside.funded, inside.funded_by_lane, inside.reason, inside.protection_s) == (True, True, "funded", 300.0)
    assert inside.message.startswith("funded by the debug lane: protected for 5m from each start")
    over = outlook(job, TREE.with_debug_quota("a1", 0), CAPACITY, used, [], S)
    assert (over.funded, over.funded_by_lane, over.reason) == (False, False, ENTITLEMENT_USED)
    assert "no allocation left" in over.message and "over 'a1' debug quota of 0 GPUs" in over.message


def test_the_lane_does_not_fund_work_that_asks_for_no_protection() -> None:
    session = pending("s", "a", min_runtime_s=0.0, klass="interactive")  # 'a' is not a project: no allocation
    o = outlook(session, TREE, CAPACITY, [], [], S)
    assert (o.funded, o.funded_by_lane, o.reason) == (False, False, NO_ALLOCATION)
