"""The rebuild from a checked snapshot, as a contract run against SQLite (here) and PostgreSQL (the
integration tier): a full rebuild records the snapshot it proved, a later rebuild starts there and folds
only the tail, and whatever differs (a live row written outside the ledger, a checked snapshot that is
gone) sends it back to the full rebuild."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from steward.audit.rebuild import latest_check, rebuild
from steward.audit.snapshots import take_snapshots
from steward.domain.commands import SetAllocations
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from tests.unit.store.builders import history_messages, msg


def feed(store: EventStore, messages: list[Any], clock: list[float], batch: int = 7) -> None:
    ledger = Ledger(store, clock=lambda: clock[0])
    for i in range(0, len(messages), batch):
        ledger.process(messages[i:i + batch], {})
        clock[0] += 1.0


def halves(jobs: int = 30) -> tuple[list[Any], list[Any]]:
    messages = list(history_messages(jobs))
    return messages[:len(messages) // 2], messages[len(messages) // 2:]


class RebuildContract:
    def test_a_full_rebuild_records_its_snapshot_and_the_next_rebuild_folds_only_the_tail(
            self, store: EventStore) -> None:
        first, second = halves()
        clock = [1_000.0]
        feed(store, first, clock)
        assert latest_check(store) is None
        assert rebuild(store)["mode"] == "full"  # nothing checked yet
        full = rebuild(store, full=True)
        assert full["ok"] and full["snapshot_check"]["recorded"], full
        checked_at = full["head"]
        assert latest_check(store)["position"] == checked_at  # type: ignore[index]
        feed(store, second, clock)
        take_snapshots(store, every=9, base_every=40)
        report = rebuild(store)
        assert report["ok"] and report["mode"] == "snapshot", report
        assert report["from_snapshot"] == checked_at and report["head"] == store.head()
        assert report["tail_events"] == store.head() - checked_at > 50
        again = rebuild(store, full=True)
        assert again["ok"] and {k: v["rows"] for k, v in again["tables"].items()} == {
            k: v["rows"] for k, v in report["tables"].items()}

    def test_a_tail_with_events_that_are_not_job_local_is_folded_whole(self, store: EventStore) -> None:
        first, second = halves()
        clock = [1_000.0]
        feed(store, first, clock)
        assert rebuild(store, full=True)["ok"]
        feed(store, [msg(SetAllocations("cluster", {"research": 0.5, "prod": 0.5}, "rebalance")), *second], clock)
        report = rebuild(store)
        assert report["ok"] and report["mode"] == "snapshot", report

    def test_a_live_row_written_outside_the_ledger_is_found_and_named(self, store: EventStore) -> None:
        first, second = halves()
        clock = [1_000.0]
        feed(store, first, clock)
        assert rebuild(store, full=True)["ok"]
        feed(store, second, clock)
        with store.engine.begin() as conn:  # a job the tail did not change, and one it did
            conn.execute(text("UPDATE proj_jobs SET priority = priority + 1 WHERE job_id IN ('j1', 'j29')"))
        report = rebuild(store)
        assert not report["ok"] and report["mode"] == "full" and report["snapshot_rebuild"] == "differs"
        assert [d["key"] for d in report["tables"]["proj_jobs"]["differences"]] == ["j1", "j29"]

    def test_a_checked_snapshot_that_is_gone_sends_the_rebuild_back_to_the_first_event(
            self, store: EventStore) -> None:
        first, second = halves()
        clock = [1_000.0]
        feed(store, first, clock)
        assert rebuild(store, full=True)["ok"]
        feed(store, second, clock)
        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM snapshots"))
        report = rebuild(store)
        assert report["ok"] and report["mode"] == "full"
        assert report["snapshot_rebuild"] == "the checked snapshot is gone or changed"
