"""The store's contract: one suite, run against every adapter (SQLite here, PostgreSQL in the
integration tier). A subclass provides the fixtures `store` (a fresh, migrated store as the application
sees it) and `tamper` (a connection that may change history: the owner, with the append-only trigger
disabled on PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError

from steward.audit.checkpoints import (
    SigningKey,
    consistency_proof,
    inclusion_proof,
    load_or_create_key,
    make_checkpoint,
)
from steward.audit.export import write_ndjson
from steward.audit.rebuild import rebuild
from steward.audit.replay import replay
from steward.audit.snapshots import state_at, state_at_position, take_snapshots
from steward.audit.verify import verify
from steward.domain.commands import SetAllocations, SubmitJob
from steward.domain.events import Event
from steward.ledger.ledger import DeadLetter, Ledger, LogMoved, fold
from steward.store import projections, schema, snapshotparts, verifier
from steward.store.eventstore import ConcurrencyError, EventStore, MessageRecordedTwice, PendingAppend
from steward.store.hashing import GENESIS, canonical_text, event_hash
from steward.store.projections import Projector
from steward.store.recorder import EventRecorder
from tests.unit.store.builders import history_messages, msg

Tamper = Callable[[str, dict[str, Any] | None], None]
# a ledger on the store, recording through one of its adapters (steward.store.recorder): the store's
# test module provides the fixture `ledger_for`, parametrized over its adapters
LedgerFor = Callable[[EventStore], Ledger]


def processed_rows(store: EventStore) -> list[tuple[str, int | None]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(schema.processed_messages.c.message_id, schema.processed_messages.c.position)
                            .order_by(schema.processed_messages.c.message_id)).all()
        conn.rollback()
    return [(r[0], r[1]) for r in rows]


def run_history(store: EventStore, jobs: int = 30, batch: int = 7, start: float = 1_000.0) -> Ledger:
    """Feed the history through the ledger in batches, one simulated second per batch."""
    clock = [start]
    ledger = Ledger(store, clock=lambda: clock[0])
    messages = list(history_messages(jobs))
    for i in range(0, len(messages), batch):
        ledger.process(messages[i:i + batch], {("steward.commands", 0): i + batch})
        clock[0] += 1.0
    return ledger


class StoreContract:
    @pytest.fixture()
    def signing_key(self, tmp_path: Path) -> SigningKey:
        return load_or_create_key(tmp_path / "keys" / "checkpoint.pem")

    # -- appending ----------------------------------------------------------------------------

    def test_positions_are_gap_free_and_versions_count_per_stream(self, store: EventStore) -> None:
        with store.engine.begin() as conn:
            EventRecorder(store).append(
                conn, [PendingAppend([Event("a", "X", {"n": 1}), Event("b", "X", {"n": 2})], {"actor": "t"})])
        with store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend([Event("a", "X", {"n": 3})], {"actor": "t"}, "m-1")])
        recs = store.read()
        assert [(r.position, r.stream_id, r.version) for r in recs] == [(1, "a", 1), (2, "b", 1), (3, "a", 2)]
        assert recs[0].prev_hash == GENESIS and recs[1].prev_hash == recs[0].hash
        assert store.head() == 3 and store.head_hash() == (3, recs[2].hash)
        assert [r.position for r in store.stream("a")] == [1, 3]
        assert [r.position for r in store.by_message("m-1")] == [3]

    def test_the_ledger_reads_committed_message_ids_and_stream_versions_in_one_go(self, store: EventStore) -> None:
        with store.engine.begin() as conn:
            EventRecorder(store).append(
                conn, [PendingAppend([Event("a", "X", {}), Event("a", "X", {}), Event("b", "X", {})],
                                              {"actor": "t"}, "m-1")])
            EventRecorder(store).mark_processed(conn, [("m-1", 1), ("m-2", None)])  # m-1 recorded events: no row for it
            conn.execute(schema.processed_messages.insert(), [{"message_id": "m-4", "position": 1}])  # as before 0026
        seen, versions = store.seen_messages_now(["m-1", "m-2", "m-3", "m-4", "a"], ["a", "b", "c", "m-1"])
        assert seen == {"m-1", "m-2", "m-4"}  # m-1 by its events alone (ADR 0026)
        assert versions == {"a": 2, "b": 1, "c": 0, "m-1": 0}
        assert store.seen_messages_now([], []) == (set(), {})

    def test_ids_and_stream_names_that_need_escaping_are_matched_exactly(self, store: EventStore) -> None:
        """The id and stream lists go to PostgreSQL as one JSON text: quotes, backslashes, commas,
        braces, control characters, non-ASCII and the empty string are each matched as themselves."""
        odd = ['q"uote', "back\\slash", "a,b", "{x}", "tab\tnl\n", "é😀\u2028", "", "NULL", " sp "]
        with store.engine.begin() as conn:
            # half the ids known by their events, half by a dedup row (messages that recorded no event)
            EventRecorder(store).append(
                conn, [PendingAppend([Event(s, "X", {})], {"actor": "t"}, s if i % 2 else f"other-{i}")
                                for i, s in enumerate(odd)])
            EventRecorder(store).mark_processed(conn, [(m, None) for m in odd[::2]])
            assert store.seen_messages(conn, [*odd, "a", "b", "x"]) == set(odd)
            assert store.stream_versions(conn, [*odd, "a"]) == dict.fromkeys(odd, 1) | {"a": 0}
        seen, versions = store.seen_messages_now([*odd, "q", "quote"], [*odd, "NUL"])
        assert seen == set(odd)
        assert versions == dict.fromkeys(odd, 1) | {"NUL": 0}

    def test_expected_version_mismatch_is_refused_and_nothing_is_written(self, store: EventStore) -> None:
        with store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend([Event("a", "X", {})], {})])
        with pytest.raises(ConcurrencyError), store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend([Event("a", "X", {})], {}, expected_versions={"a": 0})])
        assert store.head() == 1

    def test_the_database_refuses_a_second_event_at_one_stream_version(self, store: EventStore) -> None:
        with store.engine.begin() as conn:
            (rec,) = EventRecorder(store).append(conn, [PendingAppend([Event("a", "X", {})], {})])
        row = rec.to_dict() | {"position": 2}
        with pytest.raises(IntegrityError), store.engine.begin() as conn:
            conn.execute(schema.events.insert(), [row])

    def test_payloads_are_stored_in_canonical_form_and_read_back_equal(self, store: EventStore) -> None:
        payload = {"z": 1, "a": [1.0, 2.5, "é"], "m": {"y": None, "b": True}, "f": 600.0}
        with store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend([Event("s", "X", payload)], {"actor": "ü"}, "m")])
        (row,) = list(store.rows())
        assert row.payload_text == canonical_text(payload) and row.metadata_text == canonical_text({"actor": "ü"})
        (rec,) = store.read()
        assert rec.payload == payload
        assert rec.hash == event_hash(GENESIS, position=1, stream_id="s", version=1, type="X", schema_version=1,
                                      payload=payload, metadata={"actor": "ü"}, message_id="m",
                                      recorded_at=rec.recorded_at)

    def test_the_bulk_fold_reader_reads_back_what_was_stored(self, store: EventStore) -> None:
        """`fold_rows` (COPY TO STDOUT on PostgreSQL, parsed by hand) returns what `read` returns, for
        text that COPY escapes: tabs, newlines, backslashes, and non-ASCII."""
        payloads: list[dict[str, Any]] = [
            {"s": "tab\there", "n": "line\nbreak\r", "b": "back\\slash \\t \\\\N", "u": "é\u2028😀"},
            {"x": 1, "f": 0.1, "l": ["\\", "\t", ""]}, {}]
        with store.engine.begin() as conn:
            EventRecorder(store).append(
                conn, [PendingAppend([Event("s\\1\t", "X", p) for p in payloads], {"actor": "a"}, "m")])
        read = store.read()
        folded = list(store.fold_rows(0))
        assert [(r.position, r.stream_id, r.type, r.schema_version, r.payload, r.recorded_at, r.hash)
                for r in read] == folded
        assert [f[4] for f in folded] == payloads
        assert [f[0] for f in store.fold_rows(1, 2)] == [2]

    def test_offsets_are_upserted_and_messages_deduplicated(self, store: EventStore) -> None:
        with store.engine.begin() as conn:
            EventRecorder(store).save_offsets(conn, "ledger", {("t", 0): 5, ("t", 1): 7})
            EventRecorder(store).mark_processed(conn, [("m-1", None)])
        with store.engine.begin() as conn:
            EventRecorder(store).save_offsets(conn, "ledger", {("t", 0): 9})
            assert store.seen_messages(conn, ["m-1", "m-2"]) == {"m-1"}
        with pytest.raises((IntegrityError, psycopg.IntegrityError)), store.engine.begin() as conn:
            EventRecorder(store).mark_processed(
                conn, [("m-1", None)])  # the primary key refuses a second row (SQLAlchemy's
            # error on SQLite, the driver's from the COPY on PostgreSQL)
        assert store.load_offsets("ledger") == {("t", 0): 9, ("t", 1): 7}

    def test_a_failed_batch_leaves_neither_rows_nor_state(self, store: EventStore,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        ledger = Ledger(store)
        ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"))], {("t", 0): 1})
        before = ledger.state

        def crash(*_: Any, **__: Any) -> None:
            raise OSError("the disk went away after the events were appended")

        monkeypatch.setattr(projections, "write_rows", crash)  # called after the events' COPY on either store
        with pytest.raises(OSError):
            ledger.process([msg(SetAllocations("a", {"a1": 1.0}, "x")), msg(SubmitJob("j", "a1", 1, 0, ["t"]))],
                           {("t", 0): 3})
        assert ledger.state == before and store.head() == 1 and ledger.head == 1
        monkeypatch.undo()
        assert store.load_offsets("ledger") == {("t", 0): 1}
        recorded, _ = ledger.process([msg(SetAllocations("a", {"a1": 1.0}, "x"))], {("t", 0): 2})
        assert [r.position for r in recorded] == [2] and ledger.state == fold(store)[0]

    # -- recording a batch: the one sequence, through each adapter (steward.store.recorder) ----------

    def test_each_adapter_records_batches_that_fold_rebuild_and_verify(self, store: EventStore,
                                                                       ledger_for: LedgerFor) -> None:
        clock = [1_000.0]
        ledger = ledger_for(store)
        ledger.clock = lambda: clock[0]
        messages = list(history_messages(12))
        for i in range(0, len(messages), 7):
            ledger.process(messages[i:i + 7], {("steward.commands", 0): i + 7})
            clock[0] += 1.0
        state, head = fold(store)
        assert ledger.state == state and ledger.head == head == store.head() and head > 40
        assert store.head_hash() == (head, ledger.proj.head_hash)
        assert rebuild(store)["ok"] and verify(store)["ok"]
        assert store.load_offsets("ledger") == {("steward.commands", 0): len(messages) - len(messages) % 7 + 7}
        assert {m for m, _ in processed_rows(store)} <= {r.message_id for r in store.read()} | {None}

    def test_each_adapter_refuses_a_batch_when_another_writer_moved_the_log(self, store: EventStore,
                                                                            ledger_for: LedgerFor) -> None:
        ledger = ledger_for(store)
        ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"))], {("t", 0): 1})
        prepared = ledger.prepare([msg(SubmitJob("j1", "a", 1, 0, ["t"]))], {("t", 0): 2})
        with store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend([Event("other", "X", {})], {"actor": "t"})])
        with pytest.raises(LogMoved, match="head 2, expected 1"):
            ledger.record(prepared)
        ledger.abort(reload=True)
        assert store.head() == 2 and store.load_offsets("ledger") == {("t", 0): 1}
        assert [r.stream_id for r in store.read()][-1] == "other"

    def test_each_adapter_refuses_events_for_a_message_another_writer_recorded_without_any(
            self, store: EventStore, ledger_for: LedgerFor) -> None:
        """ADR 0026: a batch recording no event leaves the head where it was; the dedup check sees it."""
        ledger = ledger_for(store)
        ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"))], {("t", 0): 1})
        prepared = ledger.prepare([msg(SubmitJob("j1", "a", 1, 0, ["t"]), "u1")], {("t", 0): 2})
        with store.engine.begin() as conn:
            EventRecorder(store).insert_processed(conn, [("u1", None)])
        with pytest.raises(MessageRecordedTwice, match="u1"):
            ledger.record(prepared)
        ledger.abort(reload=True)
        assert store.head() == 1 and store.load_offsets("ledger") == {("t", 0): 1}

    def test_each_adapter_rolls_the_batch_back_when_its_dead_letters_cannot_be_published(
            self, store: EventStore, ledger_for: LedgerFor) -> None:
        ledger = ledger_for(store)
        ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"))], {("t", 0): 1})
        before = ledger.state

        def unavailable(dead: list[DeadLetter]) -> None:
            assert [d.source for d in dead] == ["t/0@2"]
            raise OSError("the dead-letter topic is away")

        batch = [msg(SubmitJob("j1", "a", 1, 0, ["t"])), ("t/0@2", b"not a command")]
        with pytest.raises(OSError, match="dead-letter"):
            ledger.process(batch, {("t", 0): 3}, unavailable)
        assert ledger.state == before and store.head() == 1 and store.load_offsets("ledger") == {("t", 0): 1}
        assert processed_rows(store) == [] and rebuild(store)["ok"]
        recorded, dead = ledger.process(batch, {("t", 0): 3})
        assert [r.type for r in recorded] == ["JobSubmitted"] and len(dead) == 1
        assert store.load_offsets("ledger") == {("t", 0): 3} and rebuild(store)["ok"]

    # -- the ledger over the store --------------------------------------------------------------

    def test_ledger_state_projections_replay_and_rebuild_agree(self, store: EventStore) -> None:
        ledger = run_history(store)
        state, head = fold(store)
        assert ledger.state == state and ledger.head == head == store.head()
        report = rebuild(store)
        assert report["ok"], report["tables"]
        assert {t: v["rows"] for t, v in report["tables"].items()} == {
            "proj_allocations": 5, "proj_nodes": 2, "proj_jobs": 28}
        rep = replay(store)
        assert rep["ok"] and rep["decisions"] == rep["reproduced"] > 100, rep

    def test_rebuild_names_a_projection_written_outside_the_ledger(self, store: EventStore) -> None:
        run_history(store, jobs=5)
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE proj_jobs SET state = 'RUNNING' WHERE job_id = 'j2'"))
        report = rebuild(store)
        assert not report["ok"] and not report["tables"]["proj_jobs"]["equal"]
        assert report["tables"]["proj_allocations"]["equal"]
        assert report["tables"]["proj_jobs"]["differences"][0]["key"] == "j2"
        assert rebuild(store, replace=True)["replaced"] and rebuild(store)["ok"]

    def test_replay_reports_a_decision_the_policy_does_not_reproduce(self, store: EventStore,
                                                                       tamper: Tamper) -> None:
        run_history(store, jobs=3)
        # the recorded JobSubmitted of j1 claims another priority than its command asked: rehash it all
        rewrite_from(store, tamper, 1, lambda ev: ev | {"payload": ev["payload"] | {"priority": 99}}
                     if ev["type"] == "JobPlaced" and ev["payload"]["job_id"] == "j1" else ev)
        rep = replay(store)
        assert not rep["ok"] and rep["different"] == 1
        assert rep["differences"][0]["position"] == store.stream("job-j1")[1].position

    # -- verification and tampering -------------------------------------------------------------

    def test_an_untouched_log_verifies(self, store: EventStore, signing_key: SigningKey) -> None:
        run_history(store, jobs=10)
        make_checkpoint(store, signing_key, upto=20)
        make_checkpoint(store, signing_key)
        report = verify(store)
        assert report["ok"] and report["events"] == store.head() == report["head"], report
        assert report["checkpoints_checked"] == 2
        ranged = verify(store, 5, 12)
        assert ranged["ok"] and ranged["events"] == 8

    @pytest.mark.parametrize(("how", "kind"), [
        ("flip", "altered"), ("delete", "missing"), ("swap", "reordered"), ("truncate", "truncated"),
        ("fork", "forked"),
    ])
    def test_verify_names_each_kind_of_tampering(self, store: EventStore, tamper: Tamper,
                                                 signing_key: SigningKey, how: str, kind: str) -> None:
        run_history(store, jobs=10)
        make_checkpoint(store, signing_key)
        head = store.head()
        where = 12
        if how == "flip":  # one byte of one payload
            row = store.read(after=where - 1, limit=1)[0]
            text_ = canonical_text(row.payload).replace('"', "'", 1).replace("'", '"', 1)
            text_ = text_.replace(":", ": ", 1)  # same JSON value, other bytes: still altered
            tamper("UPDATE events SET payload = :p WHERE position = :n", {"p": text_, "n": where})
        elif how == "delete":
            tamper("DELETE FROM events WHERE position = :n", {"n": where})
        elif how == "swap":  # rows 12 and 15 change places (content moves, positions stay)
            swap_rows(tamper, where, where + 3)
        elif how == "truncate":
            tamper("DELETE FROM events WHERE position > :n", {"n": head - 4})
            where = head - 3
        elif how == "fork":  # a different, internally consistent history from position 12 on
            rewrite_from(store, tamper, where, lambda ev: ev | {"metadata": ev["metadata"] | {"actor": "mallory"}}
                         if ev["position"] == where else ev)
        report = verify(store)
        assert not report["ok"]
        assert report["problem"] == kind, report
        if how == "fork":
            assert report["first_bad_position"] <= where
        else:
            assert report["first_bad_position"] == where, report

    @pytest.mark.parametrize(("row", "kind", "at"), [
        ("none-with-events", "recorded-twice", 12),  # events of a message whose dedup row says it has none
        ("beyond-head", "truncated", None),  # a row as before ADR 0026, past the end of the log
    ])
    def test_verify_checks_the_dedup_rows_against_the_log(self, store: EventStore, tamper: Tamper, row: str,
                                                           kind: str, at: int | None) -> None:
        """The dedup table holds rows only for messages that recorded no event (ADR 0026): such a row with
        events means the message was recorded twice; rows with a position (written before 0026) are, as
        before, a witness of how far the log went."""
        run_history(store, jobs=5)
        head = store.head()
        assert verify(store)["ok"]
        message = store.read(after=11, limit=1)[0].message_id
        if row == "none-with-events":
            tamper("INSERT INTO processed_messages (message_id, position) VALUES (:m, NULL)", {"m": message})
        else:
            tamper("INSERT INTO processed_messages (message_id, position) VALUES ('gone', :p)", {"p": head + 3})
        report = verify(store)
        assert not report["ok"] and report["problem"] == kind, report
        assert report["first_bad_position"] == (head + 1 if at is None else at)
        tamper("DELETE FROM processed_messages", None)
        tamper("INSERT INTO processed_messages (message_id, position) VALUES (:m, 12), ('no-events', NULL)",
               {"m": message})  # an old row that agrees, and a message that recorded nothing
        assert verify(store)["ok"]

    # -- checkpoints, proofs, export ---------------------------------------------------------------

    def test_export_and_proofs_verify_without_the_database(self, store: EventStore, signing_key: SigningKey,
                                                           tmp_path: Path) -> None:
        run_history(store, jobs=10)
        first = make_checkpoint(store, signing_key, upto=17)
        second = make_checkpoint(store, signing_key)
        assert first and second
        export = tmp_path / "log.ndjson"
        with export.open("w") as fh:
            write_ndjson(store, fh)
        pub = verifier.load_public_key(signing_key.public_pem())
        assert verifier.verify_export(export, pub)["ok"]
        for pos in (1, 9, 17):
            proof = inclusion_proof(store, pos, second["tree_size"])
            assert verifier.verify_proof(json.loads(json.dumps(proof)), pub)[0]
        proof = consistency_proof(store, 17, second["tree_size"])
        assert verifier.verify_proof(proof, pub)[0]
        forged = json.loads(json.dumps(proof))
        forged["first"]["root"] = second["root"]
        assert not verifier.verify_proof(forged, pub)[0]
        lines = export.read_text().splitlines()
        event = json.loads(lines[5])
        event["payload"]["gpus"] = 64
        lines[5] = json.dumps(event)
        export.write_text("\n".join(lines) + "\n")
        bad = verifier.verify_export(export, pub)
        assert not bad["ok"] and bad["problem"] == "altered" and bad["first_bad_position"] == 5

    # -- time travel -----------------------------------------------------------------------------

    def test_state_at_a_past_time_equals_a_fold_to_that_time(self, store: EventStore) -> None:
        run_history(store, jobs=20, start=1_000.0)
        assert take_snapshots(store, every=25) >= 3
        for at in (1_000.0, 1_003.5, 1_010.0, 1_030.0, 5_000.0):
            proj, info = state_at(store, at)
            expected = [r for r in store.read() if r.recorded_at <= at]
            assert info["position"] == (expected[-1].position if expected else 0)
            reference = Ledger.__new__(Ledger)
            state = fold_upto(store, info["position"])
            assert proj.state() == state, at
            del reference
        proj, info = state_at(store, 999.0)
        assert info["position"] == 0 and not proj.jobs() and proj.job_counts() == {}

    def test_time_travel_at_every_position_equals_the_reference_fold(
            self, store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
        """Snapshots every 11 events, a base every 44 and deltas between (tails of every length, with and
        without events that are not job-local; chains of up to three deltas) in row blocks of 4 jobs: the
        state, the job counts, the rows and single jobs equal a fold from the start."""
        monkeypatch.setattr(snapshotparts, "SNAPSHOT_BLOCK", 4)
        monkeypatch.setattr(snapshotparts, "FIRST_ROWS", 6)  # the API's page: from the first rows or every block
        run_history(store, jobs=25, batch=5, start=1_000.0)
        assert take_snapshots(store, every=11, base_every=44) >= 3
        with store.engine.connect() as conn:
            formats = {r[0][:9] for r in conn.execute(text("SELECT format FROM snapshots"))}
            conn.rollback()
        assert formats == {"parts-2b:", "parts-2d:"}
        reference = Projector()
        rows = list(store.read())
        for rec in [None, *rows]:
            if rec is not None:
                reference.apply(rec.as_event(), rec.recorded_at, rec.position, rec.hash)
            position = rec.position if rec else 0
            st = state_at_position(store, position)
            assert st.position == position
            assert st.state() == fold_upto(store, position), position
            assert st.rows() == reference.rows(), position
            counts: dict[str, int] = {}
            for job in reference.jobs.values():
                counts[job.state] = counts.get(job.state, 0) + 1
            assert st.job_counts() == dict(sorted(counts.items())), position
            by_submission = sorted(reference.jobs.values(), key=lambda j: (j.submitted_at, j.job_id))
            for n in (1, 3, 7):
                assert st.first_jobs(n) == by_submission[:n], (position, n)
            for job_id in [*sorted(reference.jobs)[::7], "no-such-job"]:
                assert st.job(job_id) == reference.jobs.get(job_id), (position, job_id)
            assert (st.head_hash, st.recorded_at) == (reference.head_hash, reference.recorded_at), position


def fold_upto(store: EventStore, position: int) -> Any:
    from steward.domain.state import LedgerState, evolve

    state = LedgerState()
    for rec in store.read(to=position):
        state = evolve(state, rec.as_event(), rec.recorded_at)
    return state


def swap_rows(tamper: Tamper, a: int, b: int) -> None:
    cols = "stream_id, version, type, schema_version, payload, metadata, message_id, recorded_at, prev_hash, hash"
    tamper(f"CREATE TABLE swap_tmp AS SELECT position, {cols} FROM events WHERE position IN (:a, :b)",
           {"a": a, "b": b})
    tamper("UPDATE events SET stream_id = stream_id || '#', version = -version WHERE position IN (:a, :b)",
           {"a": a, "b": b})
    sets = ", ".join(f"{c} = (SELECT {c} FROM swap_tmp WHERE position = :other)" for c in cols.split(", "))
    tamper(f"UPDATE events SET {sets} WHERE position = :me", {"me": a, "other": b})
    tamper(f"UPDATE events SET {sets} WHERE position = :me", {"me": b, "other": a})
    tamper("DROP TABLE swap_tmp", None)


def rewrite_from(store: EventStore, tamper: Tamper, start: int,
                 change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite the log from `start` on with recomputed hashes (what an attacker with write access does)."""
    events = [r.to_dict() for r in store.read()]
    prev = events[start - 2]["hash"] if start > 1 else GENESIS
    for ev in events[start - 1:]:
        ev = change(ev)
        h = verifier.hash_of_event_dict(ev, prev_hash=prev)
        tamper("UPDATE events SET payload = :p, metadata = :m, prev_hash = :ph, hash = :h WHERE position = :n",
               {"p": canonical_text(ev["payload"]), "m": canonical_text(ev["metadata"]), "ph": prev, "h": h,
                "n": ev["position"]})
        prev = h


def sql_tamper(conn_factory: Callable[[], Connection]) -> Tamper:
    def run(sql: str, params: dict[str, Any] | None) -> None:
        with conn_factory() as conn:
            conn.execute(text(sql), params or {})
            conn.commit()

    return run


__all__ = ["StoreContract", "SubmitJob", "run_history", "sql_tamper"]
