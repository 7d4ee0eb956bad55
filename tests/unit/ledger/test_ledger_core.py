"""The ledger's unit of work on an SQLite store: decide, record, dedup, dead-letter, offsets, rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.bus.envelope import Envelope, command_envelope
from steward.domain.commands import CancelJob, SetAllocations, SubmitJob
from steward.ledger import ledger as core
from steward.ledger.ledger import DeadLetter, Ledger, fold
from steward.store import projections, schema
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def msg(command: object, mid: str | None = None) -> tuple[str, bytes]:
    env = command_envelope(command, actor="alice", role="manager", message_id=mid)  # type: ignore[arg-type]
    return ("t/0@0", env.encode())


TREE = [SetAllocations("cluster", {"a": 1.0}, "setup"), SetAllocations("a", {"a1": 1.0}, "setup")]


def test_records_events_projections_and_offsets_in_one_unit(store: EventStore) -> None:
    ledger = Ledger(store, clock=lambda: 100.0)
    sub = SubmitJob("j1", "a1", 2, 600, ["true"])
    recorded, dead = ledger.process([msg(c) for c in [*TREE, sub]], {("steward.commands", 0): 3})
    assert not dead
    assert [r.type for r in recorded] == ["AllocationsSet", "AllocationsSet", "JobSubmitted"]
    assert [r.position for r in recorded] == [1, 2, 3]
    assert recorded[-1].metadata["actor"] == "alice"
    assert store.load_offsets("ledger") == {("steward.commands", 0): 3}
    with store.engine.connect() as conn:
        (job,) = projections.read_rows(conn, schema.proj_jobs)
    assert job["state"] == "QUEUED" and job["submitted_at"] == 100.0


def test_redelivered_message_is_recorded_once(store: EventStore) -> None:
    ledger = Ledger(store)
    ledger.process([msg(TREE[0], "m-1")], {})
    recorded, _ = ledger.process([msg(TREE[0], "m-1"), msg(TREE[0], "m-1")], {})
    assert recorded == []
    assert store.head() == 1


def test_rule_violation_becomes_a_rejection_event(store: EventStore) -> None:
    ledger = Ledger(store)
    (rec,), _ = ledger.process([msg(SubmitJob("j1", "ghost", 1, 0, ["true"]))], {})
    assert rec.type == "CommandRejected"
    assert rec.payload["code"] == "unknown_project"
    assert "ghost" in rec.payload["reason"]


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"id": "x"}', None,
                                 Envelope("x", "Nope", "k", {}).encode(),
                                 Envelope("y", "CancelJob", "k", {"job": 1}).encode()])
def test_malformed_messages_are_dead_lettered_and_the_rest_goes_on(store: EventStore, raw: bytes | None) -> None:
    ledger = Ledger(store)
    recorded, dead = ledger.process([("t/0@7", raw), msg(TREE[0])], {("t", 0): 9})
    assert len(dead) == 1 and dead[0].source == "t/0@7" and dead[0].error
    assert [r.type for r in recorded] == ["AllocationsSet"]
    assert store.load_offsets("ledger") == {("t", 0): 9}


def test_hash_chain_links_every_event(store: EventStore) -> None:
    Ledger(store).process([msg(c) for c in TREE], {})
    first, second = store.read()
    assert second.prev_hash == first.hash
    assert first.prev_hash == "0" * 64


def test_restarted_ledger_folds_the_same_state(store: EventStore) -> None:
    ledger = Ledger(store)
    ledger.process([msg(c) for c in [*TREE, SubmitJob("j1", "a1", 1, 0, ["true"])]], {})
    again, head = fold(store)
    assert again == ledger.state and head == ledger.head


def test_an_oversized_message_is_dead_lettered_unread_and_the_rest_goes_on(store: EventStore) -> None:
    ledger = Ledger(store, max_message_bytes=1024)
    big = Envelope("big", "SetAllocations", "k", {"parent": "cluster", "shares": {}, "reason": "x" * 2000}).encode()
    recorded, dead = ledger.process([("t/0@1", big), msg(TREE[0])], {("t", 0): 2})
    assert [d.source for d in dead] == ["t/0@1"] and dead[0].error.startswith("oversized: ")
    assert [r.type for r in recorded] == ["AllocationsSet"]


def test_dead_letters_are_handed_over_before_the_batch_commits(store: EventStore) -> None:
    """If the dead-letter topic cannot take them, the batch (and the offsets that skip them) is not
    committed: the messages are read again."""
    def unavailable(dead: list[DeadLetter]) -> None:
        assert len(dead) == 1
        raise ConnectionError("dead-letter topic unavailable")

    ledger = Ledger(store)
    with pytest.raises(ConnectionError):
        ledger.process([("t/0@0", b"junk"), msg(TREE[0])], {("t", 0): 2}, before_commit=unavailable)
    assert store.load_offsets("ledger") == {} and store.head() == 0 and ledger.head == 0
    ledger.process([("t/0@0", b"junk"), msg(TREE[0])], {("t", 0): 2}, before_commit=lambda dead: None)
    assert store.load_offsets("ledger") == {("t", 0): 2} and store.head() == 1


def test_a_batch_decided_while_the_one_before_is_recorded_is_undone_with_it(store: EventStore) -> None:
    """The service decides batch N+1 before N commits; when N fails, both are undone in memory and
    nothing of either is in the store."""
    ledger = Ledger(store, clock=lambda: 100.0)
    ledger.process([msg(c) for c in TREE], {("t", 0): 2})
    before = (ledger.state, ledger.head, ledger.proj.head_hash)
    first = ledger.prepare([msg(SubmitJob("j1", "a1", 1, 0, ["true"]), "m-1")], {("t", 0): 3})
    second = ledger.prepare([msg(SubmitJob("j2", "a1", 1, 0, ["true"]), "m-2"),
                             msg(SubmitJob("j1", "a1", 1, 0, ["true"]), "m-1")], {("t", 0): 5})
    assert [r.position for r in second.records] == [4]  # follows the first; m-1 is a duplicate in flight
    assert second.start_hash == first.records[-1].hash

    def unavailable(_dead: list[DeadLetter]) -> None:
        raise ConnectionError("dead-letter topic unavailable")

    with pytest.raises(ConnectionError):
        ledger.record(first, before_commit=unavailable)
    ledger.abort()
    assert (ledger.state, ledger.head, ledger.proj.head_hash) == before
    assert store.head() == 2
    recorded, _ = ledger.process([msg(SubmitJob("j2", "a1", 1, 0, ["true"]), "m-2")], {("t", 0): 5})
    assert [(r.position, r.stream_id) for r in recorded] == [(3, "job-j2")]


def test_two_batches_in_flight_commit_in_order(store: EventStore) -> None:
    ledger = Ledger(store, clock=lambda: 100.0)
    ledger.process([msg(c) for c in TREE], {})
    first = ledger.prepare([msg(SubmitJob("j1", "a1", 1, 0, ["true"]))], {("t", 0): 3})
    second = ledger.prepare([msg(CancelJob("j1", "x"))], {("t", 0): 4})
    for prepared in (first, second):
        ledger.record(prepared)
        ledger.committed(prepared)
    assert [r.type for r in store.read()][2:] == ["JobSubmitted", "JobCancelled"]
    assert store.load_offsets("ledger") == {("t", 0): 4}
    assert ledger.state == fold(store)[0]


def test_a_ledger_whose_log_moved_re_reads_the_state_and_decides_again(store: EventStore) -> None:
    """A second `Ledger` on the same store appended meanwhile: the first finds the head moved under the
    lock, re-reads the state and decides the batch on it (here: the job exists already)."""
    stale = Ledger(store)
    stale.process([msg(c) for c in TREE], {})
    other = Ledger(store)
    other.process([msg(SubmitJob("j1", "a1", 1, 0, ["true"]))], {})
    recorded, _ = stale.process([msg(SubmitJob("j1", "a1", 1, 0, ["true"]))], {})
    assert [(r.position, r.type) for r in recorded] == [(4, "CommandRejected")]
    assert store.head() == 4
    assert stale.state == fold(store)[0]


def test_a_batch_that_fails_while_being_decided_leaves_the_one_in_flight_to_commit(
        store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(store, clock=lambda: 100.0)
    ledger.process([msg(c) for c in TREE], {})
    first = ledger.prepare([msg(SubmitJob("j1", "a1", 1, 0, ["true"]))], {("t", 0): 3})

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("encoder broke")

    monkeypatch.setattr(core, "encode_events", broken)
    with pytest.raises(ValueError, match="encoder broke"):
        ledger.prepare([msg(CancelJob("j1", "x")), msg(SubmitJob("j2", "a1", 1, 0, ["true"]))], {("t", 0): 5})
    monkeypatch.undo()
    ledger.record(first)
    ledger.committed(first)
    assert ledger.state == fold(store)[0] and ledger.head == 3 and ledger.state.jobs["j1"].state == "QUEUED"
    recorded, _ = ledger.process([msg(CancelJob("j1", "x"))], {("t", 0): 4})
    assert [(r.position, r.version, r.type) for r in recorded] == [(4, 2, "JobCancelled")]


@pytest.mark.parametrize("raw", [
    b'{"id":"m1","type":"SetAllocations","key":"a","payload":{"parent":"cluster","shares":{"a":1.0},"reason":"x\\ud800"}}',
    b'{"id":"m1","type":"SetAllocations","key":"a","payload":{"parent":"cluster","shares":{"a":1.0},"reason":"x\xed\xa0\x80"}}',
])
def test_a_lone_surrogate_is_dead_lettered_not_retried_forever(store: EventStore, raw: bytes) -> None:
    """`json` reads a lone surrogate into a string with no UTF-8 form; the batch used to fail on every
    retry while hashing it (a poison message). Now the message is dead-lettered and the rest goes on."""
    ledger = Ledger(store)
    recorded, dead = ledger.process([("t/0@0", raw), msg(TREE[0])], {("t", 0): 2})
    assert [d.source for d in dead] == ["t/0@0"]
    assert "lone surrogate (\\ud800)" in dead[0].error
    assert [r.type for r in recorded] == ["AllocationsSet"]


def test_dead_letters_keep_the_messages_order_whichever_half_of_decoding_refused_them(store: EventStore) -> None:
    """Envelopes are opened for the whole batch before its commands are decoded (ADR 0023): the dead
    letters still come in the messages' order, each with its own reason."""
    ledger = Ledger(store, max_message_bytes=1024)
    big = Envelope("big", "SetAllocations", "k", {"parent": "cluster", "shares": {}, "reason": "x" * 2000}).encode()
    bad_command = Envelope("y", "CancelJob", "k", {"job": 1}).encode()
    recorded, dead = ledger.process([("t/0@0", bad_command), ("t/0@1", b"not json"), msg(TREE[0]),
                                     ("t/0@3", big), ("t/0@4", None)], {("t", 0): 5})
    assert [d.source for d in dead] == ["t/0@0", "t/0@1", "t/0@3", "t/0@4"]
    assert dead[2].error.startswith("oversized: ") and dead[2].raw == big[:4096]
    assert dead[3].error == "empty message" and dead[0].raw == bad_command
    assert [r.type for r in recorded] == ["AllocationsSet"]


@pytest.mark.parametrize(("first_clock", "second_clock", "takeover"), [
    (100.0, 90.0, False),  # the host's clock stepped back between two batches
    (100.0, 90.0, True),  # a standby whose clock is behind the writer it replaced
    (100.0, 100.0, True),  # the same instant: equal times are in order
    (100.0, 130.0, True),  # a clock ahead: its own time
])
def test_recorded_times_never_go_back_along_the_log(store: EventStore, first_clock: float, second_clock: float,
                                                    takeover: bool) -> None:
    """ADR 0075: the figures as of a position end at its recorded time and `position_at` finds a time's last
    position, both reading the log as if its recorded times never decrease; the ledger makes it so."""
    clock = [first_clock]
    ledger = Ledger(store, clock=lambda: clock[0])
    ledger.process([msg(TREE[0])], {})
    clock[0] = second_clock
    second = Ledger(store, clock=lambda: clock[0]) if takeover else ledger
    (rec,), _ = second.process([msg(TREE[1])], {})
    times = [r.recorded_at for r in store.iterate()]
    assert times == sorted(times) and rec.recorded_at == max(first_clock, second_clock)
    assert store.position_at(first_clock) == (2 if second_clock <= first_clock else 1)
