"""The dedup interleavings of tests/unit/ledger/test_ledger_dedup.py on PostgreSQL, with the ledger
service's kept connections: the dedup statement is sent before the batch is decided and its answer taken
after (ADR 0023), and a batch commits before the statement is sent or after its answer came."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from steward.store.eventstore import EventStore
from tests.integration.pg import pg_owner, pg_store
from tests.unit.ledger.test_ledger_dedup import (
    HookedStore,
    test_a_batch_of_only_redelivered_messages_records_nothing,
    test_a_batch_that_commits_around_the_read_is_not_decided_twice,
    test_a_duplicate_of_a_batch_still_in_flight_is_skipped_from_memory,
    test_a_duplicate_within_one_batch_is_decided_once,
    test_a_message_committed_long_ago_is_undone_and_the_batch_decided_again,
    test_a_replayed_rewind_costs_one_extra_decision_not_one_per_batch,
    test_redelivery_after_a_rewind_records_only_what_is_new,
)

__all__ = [
    "pg_owner", "pg_store",
    "test_a_batch_of_only_redelivered_messages_records_nothing",
    "test_a_batch_that_commits_around_the_read_is_not_decided_twice",
    "test_a_duplicate_of_a_batch_still_in_flight_is_skipped_from_memory",
    "test_a_duplicate_within_one_batch_is_decided_once",
    "test_a_message_committed_long_ago_is_undone_and_the_batch_decided_again",
    "test_a_replayed_rewind_costs_one_extra_decision_not_one_per_batch",
    "test_redelivery_after_a_rewind_records_only_what_is_new",
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
