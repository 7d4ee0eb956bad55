"""Exactly-once with the dedup read beside the decision (ADR 0023): `Ledger.prepare` decides a batch while
the store is asked which of its messages are committed, and decides it again without them when the answer
names one. Every interleaving of a redelivered message with the batches around it, on a real SQLite store
(the store read after the decision); tests/integration/test_ledger_dedup_postgres.py runs the same tests on
PostgreSQL with kept connections (the statement sent before the decision, its answer taken after)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, select

from steward.audit.verify import verify
from steward.domain.commands import (
    CancelJob,
    OpenSession,
    PlaceJob,
    RegisterNode,
    ReportJobStarted,
    ReportUtilisation,
    SetAllocations,
    SubmitJob,
)
from steward.domain.events import Event
from steward.ledger import ledger as core
from steward.ledger.deciding import steps as ledger_batch
from steward.ledger.deciding.steps import merge_versions, processed_messages
from steward.ledger.ledger import Ledger, LogMoved, Prepared, fold
from steward.store import schema
from steward.store.encoding import PendingAppend, encode_events
from steward.store.eventstore import EventStore, MessageRecordedTwice
from steward.store.migrate import upgrade
from tests.unit.store.builders import msg

TREE = [SetAllocations("cluster", {"a": 1.0}, "setup"), SetAllocations("a", {"a1": 1.0}, "setup")]


def submit(job: str, mid: str) -> tuple[str, bytes]:
    return msg(SubmitJob(job, "a1", 1, 600.0, ["true"]), mid)


def cancel(job: str, mid: str) -> tuple[str, bytes]:
    return msg(CancelJob(job, "x"), mid)


class HookedStore(EventStore):
    """A real store that runs `before_read` before the ledger's dedup statement is sent and `after_read`
    once its answer is in: the test commits a batch at exactly that point of the next batch's decision."""

    before_read: Callable[[], None] | None = None
    after_read: Callable[[], None] | None = None

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.ledgers: list[Ledger] = []  # closed by the fixture (their kept connections)

    def _hook(self, name: str) -> None:
        hook = getattr(self, name)
        setattr(self, name, None)
        if hook is not None:
            hook()

    def seen_messages_now(self, message_ids: Iterable[str], streams: Iterable[str] = (),
                          conn: Connection | None = None) -> tuple[set[str], dict[str, int]]:
        self._hook("before_read")
        answer = super().seen_messages_now(message_ids, streams, conn)
        self._hook("after_read")
        return answer

    def seen_messages_sent(self, message_ids: Iterable[str], streams: Iterable[str],
                           conn: Connection) -> Callable[[], tuple[set[str], dict[str, int]]]:
        self._hook("before_read")
        answer = super().seen_messages_sent(message_ids, streams, conn)

        def hooked() -> tuple[set[str], dict[str, int]]:
            got = answer()
            self._hook("after_read")
            return got

        return hooked


@pytest.fixture()
def keep() -> bool:
    """Whether the ledger keeps its connections (the ledger service does; on SQLite it reads anyway)."""
    return False


@pytest.fixture()
def store(tmp_path: Path) -> HookedStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return HookedStore(EventStore.from_url(url).engine)


def new_ledger(store: HookedStore, keep: bool) -> Ledger:
    ledger = Ledger(store, clock=lambda: 100.0, keep_connections=keep)
    store.ledgers.append(ledger)
    return ledger


def ledger_on(store: HookedStore, keep: bool) -> Ledger:
    ledger = new_ledger(store, keep)
    ledger.process([msg(c) for c in TREE], {("t", 0): 2})
    return ledger


def commit(ledger: Ledger, prepared: Prepared) -> None:
    ledger.record(prepared)
    ledger.committed(prepared)


def stored(store: EventStore) -> list[tuple[str | None, str]]:
    """(message id, type) of every event after the tree."""
    return [(r.message_id, r.type) for r in store.read()][len(TREE):]


def assert_consistent(ledger: Ledger, store: EventStore) -> None:
    """Memory equals the log: the state folds from it, positions and the chain are whole, and every
    message is recorded as processed once."""
    assert ledger.state == fold(store)[0]
    assert ledger.head == store.head() and ledger.proj.head_hash == store.read()[-1].hash
    assert verify(store)["ok"]
    ids = [m for m, _ in stored(store) if m is not None]
    assert len(ids) == len(set(ids))


def test_a_duplicate_within_one_batch_is_decided_once(store: HookedStore, keep: bool) -> None:
    ledger = ledger_on(store, keep)
    recorded, _ = ledger.process([submit("j1", "m1"), submit("j1", "m1"), cancel("j1", "m2")], {})
    assert [(r.message_id, r.type) for r in recorded] == [("m1", "JobSubmitted"), ("m2", "JobCancelled")]
    assert_consistent(ledger, store)


