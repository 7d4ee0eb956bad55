"""The ledger's guards, case by case (DESIGN: org tree, contract shape, placement)."""

from __future__ import annotations

import pytest

from steward.domain.commands import (
    CancelJob,
    DrainNode,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    command_from_dict,
)
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import (
    CapacityConflict,
    DomainError,
    InvalidAllocation,
    InvalidCommand,
    InvalidTransition,
    UnknownProject,
)
from tests.unit.domain.builders import apply, place, small_cluster, submit, tree, with_nodes

ALLOCATION_CASES = [
    ("share above one", SetAllocations("cluster", {"x": 1.2}, "r"), InvalidAllocation, "'x'"),
    ("negative share", SetAllocations("cluster", {"x": -0.1}, "r"), InvalidAllocation, "'x'"),
    ("children over one", SetAllocations("a", {"a2": 0.5}, "r"), InvalidAllocation, "'a'"),
    ("unknown parent", SetAllocations("nope", {"x": 0.1}, "r"), InvalidAllocation, "'nope'"),
    ("re-parenting", SetAllocations("b", {"a1": 0.1}, "r"), InvalidAllocation, "'a1'"),
    ("root as child", SetAllocations("a", {"cluster": 0.0}, "r"), InvalidAllocation, "'cluster'"),
    ("no reason", SetAllocations("b", {"b2": 0.1}, " "), InvalidCommand, "reason"),
]


@pytest.mark.parametrize(("name", "command", "error", "names"), ALLOCATION_CASES,
                         ids=[c[0] for c in ALLOCATION_CASES])
def test_allocation_guards(name: str, command: SetAllocations, error: type[DomainError], names: str) -> None:
    with pytest.raises(error, match=names):
        decide(small_cluster(), command, 0.0)


def test_valid_allocation_change_is_recorded_with_its_reason() -> None:
    (event,) = decide(small_cluster(), SetAllocations("b", {"b2": 0.5}, "new project"), 5.0)
    assert event.type == "AllocationsSet"
    assert event.payload["reason"] == "new project"
    assert event.stream == "allocation-b"


def test_tree_depth_is_capped_at_eight() -> None:
    levels = {"cluster": {"l1": 1.0}} | {f"l{i}": {f"l{i + 1}": 1.0} for i in range(1, 8)}
    state = tree(**levels)
    with pytest.raises(InvalidAllocation, match="maximum depth"):
        decide(state, SetAllocations("l8", {"l9": 1.0}, "r"), 0.0)


SUBMIT_CASES = [
    ("zero gpus", submit(gpus=0), InvalidCommand, "gpus"),
    ("negative gpus", submit(gpus=-2), InvalidCommand, "gpus"),
    ("protection beyond 8 h", submit(min_runtime_s=9 * 3600), InvalidCommand, "min_runtime_s"),
    ("unknown class", submit(job_class="huge"), InvalidCommand, "job_class"),
    ("empty command", submit(command=[]), InvalidCommand, "command"),
    ("unknown project", submit(project="zz"), UnknownProject, "'zz'"),
    ("inner node is not a project", submit(project="a"), UnknownProject, "'a'"),
]


@pytest.mark.parametrize(("name", "command", "error", "names"), SUBMIT_CASES, ids=[c[0] for c in SUBMIT_CASES])
def test_submit_guards(name: str, command: object, error: type[DomainError], names: str) -> None:
    with pytest.raises(error, match=names):
        decide(small_cluster(), command, 0.0)  # type: ignore[arg-type]


def test_submit_records_the_submit_time_from_the_clock_argument() -> None:
    (event,) = decide(small_cluster(), submit(), 1234.5)
    assert event.payload["submitted_at"] == 1234.5


def test_duplicate_job_id_is_refused() -> None:
    state = apply(small_cluster(), submit())
    with pytest.raises(InvalidCommand, match="already exists"):
        decide(state, submit(), 1.0)


def test_job_lifecycle_to_completed_frees_its_gpus() -> None:
    state = apply(small_cluster(), submit(gpus=2), place(n0=[0, 1]))
    assert state.jobs["j1"].state == "PLACED" and state.jobs["j1"].attempt == 1
    assert state.free_gpus("n0") == frozenset(range(2, 8))
    state = apply(state, ReportJobStarted("j1", 1, 99), ReportJobExited("j1", 1, 0))
    assert state.jobs["j1"].state == "COMPLETED"
    assert state.free_gpus("n0") == frozenset(range(8))


def test_nonzero_exit_is_failed() -> None:
    state = apply(small_cluster(), submit(), place(), ReportJobStarted("j1", 1, 9), ReportJobExited("j1", 1, 3))
    assert state.jobs["j1"].state == "FAILED" and state.jobs["j1"].exit_code == 3


PLACE_CASES = [
    ("busy gpus", [submit("j0"), place("j0", n0=[0])], place(n0=[0]), CapacityConflict),
    ("wrong gpu count", [], place(n0=[0, 1]), InvalidCommand),
    ("unknown node", [], place(n9=[0]), DomainError),
    ("repeated index", [], place(n0=[1, 1]), InvalidCommand),
]


@pytest.mark.parametrize(("name", "before", "command", "error"), PLACE_CASES, ids=[c[0] for c in PLACE_CASES])
def test_place_guards(name: str, before: list[object], command: object, error: type[DomainError]) -> None:
    state = apply(small_cluster(), *before, submit())
    with pytest.raises(error):
        decide(state, command, 0.0)  # type: ignore[arg-type]


def test_stale_reports_are_refused() -> None:
    state = apply(small_cluster(), submit(), place())
    with pytest.raises(InvalidTransition, match="attempt"):
        decide(state, ReportJobStarted("j1", 7, 1), 0.0)


