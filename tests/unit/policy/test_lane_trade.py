"""ADR 0021: the room a preemption frees for a lane job is held for it (since ADR 0028, by the one
hold of every beneficiary, `claim_hold_s`; ADR 0021's `lane_hold_s` is retired into it), and a lane
job the lane cannot serve trades its own allocation's work (DESIGN.md "priority only orders jobs inside one
project"; "p95 time to first GPU for a session or debug job under 2 minutes")."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.churn import holds_claimed_room
from steward.policy.cycle import schedule
from steward.policy.model import PendingJob, RunningJob
from steward.policy.preemption import Trade, Victim, trade_victim
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, placed, preempted, running, snapshot

S = PolicySettings.steward(claim_hold_s=30.0, lane_trade=True)  # trades off by default: measured, ADR 0021


def debug(id: str, project: str = "a", room_freed_at: float | None = None) -> PendingJob:
    return pending(id, project, 1, min_runtime_s=300.0, klass="debug", room_freed_at=room_freed_at)



@pytest.mark.parametrize(
    ("room_freed_at", "klass", "settings", "expected"),
    [
        (NOW - 10, "debug", S, True),
        (NOW - 30, "debug", S, True),  # the hold's last second
        (NOW - 31, "debug", S, False),  # expired: the job waits like any other
        (None, "debug", S, False),  # nothing was freed for it
        (NOW - 10, "batch", S, True),  # ADR 0028: every beneficiary, not only the lane's (ADR 0021)
        (NOW - 60, "debug", PolicySettings.steward(), True),  # the `steward` preset: 60 s
        (NOW - 61, "debug", PolicySettings.steward(), False),
        (NOW - 10, "debug", PolicySettings.ai2(), False),  # the baselines have no hold
    ],
)
def test_which_jobs_hold_room(room_freed_at: float | None, klass: str, settings: PolicySettings,
                              expected: bool) -> None:
    """The lane's hold is the one hold of ADR 0028 (`churn.holds_claimed_room`), once its victims
    have stopped."""
    job = pending("j", "a", 1, min_runtime_s=300.0, klass=klass, room_freed_at=room_freed_at)
    assert holds_claimed_room(job, (), NOW, settings) is expected


def _victim(project: str, *, funded: bool = False, leaving: bool = False, checkpoint_age: float = 10.0,
            resumable: bool = True, claimed_for: str | None = None) -> Victim:
    job = running("v", project, 1, funded=funded, preemption_requested_at=NOW - 5 if leaving else None,
                  last_checkpoint_at=NOW - checkpoint_age, resumable=resumable, claimed_for=claimed_for)
    return Victim(job, ((0, 1),), 0.0, 0.0, (project,), leaving)


def _bounded(max_lost_s: float) -> Trade:
    """A trade of `a`'s unfunded work losing at most `max_lost_s` per GPU at the stop: 20 s of grace,
    a checkpoint every 1,800 s, 60 s to restart."""
    return Trade("a", max_lost_s=max_lost_s, now=NOW, grace_funded_s=120.0, grace_unfunded_s=20.0,
                 checkpoint_interval_s=1800.0, restart_s=60.0)


@pytest.mark.parametrize(
    ("victim", "trade", "expected"),
    [
        (_victim("a"), Trade("a"), True),  # its own unfunded work
        (_victim("b"), Trade("a"), False),  # never another allocation's
        (_victim("a", funded=True), Trade("a"), False),  # own funded work only when allowed
        (_victim("a", funded=True), Trade("a", funded=True), True),
        (_victim("a", checkpoint_age=10.0), _bounded(150.0), True),  # 10 + 20 s of grace + 60 s restart
        (_victim("a", checkpoint_age=100.0), _bounded(150.0), False),  # 180 s
        (_victim("a", checkpoint_age=1700.0), _bounded(150.0), False),  # 1,780 s: the checkpoint is after the stop
        (_victim("a", checkpoint_age=1790.0), _bounded(150.0), True),  # checkpoints in its grace: 10 + 60 s
        (_victim("a", checkpoint_age=1790.0, resumable=False), _bounded(150.0), False),  # keeps nothing
        (_victim("a", leaving=True), Trade("a"), True),  # already leaving, for nobody in particular
        (_victim("a", leaving=True, claimed_for="dbg"), Trade("a"), True),  # leaving for this very job
        (_victim("a", leaving=True, claimed_for="other"), Trade("a"), False),  # its GPUs are another's
    ],
)
def test_which_victims_a_trade_may_take(victim: Victim, trade: Trade, expected: bool) -> None:
    assert trade_victim(victim, "dbg", trade) is expected


def _at_cap(project: str, count: int, node: str = "n0") -> list[RunningJob]:
    return [running(f"{project}_lane{i}", project, 1, on=node, started_at=NOW - 60, protected_for=300.0,
                    min_runtime_s=300.0, klass="debug") for i in range(count)]


def test_a_qualified_job_trades_its_own_work_and_an_over_quota_one_does_not() -> None:
    """ADR 0029: only qualified work searches victims ahead of the order, the trade included; a job
    over its allocation's debug quota is ordinary funded work and trades nothing."""
    held = [
        *_at_cap("a", 2),
        *(running(f"a{i}", "a", 1, protected_for=HOUR, last_checkpoint_at=NOW - 10 * (i + 1)) for i in range(2)),
        *(running(f"b{i}", "b", 1, protected_for=10 * HOUR) for i in range(4)),
    ]
    for floor, expected in ((3, {"a0": "dbg"}), (2, {})):
        s = S.with_(debug_quota_share=0.0, debug_quota_floor_gpus=floor)
        result = schedule(snapshot(nodes=nodes(1), usage={"a": 1e7, "b": 0.0}, running=held,
                                   pending=[debug("dbg")], settings=s))
        assert preempted(result) == expected, floor
        if expected:
            evidence = result.preemptions[0].evidence
            assert evidence["rule"] == "lane_trade_own_work" and evidence["trade"] and evidence["lane"]


