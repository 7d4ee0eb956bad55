"""The ledger's writer process (ADR 0025) against the real PostgreSQL: a batch is one transaction in the
process, with the same rows as the in-process writer's; a moved head is `LogMoved`, a failed dead-letter
publish commits nothing, and the process dies with the ledger. (A failed batch: test_store_postgres.py's
job row written outside the ledger, with both writers; the ledger service with the process SIGKILLed
mid-stream: test_ledger_reliability.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from steward.audit.rebuild import rebuild
from steward.audit.verify import verify
from steward.domain.commands import ReportUtilisation, SetAllocations, SubmitJob
from steward.ledger.ledger import DeadLetter, Ledger, LogMoved
from steward.ledger.recording.writer import WriterStage
from steward.store.eventstore import EventStore, MessageRecordedTwice
from tests.integration.pg import owner_sql, pg_owner, pg_store, store_test_urls
from tests.integration.test_ledger_fetch import assert_child_dies_with_its_parent
from tests.unit.ledger.test_ledger_dedup import SESSION, TREE, dedup_rows
from tests.unit.store.builders import history_messages, msg

pytestmark = pytest.mark.integration
__all__ = ["pg_owner", "pg_store"]

TABLES = ("events", "processed_messages", "consumer_offsets", "proj_allocations", "proj_nodes", "proj_jobs")


@pytest.fixture()
def stage() -> Iterator[WriterStage]:
    writer = WriterStage(store_test_urls()[0])
    yield writer
    writer.close()


def table_texts(store: EventStore) -> dict[str, list[str]]:
    """Every row of the ledger's tables as PostgreSQL's row text, in key order."""
    with store.engine.connect() as conn:
        out: dict[str, list[str]] = {
            t: list(map(str, conn.exec_driver_sql(f"SELECT t::text FROM {t} t ORDER BY t::text").scalars().all()))
            for t in TABLES}
        conn.rollback()
    return out


def record_history(ledger: Ledger, messages: list[tuple[str, bytes]]) -> None:
    """`messages` in batches of 7."""
    for n, i in enumerate(range(0, len(messages), 7)):
        ledger.process(messages[i:i + 7], {("t", n % 3): i + 7})


def test_the_writer_process_writes_the_rows_the_in_process_writer_writes(pg_store: EventStore, pg_owner: Engine,
                                                                        stage: WriterStage) -> None:
    # a small cluster's history (allocations, nodes, jobs placed, started, ended, cancelled and rejected:
    # every table's upsert and the DELETE of replaced job rows), at the same times through both writers
    messages = list(history_messages(40))
    tick = iter(range(1_000_000))
    in_thread = Ledger(pg_store, keep_connections=True, clock=lambda: 1.7e9 + next(tick))
    record_history(in_thread, messages)
    in_thread.close()
    expected = table_texts(pg_store)
    owner_sql(pg_owner, f"TRUNCATE {', '.join(TABLES)}")
    tick = iter(range(1_000_000))
    in_process = Ledger(pg_store, keep_connections=True, clock=lambda: 1.7e9 + next(tick), writer=stage)
    assert in_process.writer is stage
    record_history(in_process, messages)
    in_process.close()
    got = table_texts(pg_store)
    assert {t: len(rows) for t, rows in got.items()} == {t: len(rows) for t, rows in expected.items()}
    assert got == expected and len(got["events"]) > 100 and got["proj_nodes"] and got["proj_allocations"]
    assert verify(pg_store, checkpoints=False)["ok"]
    assert rebuild(pg_store)["ok"]


def test_a_moved_head_is_log_moved_and_the_ledger_decides_again_on_the_new_one(pg_store: EventStore,
                                                                               stage: WriterStage) -> None:
    ledger = Ledger(pg_store, keep_connections=True, writer=stage)
    ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"), "m0")], {("t", 0): 1})
    Ledger(pg_store).process([msg(SubmitJob("behind", "a", 1, 0.0, ["x"]), "m1")], {("t", 0): 2})
    prepared = ledger.prepare([msg(SubmitJob("j2", "a", 1, 0.0, ["x"]), "m2")], {("t", 0): 3})
    with pytest.raises(LogMoved, match="head 2, expected 1"):
        ledger.record(prepared)
    ledger.abort(reload=True)
    assert pg_store.head() == 2 and pg_store.load_offsets("ledger") == {("t", 0): 2}
    recorded, _ = ledger.process([msg(SubmitJob("j2", "a", 1, 0.0, ["x"]), "m2")], {("t", 0): 3})
    assert [r.position for r in recorded] == [3]
    assert [r.message_id for r in pg_store.read()] == ["m0", "m1", "m2"]
    ledger.close()


def test_dead_letters_are_published_before_the_commit_and_a_failed_publish_commits_nothing(
        pg_store: EventStore, stage: WriterStage) -> None:
    ledger = Ledger(pg_store, keep_connections=True, writer=stage)
    batch = [msg(SetAllocations("cluster", {"a": 1.0}, "setup"), "m0"), ("t/0@1", b"not json")]
    published: list[tuple[list[DeadLetter], int]] = []

    def broker_away(dead: list[DeadLetter]) -> None:
        raise ConnectionError("the dead-letter topic is away")

    with pytest.raises(ConnectionError, match="dead-letter topic is away"):
        ledger.process(batch, {("t", 0): 2}, broker_away)
    assert pg_store.head() == 0 and pg_store.load_offsets("ledger") == {}
    recorded, dead = ledger.process(batch, {("t", 0): 2},
                                    lambda d: published.append((d, pg_store.head())))
    assert [d.source for d in dead] == ["t/0@1"] and len(recorded) == 1
    assert published == [(dead, 0)]  # published while the batch was not committed yet
    assert pg_store.head() == 1 and pg_store.load_offsets("ledger") == {("t", 0): 2}
    ledger.close()


def test_the_writer_process_dies_with_a_sigkilled_ledger(real_services: None) -> None:
    assert_child_dies_with_its_parent(f"""
        import time
        from steward.ledger.recording.writer import WriterStage
        stage = WriterStage({store_test_urls()[0]!r})
        print(stage.pid, flush=True)
        time.sleep(600)
    """)


def test_the_writer_process_refuses_events_for_a_message_another_writer_recorded_with_none(
        pg_store: EventStore, stage: WriterStage) -> None:
    """ADR 0026's case the head check cannot see, through the writer process: `a` records u1 with no event
    (the head stays), `b` decided u1 with an event on that head; the process's check finds u1's dedup row
    under the lock, so `b`'s batch commits nothing, and decided again it skips u1."""
    a = Ledger(pg_store, clock=lambda: 100.0)
    a.process([msg(c) for c in [*TREE, *SESSION]], {("t", 0): 7})
    b = Ledger(pg_store, clock=lambda: 100.0, keep_connections=True, writer=stage)
    busy, idle = msg(ReportUtilisation("s1", 1, False, 150.0), "u1"), msg(ReportUtilisation("s1", 1, True, 160.0), "u2")
    nothing = a.prepare([busy], {("t", 0): 8})
    both = b.prepare([idle, busy], {("t", 0): 9})
    assert nothing.records == [] and [r.type for r in both.records] == ["SessionIdle", "SessionActive"]
    a.record(nothing)
    a.committed(nothing)
    head = pg_store.head()
    with pytest.raises(MessageRecordedTwice, match="u1"):
        b.record(both)
    b.abort()
    assert pg_store.head() == head and pg_store.load_offsets("ledger") == {("t", 0): 8}
    recorded, _ = b.process([idle, busy], {("t", 0): 9})
    assert [(r.message_id, r.type) for r in recorded] == [("u2", "SessionIdle")]
    assert [(m, p) for m, p in dedup_rows(pg_store)] == [("u1", None)]
    b.close()
