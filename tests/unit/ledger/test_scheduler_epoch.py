"""The scheduler's commands carry its lease epoch and the ledger refuses one older than the lease's (ADR 0065):
a paused-then-resumed active scheduler's last cycle is refused outright, recorded as a `CommandRefused` with the
reason, instead of being decided as any stale decision. Commands without an epoch are decided as before."""

from __future__ import annotations

from typing import Any

import pytest

from steward.bus.envelope import command_envelope
from steward.domain.commands import PlaceJob, RegisterNode, SetAllocations, SubmitJob
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.leases import LeaseStore
from tests.unit.store.test_store_sqlite import store

API, SCHED = "steward.commands", "steward.commands.scheduler"
LOCAL = "steward.commands.executor.local"
_offset = [0]
__all__ = ["store"]


def msg(topic: str, command: Any, actor: str, role: str = "system", epoch: int | None = None) -> tuple[str, bytes]:
    _offset[0] += 1
    env = command_envelope(command, actor=actor, role=role, message_id=f"e{_offset[0]}", epoch=epoch)
    return (f"{topic}/0@{_offset[0]}", env.encode())


@pytest.fixture()
def ledger(store: EventStore) -> Ledger:
    led = Ledger(store, clock=lambda: 100.0, topic_prefix="steward")
    _, dead = led.process([
        msg(API, SetAllocations("cluster", {"a": 1.0}, "setup"), "admin", "admin"),
        msg(LOCAL, RegisterNode("n1", 4, "H100", ["n1"], "local"), "executor:local"),
        *[msg(API, SubmitJob(f"j{i}", "a", 1, 0.0, ["true"]), "alice", "researcher") for i in range(4)],
    ], {})
    assert not dead
    return led


def take(store: EventStore, times: int) -> None:
    """The scheduler's lease taken `times` times (epoch `times`)."""
    leases = LeaseStore(store.engine, "scheduler")
    for i in range(times):
        seen, _ = leases.read()
        assert leases.take(f"s{i}", seen, 3.0) == i + 1
    leases.close()


# (the lease's epoch, None: never taken; the epoch the command carries; the refusal, or "" when decided)
CASES = [
    (None, None, ""),  # no lease, no epoch: as before standbys
    (None, 1, ""),  # no lease: nothing to be stale against
    (2, None, ""),  # a command without an epoch (an older scheduler, an old log): not checked
    (2, 2, ""),  # the active's own epoch
    (2, 1, "fenced: scheduler epoch 1, lease at 2"),  # the paused-then-resumed active's late command
    (3, 1, "fenced: scheduler epoch 1, lease at 3"),
]


@pytest.mark.parametrize(("lease_epoch", "sent", "reason"), CASES)
def test_a_placement_is_refused_exactly_when_its_epoch_is_older_than_the_lease(
        store: EventStore, ledger: Ledger, lease_epoch: int | None, sent: int | None, reason: str) -> None:
    if lease_epoch is not None:
        take(store, lease_epoch)
    recorded, dead = ledger.process([msg(SCHED, PlaceJob("j0", {"n1": [0]}, True), "scheduler", epoch=sent)], {})
    if not reason:
        assert not dead and [r.type for r in recorded] == ["JobPlaced"]
        assert recorded[0].metadata.get("epoch") == sent  # the epoch it was decided under, in the log
        return
    assert [d.error for d in dead] == [reason]
    assert [r.type for r in recorded] == ["CommandRefused"]
    assert recorded[0].payload["reason"] == reason and recorded[0].payload["command"] == "PlaceJob"
    assert ledger.state.jobs["j0"].state == "QUEUED"  # nothing of the stale command was decided


def test_a_batch_of_both_actives_keeps_only_the_new_one_s_commands(store: EventStore, ledger: Ledger) -> None:
    """The old active's last cycle and the new active's first, in one batch: the old one's commands are refused
    whatever their order, the new one's decided."""
    take(store, 2)
    recorded, dead = ledger.process([
        msg(SCHED, PlaceJob("j0", {"n1": [0]}, True), "scheduler", epoch=1),
        msg(SCHED, PlaceJob("j1", {"n1": [0]}, True), "scheduler", epoch=2),
        msg(SCHED, PlaceJob("j2", {"n1": [1]}, True), "scheduler", epoch=1),
    ], {})
    assert [d.error for d in dead] == ["fenced: scheduler epoch 1, lease at 2"] * 2
    assert ledger.state.jobs["j1"].state == "PLACED"
    assert {ledger.state.jobs[j].state for j in ("j0", "j2")} == {"QUEUED"}
    assert sorted(r.type for r in recorded) == ["CommandRefused", "CommandRefused", "JobPlaced"]


def test_without_a_topic_prefix_nothing_is_checked(store: EventStore) -> None:
    """An embedded or test ledger fed in-process trusts every sender (ADR 0036) and reads no lease."""
    take(store, 2)
    led = Ledger(store, clock=lambda: 100.0)
    _, dead = led.process([
        msg(API, SetAllocations("cluster", {"a": 1.0}, "setup"), "admin", "admin"),
        msg(LOCAL, RegisterNode("n1", 4, "H100", ["n1"], "local"), "executor:local"),
        msg(API, SubmitJob("j0", "a", 1, 0.0, ["true"]), "alice", "researcher"),
        msg(SCHED, PlaceJob("j0", {"n1": [0]}, True), "scheduler", epoch=1),
    ], {})
    assert not dead and led.state.jobs["j0"].state == "PLACED"