def test_a_trade_takes_own_funded_work_out_of_protection_only_when_allowed() -> None:
    s = S  # the default quota: a's debug job is qualified; no unfunded work, and b is under-served
    held = [
        running("a_batch", "a", 1, protected_for=HOUR, last_checkpoint_at=NOW - 30),  # out of protection
        running("a_protected", "a", 1, started_at=NOW - 60, protected_for=HOUR),
        *(running(f"b{i}", "b", 1, protected_for=10 * HOUR) for i in range(6)),
    ]
    job = debug("dbg")
    snap = snapshot(nodes=nodes(1), usage={"a": 1e7, "b": 0.0}, running=held, pending=[job], settings=s)
    assert preempted(schedule(snap)) == {"a_batch": "dbg"}
    snap = snapshot(nodes=nodes(1), usage={"a": 1e7, "b": 0.0}, running=held, pending=[job],
                    settings=s.with_(lane_trade_funded=False))
    assert preempted(schedule(snap)) == {}


def test_the_freed_room_goes_to_the_job_it_was_freed_for() -> None:
    # one GPU is free; b's batch job is first in the order (b is under-served) and a is over the
    # debug quota: the GPU goes to b, unless a trade just freed it for a's debug job
    s = S.with_(debug_quota_share=0.0, debug_quota_floor_gpus=2)
    held = [*_at_cap("a", 2), *(running(f"a{i}", "a", 1, protected_for=10 * HOUR) for i in range(2)),
            *(running(f"b{i}", "b", 1, protected_for=10 * HOUR) for i in range(3))]
    waiting = [pending("batch", "b", 1)]
    for freed_at, expected in ((NOW - 20, {"dbg"}), (NOW - 100, {"batch"}), (None, {"batch"})):
        dbg = debug("dbg", room_freed_at=freed_at)
        result = schedule(snapshot(nodes=nodes(1), usage={"a": 1e7, "b": 0.0}, running=held,
                                   pending=[*waiting, dbg], settings=s))
        assert set(placed(result)) == expected, freed_at
        if expected == {"dbg"}:
            p = result.placements[0]
            assert p.funded and p.evidence["claimed_room"]["room_freed_at"] == freed_at
            assert "lane" in p.evidence  # placed as the lane places it


def test_the_baselines_neither_hold_nor_trade() -> None:
    for preset in ("ai2", "fair-tree", "fifo-priority"):
        s = PolicySettings.preset(preset)
        assert s.claim_hold_s is None and not s.lane_trade
