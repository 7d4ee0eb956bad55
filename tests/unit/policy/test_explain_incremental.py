"""ADR 0031: the scheduler records "why pending" only for the jobs whose reason changed, comparing
summaries (reason, blocking GPUs, scope) computed once per class of jobs instead of building every
explanation. What a user reads must stay correct and current: a summary equals its explanation's
key, the recorded set equals what a full explanation of every job would record, and an
explanation is recorded again exactly when its cause changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import ENTITLEMENT_USED, NO_ALLOCATION
from steward.policy.cycle import schedule
from steward.policy.explain import Explanations
from steward.policy.model import CycleResult, PendingJob, RunningJob, Snapshot
from steward.policy.reasons import TOO_LARGE, WAITING_FOR_PROTECTION
from steward.scheduler.service import SchedulerState, changed_explanations
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree

SETTINGS = PolicySettings.steward()


def full_keys(result: CycleResult) -> dict[str, tuple[str, int, str]]:
    """The reference: every explanation built in full."""
    return {e.job_id: (e.reason, e.blocking_gpus, e.blocking_scope) for e in result.explanations.values()}


def recorded(view: SchedulerState, result: CycleResult) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for command in changed_explanations(view, result):
        out.update(command.explanations)
    return out


# ---------------------------------------------------------------- the equality, on random states


PROJECTS = ("a", "b", "c", "orphan")


@st.composite
def states(draw: st.DrawFn) -> Snapshot:
    """Small clusters, nearly full, with a queue whose jobs often share a class (so the memo is
    exercised) and large gangs (so reservations and the jobs behind them are)."""
    n = draw(st.integers(1, 6))
    cluster = nodes(n, per_block=2)
    free = {node.id: node.gpus for node in cluster}
    jobs: list[RunningJob] = []
    for k in range(draw(st.integers(0, 3 * n))):
        nid = f"n{draw(st.integers(0, n - 1))}"
        g = min(free[nid], draw(st.sampled_from((1, 2, 4, 8))))
        if g == 0:
            continue
        free[nid] -= g
        jobs.append(running(
            f"r{k}", draw(st.sampled_from(PROJECTS[:3])), g, on=nid,
            started_at=NOW - draw(st.sampled_from((600.0, 2 * HOUR, 5 * HOUR))),
            protected_for=draw(st.sampled_from((0.0, HOUR, 3 * HOUR, 8 * HOUR))),
            funded=draw(st.booleans()),
        ))
    waiting: list[PendingJob] = []
    for k in range(draw(st.integers(1, 20))):
        g = draw(st.sampled_from((1, 2, 4, 8, 16, 32)))
        waiting.append(pending(
            f"p{k}", draw(st.sampled_from(PROJECTS)), g, submitted_at=float(draw(st.integers(0, 5))),
            min_runtime_s=draw(st.sampled_from((0.0, 1800.0, HOUR, 4 * HOUR))),
            klass="batch" if g > 8 else draw(st.sampled_from(("batch", "batch", "debug", "interactive"))),
            topology_depth=draw(st.sampled_from((None, 1))) if g > 8 else None,
            priority=draw(st.sampled_from((0, 0, 1))),
        ))
    shares = draw(st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3))
    total = sum(shares)
    usage = {p: draw(st.floats(0.0, 1e6)) for p in PROJECTS[:3]}
    return snapshot(
        nodes=cluster, tree=tree(**{p: s / total for p, s in zip(PROJECTS[:3], shares, strict=True)}),
        usage=usage, running=jobs, pending=waiting, settings=SETTINGS, levels=("block",),
    )


@settings(max_examples=150, deadline=None)
@given(states())
def test_a_summary_is_the_key_of_its_explanation(snap: Snapshot) -> None:
    result = schedule(snap)
    assert isinstance(result.explanations, Explanations)
    assert dict(result.explanations.summaries()) == full_keys(result)
    # phase 9's figures, taken without the list of waiting jobs, are those of the list
    waiting = [j for j in snap.pending if j.id in result.explanations]
    assert result.evidence["waiting"] == len(waiting) == len(result.explanations)
    assert result.evidence["largest_waiting_gang"] == max((j.gpus for j in waiting), default=0)


@settings(max_examples=100, deadline=None)
@given(states(), st.data())
def test_the_recorded_explanations_are_those_a_full_explanation_records(snap: Snapshot, data: st.DataObject) -> None:
    """Whatever was recorded before (random keys, some current, some stale), the incremental
    scheduler records exactly the jobs whose full explanation's key differs, in full."""
    result = schedule(snap)
    keys = full_keys(result)
    before: dict[str, tuple[str, int, str]] = {}
    for job_id, key in keys.items():
        choice = data.draw(st.sampled_from(("same", "stale", "absent")))
        if choice == "same":
            before[job_id] = key
        elif choice == "stale":
            before[job_id] = (key[0], key[1] + 1, key[2])
    view = SchedulerState(SETTINGS)
    view.explained = dict(before)
    got = recorded(view, result)
    assert set(got) == {j for j, k in keys.items() if before.get(j) != k}
    for job_id, data_ in got.items():
        e = result.explanations[job_id]
        assert (data_["reason"], data_["blocking_gpus"], data_["blocking_scope"]) == keys[job_id]
        assert data_["text"] == e.text and data_["position"] == e.position
    assert view.explained == keys