def test_a_duplicate_of_a_batch_still_in_flight_is_skipped_from_memory(store: HookedStore, keep: bool) -> None:
    ledger = ledger_on(store, keep)
    first = ledger.prepare([submit("j1", "m1")], {("t", 0): 3})
    second = ledger.prepare([submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 5})
    assert [r.message_id for r in second.records] == ["m2"]
    assert [r.version for r in second.records] == [2]  # the stream's version from the batch in flight
    commit(ledger, first)
    commit(ledger, second)
    assert stored(store) == [("m1", "JobSubmitted"), ("m2", "JobCancelled")]
    assert_consistent(ledger, store)


@pytest.mark.parametrize("when", ["before_read", "after_read"])
def test_a_batch_that_commits_around_the_read_is_not_decided_twice(store: HookedStore, keep: bool,
                                                                   when: str) -> None:
    """Batch A is in flight while B (which repeats A's message) is decided; A commits just before the
    store answers B's read (the answer names A's message) or just after (it does not): either way A's
    message is skipped once, from memory or from the answer."""
    ledger = ledger_on(store, keep)
    first = ledger.prepare([submit("j1", "m1")], {("t", 0): 3})
    setattr(store, when, lambda: ledger.record(first))
    second = ledger.prepare([submit("j2", "m0"), submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 6})
    assert store.head() == len(TREE) + 1  # A is in the store now, B not yet
    ledger.committed(first)
    commit(ledger, second)
    assert stored(store) == [("m1", "JobSubmitted"), ("m0", "JobSubmitted"), ("m2", "JobCancelled")]
    assert_consistent(ledger, store)


@pytest.mark.parametrize("restarted", [False, True], ids=["same-ledger", "restarted-ledger"])
def test_a_message_committed_long_ago_is_undone_and_the_batch_decided_again(
        store: HookedStore, keep: bool, restarted: bool) -> None:
    """m1 (submit j1) committed batches ago comes again between two new messages. Decided on "not
    committed" it would become a rejection (j1 exists) at a position of its own; the answer names it, so
    the batch is decided again without it: no event, positions and versions as if it never came."""
    ledger = ledger_on(store, keep)
    ledger.process([submit("j1", "m1")], {("t", 0): 3})
    ledger.process([submit("j3", "m3")], {("t", 0): 4})
    if restarted:
        ledger = new_ledger(store, keep)
    recorded, _ = ledger.process([submit("j2", "m0"), submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 7})
    head = len(TREE) + 2
    assert [(r.position, r.message_id, r.type, r.version) for r in recorded] == [
        (head + 1, "m0", "JobSubmitted", 1), (head + 2, "m2", "JobCancelled", 2)]
    assert store.load_offsets("ledger") == {("t", 0): 7}
    assert_consistent(ledger, store)


def test_redelivery_after_a_rewind_records_only_what_is_new(store: HookedStore, keep: bool) -> None:
    """A commits, B (decided on A) fails and both are undone in memory; the consumer rewinds to an
    offset before A and gets A's messages again with B's: only B's are recorded."""
    ledger = ledger_on(store, keep)
    first = ledger.prepare([submit("j1", "m1"), submit("j2", "m2")], {("t", 0): 4})
    second = ledger.prepare([cancel("j1", "m3")], {("t", 0): 5})
    commit(ledger, first)

    def unavailable(_dead: object) -> None:
        raise ConnectionError("dead-letter topic unavailable")

    with pytest.raises(ConnectionError):
        ledger.record(second, before_commit=unavailable)
    ledger.abort()
    recorded, _ = ledger.process([submit("j1", "m1"), submit("j2", "m2"), cancel("j1", "m3")], {("t", 0): 5})
    assert [(r.message_id, r.type) for r in recorded] == [("m3", "JobCancelled")]
    assert stored(store) == [("m1", "JobSubmitted"), ("m2", "JobSubmitted"), ("m3", "JobCancelled")]
    assert_consistent(ledger, store)


def test_a_batch_of_only_redelivered_messages_records_nothing(store: HookedStore, keep: bool) -> None:
    ledger = ledger_on(store, keep)
    ledger.process([submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 4})
    recorded, _ = ledger.process([submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 4})
    assert recorded == []
    assert_consistent(ledger, store)


