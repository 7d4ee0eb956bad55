"""The election and fencing rule of roles with standbys (ADR 0060), pure: who takes, renews, waits or steps
down on reading a lease, and which writes the store refuses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.leadership import Lease, Step, fenced, fenced_role, next_epoch, stale_command, step

LIVE = Lease("a", 3, expires_at=100.0, holder_connected=True)


@pytest.mark.parametrize(("lease", "me", "my_epoch", "now", "expected"), [
    (None, "b", None, 50.0, Step.TAKE),  # no lease yet: the first candidate takes epoch 1
    (LIVE, "b", None, 50.0, Step.WAIT),  # a live holder: stand by
    (LIVE, "b", None, 100.0, Step.TAKE),  # expired (paused or cut off): take over
    (Lease("a", 3, 100.0, holder_connected=False), "b", None, 50.0, Step.TAKE),  # its connection closed: dead
    (LIVE, "a", 3, 50.0, Step.RENEW),  # the active renews
    (LIVE, "a", 3, 150.0, Step.RENEW),  # expired but nobody took it: the store still accepts epoch 3
    (Lease("b", 4, 100.0, True), "a", 3, 50.0, Step.STEP_DOWN),  # taken over while paused
    (Lease("a", 4, 100.0, True), "a", 3, 50.0, Step.STEP_DOWN),  # its own name but a newer epoch: stale
    (None, "a", 3, 50.0, Step.STEP_DOWN),  # the lease was removed under it
    (LIVE, "a", None, 50.0, Step.TAKE),  # a standby that finds its own name came back: a new epoch
])
def test_step(lease: Lease | None, me: str, my_epoch: int | None, now: float, expected: Step) -> None:
    assert step(lease, me, my_epoch, now) is expected


@pytest.mark.parametrize(("write_epoch", "lease_epoch", "refused"), [
    (3, 3, False),
    (3, 4, True),  # a standby took over: the old active's write is refused
    (4, 3, True),  # never ahead of the lease either
    (3, None, True),  # no lease at all: a writer with an epoch has nothing that vouches for it
])
def test_fenced(write_epoch: int, lease_epoch: int | None, refused: bool) -> None:
    assert fenced(write_epoch, lease_epoch) is refused


def test_next_epoch() -> None:
    assert next_epoch(None) == 1 and next_epoch(LIVE) == 4


# one move of the model: a candidate reads the lease and acts (the store applies a take only if the epoch it
# read is still the lease's), a candidate pauses or resumes, dies, or the store's clock moves on
moves = st.lists(st.tuples(st.sampled_from(["act", "pause", "die", "tick"]), st.integers(0, 2),
                           st.floats(0.0, 4.0)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(moves)
def test_at_most_one_writer_per_epoch_and_epochs_only_grow(script: list[tuple[str, int, float]]) -> None:
    """Whatever the interleaving of reads, takes, pauses and deaths among three candidates: epochs only grow,
    at most one candidate believes it is active with the lease's epoch, and every write the store accepts is
    made with the lease's epoch by the one holder of that epoch."""
    ttl = 3.0
    now = 0.0
    lease: Lease | None = None
    mine: dict[int, int | None] = {0: None, 1: None, 2: None}  # the epoch each believes it is active with
    seen: dict[int, Lease | None] = {0: None, 1: None, 2: None}  # what each read last (a paused one keeps it)
    paused: set[int] = set()
    dead: set[int] = set()
    holders: dict[int, int] = {}  # epoch -> the candidate that took it
    for kind, who, dt in script:
        if kind == "tick":
            now += dt
            continue
        if kind == "pause":
            paused ^= {who}
            continue
        if kind == "die":
            dead.add(who)
            mine[who] = None
            if lease is not None and lease.holder == str(who):
                lease = Lease(lease.holder, lease.epoch, lease.expires_at, holder_connected=False)
            continue
        if who in dead:
            continue
        if who in paused:  # a paused active may still try a write with what it believed before the pause
            epoch = mine[who]
            if epoch is not None and not fenced(epoch, lease.epoch if lease else None):
                assert holders[epoch] == who
            continue
        seen[who] = lease
        decision = step(lease, str(who), mine[who], now)
        if decision is Step.TAKE:
            before = lease.epoch if lease else 0
            lease = Lease(str(who), next_epoch(lease), now + ttl, True)  # the compare and set holds: nothing moved
            assert lease.epoch > before
            assert lease.epoch not in holders
            holders[lease.epoch] = who
            mine[who] = lease.epoch
        elif decision is Step.RENEW:
            assert lease is not None
            lease = Lease(lease.holder, lease.epoch, now + ttl, True)
        elif decision is Step.STEP_DOWN:
            mine[who] = None
        believers = [c for c, e in mine.items() if lease is not None and e == lease.epoch and c not in dead]
        assert len(believers) <= 1
        for c, e in mine.items():  # a write of any live candidate is accepted only from the epoch's holder
            if e is not None and not fenced(e, lease.epoch if lease else None):
                assert holders[e] == c


@pytest.mark.parametrize(("sent", "lease_epoch", "reason"), [
    (None, 3, ""),  # no epoch (a log or a sender older than epochs): not checked
    (None, None, ""),
    (3, 3, ""),  # the lease's own epoch: decided as usual
    (4, 3, ""),  # newer than the lease read: the new active's, read a moment before its take committed
    (3, None, ""),  # no lease for the role: nothing to be stale against
    (2, 3, "fenced: scheduler epoch 2, lease at 3"),  # a paused active's late command
    (1, 7, "fenced: scheduler epoch 1, lease at 7"),
    (0, 3, "fenced: scheduler epoch 0 is not a lease epoch (a whole number from 1)"),
    ("2", 3, "fenced: scheduler epoch '2' is not a lease epoch (a whole number from 1)"),
    (2.0, 3, "fenced: scheduler epoch 2.0 is not a lease epoch (a whole number from 1)"),
    (True, 3, "fenced: scheduler epoch True is not a lease epoch (a whole number from 1)"),
])
def test_stale_command(sent: object, lease_epoch: int | None, reason: str) -> None:
    assert stale_command("scheduler", sent, lease_epoch) == reason


@pytest.mark.parametrize(("reason", "role"), [
    ("fenced: scheduler epoch 2, lease at 3", "scheduler"),
    ("fenced: scheduler epoch 0 is not a lease epoch (a whole number from 1)", "scheduler"),
    ("steward-scheduler may not issue SubmitJob", None),
    ("fenced:", None),
    ("", None),
])
def test_fenced_role(reason: str, role: str | None) -> None:
    assert fenced_role(reason) == role


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50))
def test_a_command_is_refused_exactly_when_its_epoch_is_older_than_the_lease(sent: int, lease_epoch: int) -> None:
    assert bool(stale_command("scheduler", sent, lease_epoch)) is (sent < lease_epoch)