def test_cancel_of_finished_job_is_refused_and_rejection_is_an_event() -> None:
    state = apply(small_cluster(), submit(), CancelJob("j1", "no longer needed"))
    (event,) = decide_or_reject(state, CancelJob("j1"), 0.0)
    assert event.type == "CommandRejected"
    assert event.payload["code"] == "invalid_transition"


def test_node_needs_gpus() -> None:
    with pytest.raises(InvalidCommand, match="'n1'"):
        decide(small_cluster(), RegisterNode("n1", 0, "V100", ["b", "n1"]), 0.0)


DECODE_CASES = [
    ("unknown type", "Explode", {}, "unknown command type"),
    ("missing field", "CancelJob", {}, "missing field 'job_id'"),
    ("unknown field", "CancelJob", {"job_id": "x", "boom": 1}, "unknown field"),
    ("wrong type", "SubmitJob", {"job_id": "x", "project": "p", "gpus": "2", "min_runtime_s": 0,
                                 "command": ["a"]}, "'gpus' must be int"),
    ("bool for number", "SubmitJob", {"job_id": "x", "project": "p", "gpus": 1, "min_runtime_s": True,
                                      "command": ["a"]}, "must be a number"),
]


@pytest.mark.parametrize(("name", "kind", "payload", "message"), DECODE_CASES, ids=[c[0] for c in DECODE_CASES])
def test_command_decoding_names_the_problem(name: str, kind: str, payload: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidCommand, match=message):
        command_from_dict(kind, payload)


POLICY_CASES = [
    ("unknown knob", {"windw_s": 3600}, "unknown policy setting"),
    ("out of range", {"window_s": -1}, "window_s"),
    ("unknown mode", {"ordering": "lottery"}, "ordering"),
    ("wrong type", {"window_s": "a week"}, "invalid policy settings"),
    ("retired knob", {"lane_project_gpus": 32}, r"retired policy setting\(s\): lane_project_gpus \(replaced by"),
]


@pytest.mark.parametrize(("name", "settings", "message"), POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_policy_guards(name: str, settings: dict[str, object], message: str) -> None:
    from steward.domain.commands import SetPolicy

    with pytest.raises(InvalidCommand, match=message):
        decide(small_cluster(), SetPolicy(settings, "r"), 0.0)


def test_policy_changes_merge_and_are_recorded_with_their_reason() -> None:
    from steward.domain.commands import SetPolicy

    state = apply(small_cluster(), SetPolicy({"window_s": 3 * 86400.0}, "shorter memory"))
    (event,) = decide(state, SetPolicy({"preemption_grace_s": 60.0}, "faster turnover"), 0.0)
    assert event.type == "PolicySet" and event.payload["reason"] == "faster turnover"
    assert event.payload["settings"] == {"window_s": 3 * 86400.0, "preemption_grace_s": 60.0}
    assert apply(state, SetPolicy({"preemption_grace_s": 60.0}, "x")).policy["preemption_grace_s"] == 60.0


def test_a_log_that_set_a_retired_setting_still_takes_new_settings() -> None:
    """A `PolicySet` recorded before `lane_project_gpus` was retired (ADR 0029) stays in the log: the
    ledger and the scheduler read the rest of it, and a later change merges without it."""
    from dataclasses import replace

    from steward.domain.commands import SetPolicy
    from steward.domain.policy_settings import PolicySettings, in_force

    old = replace(small_cluster(), policy={"lane_project_gpus": 48, "window_s": 86400.0})
    assert PolicySettings.steward(**in_force(old.policy)).window_s == 86400.0
    (event,) = decide(old, SetPolicy({"preemption_grace_s": 60.0}, "faster turnover"), 0.0)
    assert event.payload["settings"] == {"window_s": 86400.0, "preemption_grace_s": 60.0}


PLACEABLE = [
    # (what, nodes of 8 GPUs, gpus asked, refused)
    ("fits one node", 2, 8, False),
    ("the whole cluster", 2, 16, False),
    ("one GPU more than the cluster", 2, 17, True),
    ("far more than the cluster", 1, 1000, True),
    ("no node registered yet: being set up", 0, 1000, False),
]


@pytest.mark.parametrize(("what", "nodes", "gpus", "refused"), PLACEABLE, ids=[p[0] for p in PLACEABLE])
def test_a_job_larger_than_any_placement_is_refused_at_submit_naming_the_largest(what: str, nodes: int, gpus: int,
                                                                                 refused: bool) -> None:
    state = with_nodes(tree(cluster={"a": 1.0}, a={"a1": 1.0}), count=nodes)
    (event,) = decide_or_reject(state, submit(gpus=gpus), 0.0)
    if not refused:
        assert event.type == "JobSubmitted"
        return
    assert event.type == "CommandRejected" and event.payload["code"] == "invalid_input"
    assert event.payload["reason"] == (f"the job asks for {gpus} GPUs, but the largest placement this cluster could "
                                       f"ever give is {nodes * 8} GPUs (all {nodes} registered node"
                                       f"{'s' if nodes != 1 else ''})")


def test_draining_and_unhealthy_nodes_count_towards_the_largest_placement() -> None:
    """They may come back: a job the whole registered cluster could hold is accepted and waits."""
    state = with_nodes(tree(cluster={"a": 1.0}, a={"a1": 1.0}), count=2)
    state = apply(state, DrainNode("n1", "maintenance"))
    assert [e.type for e in decide_or_reject(state, submit(gpus=16), 0.0)] == ["JobSubmitted"]
