"""The projector's fold (job-local events through `evolve_job` on one job, the rest on the whole state)
ends in the same state as the reference fold (`evolve` over the whole state, event by event), on
random command histories decided by the domain (jobs, and nodes drained, resumed, retired when empty and
registered again: ADR 0082's kept state), and undoes a batch exactly."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.commands import (
    CancelJob,
    DrainNode,
    PlaceJob,
    RegisterNode,
    ReportCheckpointSaved,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    RequestPreemption,
    ResumeNode,
    RetireNode,
    RevokeProtection,
    SetAllocations,
    SubmitJob,
)
from steward.domain.decide import decide_or_reject
from steward.domain.events import Event
from steward.domain.state import LedgerState, evolve
from steward.store.projections import ChangedRows, Projector, capture

JOBS = [f"j{i}" for i in range(6)]
SETUP = [SetAllocations("cluster", {"a": 0.5, "b": 0.5}, "t"), RegisterNode("n0", 4, "H100", ["z", "n0"]),
         RegisterNode("n1", 4, "H100", ["z", "n1"])]

ACTIONS = ("submit", "place", "start", "exit", "cancel", "request", "preempted", "lost", "checkpoint", "revoke",
           "drain", "resume", "retire", "register")
# the lifecycle's actions weighted up, so that most histories place, start and preempt jobs
WEIGHTED = ("submit", "place", "place", "place", "start", "start", "exit", *ACTIONS)
steps = st.lists(st.tuples(st.sampled_from(WEIGHTED), st.integers(0, len(JOBS) - 1), st.integers(0, 3)),
                 min_size=10, max_size=80)


def command_for(state: LedgerState, action: str, job_id: str, coin: int) -> Any:
    """A command that is mostly valid in `state` (the current attempt, free GPUs), so that the histories
    reach every job state; a few are invalid and recorded as rejections."""
    node = ("n0", "n1")[coin % 2]
    if action == "drain":
        return DrainNode(node, "repair")
    if action == "resume":
        return ResumeNode(node, "fixed")
    if action == "retire":
        return RetireNode(node, "gone", when_empty=True)
    if action == "register":  # again (or back after a retirement), sometimes elsewhere in the topology
        return RegisterNode(node, 4, "H100", ["zy"[coin // 2 % 2], node])
    job = state.jobs.get(job_id)
    attempt = job.attempt if job else 1
    if action == "submit" or job is None:
        return SubmitJob(job_id, "ab"[coin % 2], 1 + coin % 2, [0.0, 600.0][coin % 2], ["run"], coin > 1,
                         ["batch", "interactive"][coin // 2 % 2])
    if action == "place":
        free = [(n, g) for n in ("n0", "n1") if n in state.nodes for g in sorted(state.free_gpus(n))]
        picked = free[coin:coin + job.gpus] if len(free) >= coin + job.gpus else free[:job.gpus]
        assignments: dict[str, list[int]] = {}
        for n, g in picked:
            assignments.setdefault(n, []).append(g)
        return PlaceJob(job_id, assignments, coin % 2 == 0)
    if action == "start":
        return ReportJobStarted(job_id, attempt, 100 + coin)
    if action == "exit":
        return ReportJobExited(job_id, attempt, coin % 2)
    if action == "cancel":
        return CancelJob(job_id, "t")
    if action == "request":
        return RequestPreemption(job_id, "fair_share", attempt, requeue=coin != 3)
    if action == "preempted":
        return ReportJobPreempted(job_id, attempt, "fair_share", 0, checkpoint_path="/c" if coin else "")
    if action == "lost":
        return ReportJobLost(job_id, attempt, "node gone")
    if action == "checkpoint":
        return ReportCheckpointSaved(job_id, attempt, f"/ckpt{coin}", float(coin))
    return RevokeProtection(job_id, attempt, "t")


def events_of(history: list[tuple[str, int, int]]) -> list[tuple[Event, float]]:
    state, out, now = LedgerState(), [], 0.0
    commands: list[Any] = [*SETUP, *history]
    for item in commands:
        now += 7.0
        command: Any = command_for(state, item[0], JOBS[item[1]], item[2]) if isinstance(item, tuple) else item
        for ev in decide_or_reject(state, command, now):
            state = evolve(state, ev, now)
            out.append((ev, now))
    return out


def apply_all(proj: Projector, evs: list[tuple[Event, float]]) -> None:
    """Apply events at the positions after the projector's own."""
    for position, (ev, at) in enumerate(evs, start=proj.position + 1):
        proj.apply(ev, at, position)


def seen(proj: Projector) -> tuple[Any, ...]:
    """What a rollback must restore: the state, the positions and the head."""
    return (proj.state(), dict(proj.positions), proj.position)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_projector_fold_equals_the_reference_fold(history: list[Any]) -> None:
    reference, proj = LedgerState(), Projector()
    for position, (ev, at) in enumerate(events_of(history), start=1):
        reference = evolve(reference, ev, at)
        changed = proj.apply(ev, at, position)
        assert all(proj.positions.get(k) == position for k in changed if k[1] in {**proj.jobs, **proj.nodes,
                                                                                    **proj.allocations})
    assert proj.state() == reference