# ---------------------------------------------------------------- a cause changes, the record follows


@dataclass(frozen=True)
class Case:
    """The base cluster (2 nodes, both full of protected work; `w` waits for 4 GPUs, `g` for 16, `x`
    has no allocation) with one cause changed."""

    name: str
    change: dict[str, Any]
    job: str
    before: str
    after: str | None  # None: no longer waiting


def base(**change: Any) -> Snapshot:
    kw: dict[str, Any] = {
        "nodes": nodes(2, per_block=2),
        "tree": tree(a=0.4, b=0.4, c=0.2),
        "usage": {"a": 0.0, "b": 0.0, "c": 0.0},
        "running": [
            running("ra", "a", 8, on="n0", started_at=NOW, protected_for=3 * HOUR),
            running("rb", "b", 8, on="n1", started_at=NOW, protected_for=HOUR),
        ],
        "pending": [
            pending("w", "c", 4, submitted_at=1),
            pending("g", "c", 16, submitted_at=2),
            pending("x", "zzz", 2, submitted_at=3),
        ],
        "settings": SETTINGS,
        "levels": ("block",),
    }
    kw.update(change)
    return snapshot(**kw)


CASES = [
    Case("its allocation is removed from the tree", {"tree": tree(a=0.5, b=0.5)}, "w",
         WAITING_FOR_PROTECTION, NO_ALLOCATION),
    Case("its allocation's funded GPUs reach its entitlement",
         {"running": [running("ra", "a", 8, on="n0", started_at=NOW, protected_for=3 * HOUR),
                      running("rc", "c", 8, on="n1", started_at=NOW, protected_for=HOUR)]},
         "w", WAITING_FOR_PROTECTION, ENTITLEMENT_USED),
    Case("a node leaves and the gang can never fit",
         {"nodes": nodes(1), "running": [running("ra", "a", 8, on="n0", started_at=NOW, protected_for=3 * HOUR)]},
         "g", WAITING_FOR_PROTECTION, TOO_LARGE),
    Case("the GPUs it waited for free up", {"running": [running("ra", "a", 8, on="n0", started_at=NOW,
                                                                protected_for=3 * HOUR)]},
         "w", WAITING_FOR_PROTECTION, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_explanation_is_recorded_again_when_its_cause_changes(case: Case) -> None:
    view = SchedulerState(SETTINGS)
    first = schedule(base())
    assert first.explanations[case.job].reason == case.before
    assert case.job in recorded(view, first)
    assert recorded(view, first) == {}  # nothing changed: nothing recorded again

    second = schedule(base(**case.change))
    again = recorded(view, second)
    if case.after is None:
        assert case.job not in second.explanations and case.job not in view.explained
    else:
        assert again[case.job]["reason"] == case.after == second.explanations[case.job].reason
        assert again[case.job]["text"] == second.explanations[case.job].text
    assert "x" not in again  # a job whose cause did not change is not recorded again
    assert view.explained == full_keys(second)
