"""The scheduler's bridge: ledger state -> policy snapshot -> commands, with concrete GPU indices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from steward.domain.commands import (
    PlaceJob,
    RegisterNode,
    ReportJobPreempted,
    ReportJobStarted,
    RequestPreemption,
    SetAllocations,
)
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import LedgerState
from steward.policy.cycle import schedule
from steward.scheduler.bridge import commands_of, policy_node, snapshot_of
from tests.unit.domain.builders import apply, place, submit, tree

SETTINGS = PolicySettings.steward()


def cluster(nodes: int = 2, gpus: int = 4) -> LedgerState:
    state = tree(cluster={"a": 0.5, "b": 0.5}, a={"a1": 1.0}, b={"b1": 1.0})
    return apply(state, *[RegisterNode(f"n{i}", gpus, "V100", ["blk0", f"n{i}"]) for i in range(nodes)])


def decide_cycle(state: LedgerState, now: float = 1000.0) -> list[PlaceJob | RequestPreemption]:
    return commands_of(schedule(snapshot_of(state, {}, SETTINGS, now)), state, SETTINGS.preemption_grace_s)


def test_node_path_drops_the_node_itself() -> None:
    state = cluster(1)
    assert policy_node(state.nodes["n0"]).path == ("blk0",)


def test_root_allocations_become_top_level_of_the_policy_tree() -> None:
    snap = snapshot_of(cluster(), {}, SETTINGS, 0.0)
    assert snap.tree.entitlement("a1") == pytest.approx(0.5)
    assert snap.tree.parent("a") is None


def test_waiting_jobs_get_concrete_free_gpu_indices_without_overlap() -> None:
    state = apply(cluster(1, 4), submit("j1", "a1", gpus=2), submit("j2", "b1", gpus=2))
    cmds = decide_cycle(state)
    placed = [c for c in cmds if isinstance(c, PlaceJob)]
    assert {c.job_id for c in placed} == {"j1", "j2"}
    indices = [g for c in placed for gs in c.assignments.values() for g in gs]
    assert sorted(indices) == [0, 1, 2, 3]
    assert all(c.evidence for c in placed)


def test_gpus_held_by_placed_jobs_are_not_reused() -> None:
    state = apply(cluster(1, 4), submit("j0", "a1", gpus=3), place("j0", n0=[0, 1, 2]), submit("j1", "b1", gpus=1))
    (cmd,) = decide_cycle(state)
    assert isinstance(cmd, PlaceJob) and cmd.assignments == {"n0": [3]}


def test_unfunded_running_job_is_preempted_for_funded_waiting_work() -> None:
    state = apply(cluster(1, 4), submit("u", "a1", gpus=4, min_runtime_s=0), place("u", n0=[0, 1, 2, 3]))
    state = apply(state, ReportJobStarted("u", 1, 42), now=10.0)
    state = apply(state, submit("f", "b1", gpus=4, min_runtime_s=600), now=20.0)
    # the job ran unfunded (no allocation left when it started): preemptible at once
    state = replace(state, jobs={**state.jobs, "u": replace(state.jobs["u"], funded=False, protected_until=10.0)})
    # ADR 0028: not before it has run its settle time (300 s from its start at 10)
    assert not [c for c in decide_cycle(state, now=30.0) if isinstance(c, RequestPreemption)]
    cmds = decide_cycle(state, now=310.0)
    pre = [c for c in cmds if isinstance(c, RequestPreemption)]
    assert [(p.job_id, p.for_job_id) for p in pre] == [("u", "f")]
    assert pre[0].attempt == 1 and pre[0].evidence


def test_same_state_gives_the_same_commands() -> None:
    state = apply(cluster(2, 8), *[submit(f"j{i}", "a1" if i % 2 else "b1", gpus=1 + i % 3) for i in range(12)])
    assert decide_cycle(state) == decide_cycle(state)


def test_explanations_are_recorded_once_per_change_of_reason() -> None:
    from steward.scheduler.service import SchedulerState, changed_explanations

    view = SchedulerState(SETTINGS)
    view.state = apply(cluster(1, 4), submit("big", "a1", gpus=4), place("big", n0=[0, 1, 2, 3]),
                       submit("w", "b1", gpus=2))
    result = schedule(snapshot_of(view.state, {}, SETTINGS, 1000.0))
    (first,) = changed_explanations(view, result)
    assert set(first.explanations) == {"w"}
    assert first.explanations["w"]["reason"] and first.explanations["w"]["text"]
    assert changed_explanations(view, result) == []
    view.explained["w"] = ("something_else", 0, "")
    assert len(changed_explanations(view, result)) == 1


def test_deferred_events_only_for_jobs_still_waiting() -> None:
    from steward.domain.commands import ExplainWaiting
    from steward.domain.decide import decide

    state = apply(cluster(1, 4), submit("q", "a1"), submit("p", "b1"), place("p", n0=[0]))
    events = decide(state, ExplainWaiting({"q": {"reason": "r"}, "p": {"reason": "r"}, "gone": {"reason": "r"}}), 0.0)
    assert [(e.type, e.stream) for e in events] == [("JobDeferred", "job-q")]


def test_recorded_policy_settings_drive_the_cycle(tmp_path: object) -> None:
    from pathlib import Path

    from steward.domain.commands import SetPolicy
    from steward.ledger.ledger import Ledger
    from steward.scheduler.service import SchedulerState
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade
    from tests.unit.ledger.test_ledger_core import msg

    url = f"sqlite:///{Path(str(tmp_path)) / 'store.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    Ledger(store).process([msg(SetPolicy({"window_s": 3600.0, "ordering": "fifo_priority"}, "test"))], {})
    view = SchedulerState(SETTINGS)
    view.catch_up(store)
    assert view.follow_policy(store)
    assert view.settings.window_s == 3600.0 and view.settings.ordering == "fifo_priority"
    assert view.usage.settings.window_s == 3600.0
    assert not view.follow_policy(store)


def test_the_beneficiary_of_a_preemption_reaches_the_policy_in_grace_and_after_the_stop() -> None:
    """ADR 0021: a victim in its grace carries the job it stops for (`RunningJob.claimed_for`); once it
    stopped and was requeued, that job's `PendingJob.room_freed_at` is the stop, until the victim runs
    again."""
    state = apply(cluster(1, 4), submit("u", "a1", gpus=4, min_runtime_s=0), place("u", n0=[0, 1, 2, 3]))
    state = apply(state, ReportJobStarted("u", 1, 42), now=10.0)
    state = apply(state, submit("f", "b1", gpus=4, min_runtime_s=600), now=20.0)
    state = apply(state, RequestPreemption("u", "unfunded", 1, 20.0, True, for_job_id="f"), now=30.0)
    snap = snapshot_of(state, {}, SETTINGS, 40.0)
    assert [(r.id, r.claimed_for) for r in snap.running] == [("u", "f")]
    assert {j.id: j.room_freed_at for j in snap.pending} == {"f": None}
    state = apply(state, ReportJobPreempted("u", 1, "unfunded", 0), now=50.0)
    snap = snapshot_of(state, {}, SETTINGS, 60.0)
    assert {j.id: j.room_freed_at for j in snap.pending} == {"f": 50.0, "u": None}
    assert state.jobs["u"].preemption_for == "f" and state.jobs["u"].preemption_requested_at is None
    # the victim placed again forgets whom it stopped for
    state = apply(state, place("u", n0=[0, 1, 2, 3]))
    assert state.jobs["u"].preemption_for == ""


def test_the_policy_tree_carries_the_debug_quotas_managers_set() -> None:
    """DESIGN.md "Debug quota": a quota set in the ledger reaches the cycle's tree; unset ones stay default."""
    state = apply(cluster(), SetAllocations("a", {}, "debug burst", {"a1": 3}))
    tree_ = snapshot_of(state, {}, SETTINGS, 0.0).tree
    assert (tree_.debug_quota("a1"), tree_.debug_quota("b1")) == (3, None)