@pytest.mark.parametrize(("cache", "found", "expected"), [
    ({}, {"s": 3}, {"s": 3}),
    ({"s": 5}, {"s": 3}, {"s": 5}),  # decided in a batch in flight: newer than the committed one
    ({"s": 5}, {"t": 0}, {"s": 5, "t": 0}),
    ({"s": 1}, {}, {"s": 1}),
])
def test_versions_read_from_the_store_never_replace_the_cached_ones(
        cache: dict[str, int], found: dict[str, int], expected: dict[str, int]) -> None:
    merge_versions(cache, found)
    assert cache == expected


def pending(mid: str | None, events: int) -> PendingAppend:
    return PendingAppend([Event(f"s-{mid}-{i}", "JobCancelled", {"job_id": "j"}) for i in range(events)], {}, mid)


@pytest.mark.parametrize("batch", [
    [],
    [pending("a", 1)],
    [pending("a", 2), pending("b", 0), pending("c", 1)],
    [pending(None, 1), pending("", 2), pending("d", 1)],
    [pending("a", 0), pending("b", 0)],
])
def test_dedup_rows_name_each_message_s_first_event_as_encode_events_numbers_it(
        batch: list[PendingAppend]) -> None:
    """The rows `processed_messages` counts from the batch equal the ones read off the numbered records
    (`mark_processed` writes those with none and checks the others: ADR 0026)."""
    records, _ = encode_events(batch, 41, "0" * 64, {}, 1.0)
    first: dict[str, int] = {}
    for rec in records:
        if rec.message_id is not None:
            first.setdefault(rec.message_id, rec.position)
    expected = [(p.message_id, first.get(p.message_id)) for p in batch if p.message_id]
    assert processed_messages(batch, 41) == (expected, {m for m, _ in expected})


