"""The dedup interleavings of tests/unit/ledger/test_ledger_dedup.py on PostgreSQL, with the ledger
service's kept connections: the dedup statement is sent before the batch is decided and its answer taken
after (ADR 0023), and a batch commits before the statement is sent or after its answer came."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text

from steward.store.eventstore import EventStore
from tests.integration.pg import pg_owner, pg_store
from tests.unit.ledger.test_ledger_dedup import (
    TREE,
    HookedStore,
    assert_consistent,
    cancel,
    ledger_on,
    submit,
    test_a_batch_of_only_redelivered_messages_records_nothing,
    test_a_batch_that_commits_around_the_read_is_not_decided_twice,
    test_a_duplicate_of_a_batch_still_in_flight_is_skipped_from_memory,
    test_a_duplicate_within_one_batch_is_decided_once,
    test_a_message_committed_long_ago_is_undone_and_the_batch_decided_again,
    test_a_message_that_recorded_no_event_keeps_its_dedup_row_and_is_skipped,
    test_a_redelivery_after_restart_of_a_message_recorded_long_ago_is_skipped_by_its_events,
    test_a_replayed_rewind_costs_one_extra_decision_not_one_per_batch,
    test_a_second_ledger_that_recorded_a_message_with_no_event_refuses_this_one_s_events_for_it,
    test_redelivery_after_a_rewind_records_only_what_is_new,
    test_two_ledgers_fed_the_same_messages_interleaved_record_each_once,
)

__all__ = [
    "pg_owner", "pg_store",
    "test_a_batch_of_only_redelivered_messages_records_nothing",
    "test_a_batch_that_commits_around_the_read_is_not_decided_twice",
    "test_a_duplicate_of_a_batch_still_in_flight_is_skipped_from_memory",
    "test_a_duplicate_within_one_batch_is_decided_once",
    "test_a_message_committed_long_ago_is_undone_and_the_batch_decided_again",
    "test_a_message_that_recorded_no_event_keeps_its_dedup_row_and_is_skipped",
    "test_a_redelivery_after_restart_of_a_message_recorded_long_ago_is_skipped_by_its_events",
    "test_a_replayed_rewind_costs_one_extra_decision_not_one_per_batch",
    "test_a_second_ledger_that_recorded_a_message_with_no_event_refuses_this_one_s_events_for_it",
    "test_redelivery_after_a_rewind_records_only_what_is_new",
    "test_two_ledgers_fed_the_same_messages_interleaved_record_each_once",
]


@pytest.fixture()
def keep() -> bool:
    return True


@pytest.fixture()
def store(pg_store: EventStore) -> Iterator[HookedStore]:
    hooked = HookedStore(pg_store.engine)
    yield hooked
    for ledger in hooked.ledgers:
        ledger.close()


def test_a_dedup_connection_the_server_ended_fails_its_batch_and_the_next_gets_a_new_one(store: HookedStore) -> None:
    """The server ends the kept read connection between two batches: the next batch's statement fails
    (sent, or answered, on a dead connection), that batch is undone, and the one after reads on a new
    connection and records it once."""
    ledger = ledger_on(store, True)
    ledger.process([submit("j1", "m1")], {("t", 0): 3})
    read_conn = ledger._kept["read"]
    pid = read_conn.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
    with store.engine.begin() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    with pytest.raises(psycopg.OperationalError):
        ledger.process([submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 5})
    assert store.head() == len(TREE) + 1
    recorded, _ = ledger.process([submit("j1", "m1"), cancel("j1", "m2")], {("t", 0): 5})
    assert [(r.message_id, r.type) for r in recorded] == [("m2", "JobCancelled")]
    assert ledger._kept["read"] is not read_conn
    assert_consistent(ledger, store)