@settings(max_examples=60, deadline=None)
@given(steps, steps)
def test_a_rolled_back_batch_leaves_the_projector_as_it_was(before: list[Any], batch: list[Any]) -> None:
    evs = events_of(before + batch)
    cut = len(events_of(before))
    proj = Projector()
    apply_all(proj, evs[:cut])
    saved = seen(proj)
    proj.begin()
    apply_all(proj, evs[cut:])
    proj.rollback()
    assert seen(proj) == saved


@settings(max_examples=60, deadline=None)
@given(steps, steps, steps)
def test_two_open_batches_roll_back_together_and_commit_in_order(before: list[Any], first: list[Any],
                                                                 second: list[Any]) -> None:
    """The ledger decides batch N+1 while N is recorded: both frames undo together when N fails, and when
    N commits only N+1 stays undoable."""
    evs = events_of(before + first + second)
    a, b = len(events_of(before)), len(events_of(before + first))
    proj = Projector()
    apply_all(proj, evs[:a])
    saved = seen(proj)
    proj.begin()
    apply_all(proj, evs[a:b])
    after_first = seen(proj)
    proj.begin()
    apply_all(proj, evs[b:])
    proj.rollback()
    assert seen(proj) == saved
    # again, with the first batch committed before the second fails
    for frame in (evs[a:b], evs[b:]):
        proj.begin()
        apply_all(proj, frame)
    proj.commit()
    proj.rollback()
    assert seen(proj) == after_first


def write_model(table: dict[str, Any], rows: ChangedRows) -> None:
    """What `write_rows` does to `proj_jobs`, with its primary key: DELETE the rows the batch changed but
    those `capture` named new, then insert every present row."""
    for key, _, _ in rows.jobs:
        if key not in rows.new_jobs:
            table.pop(key, None)
    for key, job, position in rows.jobs:
        if job is not None:
            assert key not in table, f"{key}: its DELETE was skipped but an earlier batch wrote its row"
            table[key] = (job, position)


def decide_batch(proj: Projector, evs: list[tuple[Event, float]]) -> ChangedRows:
    """As `Ledger.prepare` does: a new frame, the batch's events, the rows it changed."""
    proj.begin()
    changed: list[tuple[str, str]] = []
    for position, (ev, at) in enumerate(evs, start=proj.position + 1):
        changed += proj.apply(ev, at, position)
    return capture(proj, changed)


@settings(max_examples=100, deadline=None)
@given(steps, steps, steps)
def test_job_rows_new_in_a_batch_need_no_delete_even_with_the_batch_before_still_in_flight(
        before: list[Any], first: list[Any], second: list[Any]) -> None:
    """ADR 0022: `capture` names the jobs the projection did not hold before the batch. Batch N+1 is decided
    before N commits and written after it, so the table it meets is the one N left: skipping their DELETE
    never meets a row (the primary key would refuse the insert), and the table ends as the projection."""
    evs = events_of(before + first + second)
    a, b = len(events_of(before)), len(events_of(before + first))
    proj = Projector()
    apply_all(proj, evs[:a])
    table = {k: (j, proj.positions[("j", k)]) for k, j in proj.jobs.items()}
    held_before_first = set(proj.jobs)
    rows_first = decide_batch(proj, evs[a:b])
    held_before_second = set(proj.jobs)
    rows_second = decide_batch(proj, evs[b:])  # decided while the first is being written
    for rows, held in ((rows_first, held_before_first), (rows_second, held_before_second)):
        assert rows.new_jobs == {k for k, _, _ in rows.jobs} - held
    write_model(table, rows_first)
    proj.commit()
    write_model(table, rows_second)
    proj.commit()
    assert table == {k: (j, proj.positions[("j", k)]) for k, j in proj.jobs.items()}
    assert capture(proj, [("j", k) for k in table]).new_jobs == frozenset()  # no open frame: delete every row


@settings(max_examples=150, deadline=None)
@given(steps)
def test_a_registration_keeps_a_draining_or_retiring_node_s_state_in_both_folds(history: list[Any]) -> None:
    """ADR 0082 on random histories: right after each recorded `NodeRegistered` of a node that was draining or
    retiring, the node is still so (the projector's fold and the reference fold alike); of a node that was
    anything else (or none), it is ready."""
    reference, proj = LedgerState(), Projector()
    for position, (ev, at) in enumerate(events_of(history), start=1):
        before = reference.nodes.get(ev.payload.get("node_id", ""))
        reference = evolve(reference, ev, at)
        proj.apply(ev, at, position)
        if ev.type == "NodeRegistered":
            kept = before.state if before is not None and before.state in ("draining", "retiring") else "ready"
            node_id = ev.payload["node_id"]
            assert reference.nodes[node_id].state == proj.nodes[node_id].state == kept
    assert proj.state() == reference