def test_a_replayed_rewind_costs_one_extra_decision_not_one_per_batch(
        store: HookedStore, keep: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three batches of messages committed before come again, then a new one: the first is decided twice
    (on "not committed", then without them), the others once each, after their answer."""
    ledger = ledger_on(store, keep)
    batches = [[submit(f"j{i}", f"m{i}"), cancel(f"j{i}", f"c{i}")] for i in range(4)]
    for messages in batches[:3]:
        ledger.process(messages, {})
    decisions: list[int] = []
    counted = ledger_batch.decide_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        decisions.append(len(args[1]))
        return counted(*args, **kwargs)

    monkeypatch.setattr(core, "decide_messages", counting)
    recorded = [ledger.process(messages, {})[0] for messages in batches]
    assert [len(r) for r in recorded] == [0, 0, 0, 2]
    assert len(decisions) == 5  # 2 + 1 + 1 + 1
    assert_consistent(ledger, store)


# -- ADR 0026: a message that recorded events is known by them; a dedup row only for one that recorded none


def dedup_rows(store: EventStore) -> list[tuple[str, int | None]]:
    with store.engine.connect() as conn:
        return [(r.message_id, r.position) for r in
                conn.execute(select(schema.processed_messages).order_by(schema.processed_messages.c.message_id))]


def test_two_ledgers_fed_the_same_messages_interleaved_record_each_once(store: HookedStore, keep: bool) -> None:
    """Two `Ledger`s on one store (a second ledger started by mistake) get the same messages, interleaved.
    Each decides a batch on the head it loaded; the second to write finds the head moved under the lock
    (`LogMoved`), re-reads the state and, deciding again, skips what the other recorded: it knows them by
    their events alone (no dedup row is written for a message with events)."""
    a = ledger_on(store, keep)
    b = new_ledger(store, keep)
    first = a.prepare([submit("j1", "m1"), submit("j2", "m2")], {("t", 0): 4})
    lost = b.prepare([submit("j2", "m2"), submit("j3", "m3")], {("t", 0): 5})  # same head, m2 in both
    commit(a, first)
    with pytest.raises(LogMoved):
        b.record(lost)
    b.abort(reload=True)
    recorded, _ = b.process([submit("j2", "m2"), submit("j3", "m3")], {("t", 0): 5})
    assert [(r.message_id, r.type) for r in recorded] == [("m3", "JobSubmitted")]
    # now `a` is behind: its dedup read names m3 (recorded by b), the rest it decides on its stale head
    store.after_read = lambda: commit(b, b.prepare([cancel("j1", "c1"), cancel("j2", "c2")], {("t", 0): 7}))
    late = a.prepare([submit("j3", "m3"), cancel("j1", "c1"), cancel("j3", "c3")], {("t", 0): 8})
    assert [r.message_id for r in late.records] == ["c1", "c3"]  # b's c1 committed after a's read
    with pytest.raises(LogMoved):
        a.record(late)
    a.abort(reload=True)
    recorded, _ = a.process([submit("j3", "m3"), cancel("j1", "c1"), cancel("j3", "c3")], {("t", 0): 8})
    assert [(r.message_id, r.type) for r in recorded] == [("c3", "JobCancelled")]
    assert stored(store) == [("m1", "JobSubmitted"), ("m2", "JobSubmitted"), ("m3", "JobSubmitted"),
                             ("c1", "JobCancelled"), ("c2", "JobCancelled"), ("c3", "JobCancelled")]
    assert dedup_rows(store) == []
    assert_consistent(a, store)


def test_a_redelivery_after_restart_of_a_message_recorded_long_ago_is_skipped_by_its_events(
        store: HookedStore, keep: bool) -> None:
    """m1 recorded many batches before the restart, with events only (no dedup row): a new ledger's read
    finds it by `events.message_id` and records nothing for it."""
    ledger = ledger_on(store, keep)
    ledger.process([submit("j1", "m1")], {("t", 0): 3})
    for i in range(2, 12):
        ledger.process([submit(f"j{i}", f"m{i}")], {("t", 0): 2 + i})
    assert dedup_rows(store) == []
    restarted = new_ledger(store, keep)
    recorded, _ = restarted.process([submit("j1", "m1"), cancel("j1", "m12")], {("t", 0): 14})
    assert [(r.message_id, r.type) for r in recorded] == [("m12", "JobCancelled")]
    assert store.seen_messages_now(["m1", "m12", "m13"]) == ({"m1", "m12"}, {})
    assert_consistent(restarted, store)


SESSION = [RegisterNode("n0", 8, "A100", ["z1", "b0", "n0"]),
           SubmitJob("s1", "a1", 1, 600.0, ["jupyter"], True, "interactive"),
           PlaceJob("s1", {"n0": [0]}, True), ReportJobStarted("s1", 1, 4242, 100.0),
           OpenSession("s1", 1, 700.0, [650.0])]


def test_a_message_that_recorded_no_event_keeps_its_dedup_row_and_is_skipped(
        store: HookedStore, keep: bool) -> None:
    """"Busy" for a session known busy records nothing: its row in `processed_messages` is what makes a
    redelivery after the session turned idle a duplicate (decided again, it would record SessionActive)."""
    ledger = ledger_on(store, keep)
    ledger.process([msg(c) for c in SESSION], {("t", 0): 7})
    recorded, _ = ledger.process([msg(ReportUtilisation("s1", 1, False, 150.0), "u1")], {("t", 0): 8})
    assert recorded == [] and dedup_rows(store) == [("u1", None)]
    ledger.process([msg(ReportUtilisation("s1", 1, True, 160.0), "u2")], {("t", 0): 9})
    assert stored(store)[-1] == ("u2", "SessionIdle")
    head = store.head()
    for again in (ledger, new_ledger(store, keep)):
        recorded, _ = again.process([msg(ReportUtilisation("s1", 1, False, 150.0), "u1")], {("t", 0): 10})
        assert recorded == [] and store.head() == head
    assert dedup_rows(store) == [("u1", None)]
    assert_consistent(ledger, store)


def test_a_second_ledger_that_recorded_a_message_with_no_event_refuses_this_one_s_events_for_it(
        store: HookedStore, keep: bool) -> None:
    """The case the head check cannot see: `a`'s batch records no event (u1: "busy", known busy), so the
    head stays where `b` decided its batch, and in `b`'s batch u1 follows u2 ("idle") and records
    SessionActive. `b` finds u1's dedup row under the lock: its batch fails whole, and decided again it
    skips u1. (Without the check u1 would be recorded twice: `steward audit verify` names that.)"""
    a = ledger_on(store, keep)
    a.process([msg(c) for c in SESSION], {("t", 0): 7})
    b = new_ledger(store, keep)
    busy, idle = msg(ReportUtilisation("s1", 1, False, 150.0), "u1"), msg(ReportUtilisation("s1", 1, True, 160.0), "u2")
    nothing = a.prepare([busy], {("t", 0): 8})
    both = b.prepare([idle, busy], {("t", 0): 9})
    assert nothing.records == [] and [r.type for r in both.records] == ["SessionIdle", "SessionActive"]
    commit(a, nothing)
    with pytest.raises(MessageRecordedTwice, match="u1"):
        b.record(both)
    b.abort()
    recorded, _ = b.process([idle, busy], {("t", 0): 9})
    assert [(r.message_id, r.type) for r in recorded] == [("u2", "SessionIdle")]
    assert dedup_rows(store) == [("u1", None)]
    assert_consistent(b, store)
