"""The store on PostgreSQL: the shared contract suite, positions in commit order under concurrency,
and an append-only log that neither the application nor the owner can change."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, InternalError, ProgrammingError

from steward.audit.verify import _sql_chain_ok, verify
from steward.domain.commands import SetAllocations, SubmitJob
from steward.domain.events import Event
from steward.ledger.ledger import Ledger
from steward.store import schema
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.recorder import EventRecorder
from tests.integration.pg import pg_owner, pg_store, pg_tamper, store_test_urls
from tests.unit.store.builders import msg
from tests.unit.store.contract import StoreContract, Tamper

pytestmark = pytest.mark.integration

__all__ = ["pg_owner", "pg_store", "pg_tamper"]


@pytest.fixture()
def store(pg_store: EventStore) -> EventStore:
    return pg_store


@pytest.fixture()
def tamper(pg_tamper: Tamper) -> Tamper:
    return pg_tamper


@pytest.fixture(params=["thread", "process"])
def ledger_for(request: pytest.FixtureRequest) -> Iterator[Callable[[EventStore], Ledger]]:
    """PostgreSQL's two adapters: `PostgresTransaction` on the ledger's kept connection (the writer thread,
    ADR 0015), and `WriterTransaction`, the same steps in the writer process (ADR 0025)."""
    from steward.ledger.recording.writer import WriterStage

    stages: list[WriterStage] = []
    ledgers: list[Ledger] = []

    def make(store: EventStore) -> Ledger:
        if request.param == "process":
            stages.append(WriterStage(store_test_urls()[0]))
        ledgers.append(Ledger(store, keep_connections=True, writer=stages[-1] if stages else None))
        return ledgers[-1]

    yield make
    for ledger in ledgers:
        ledger.close()
    for stage in stages:
        stage.close()


class TestPostgresStore(StoreContract):
    pass


def append_one(store: EventStore, stream: str, hold_s: float = 0.0, started: threading.Event | None = None) -> int:
    with store.engine.begin() as conn:
        (rec,) = EventRecorder(store).append(conn, [PendingAppend([Event(stream, "X", {"s": stream})], {"actor": "t"})])
        if started is not None:
            started.set()
        time.sleep(hold_s)
    return rec.position


def test_a_slow_transaction_holding_a_lower_position_is_never_skipped_by_a_tailing_reader(
        pg_store: EventStore) -> None:
    append_one(pg_store, "before")
    slow_started = threading.Event()
    results: dict[str, int] = {}
    slow = threading.Thread(target=lambda: results.__setitem__("slow", append_one(pg_store, "slow", 1.5, slow_started)))
    slow.start()
    assert slow_started.wait(10)
    fast = threading.Thread(target=lambda: results.__setitem__("fast", append_one(pg_store, "fast")))
    fast.start()
    # a reader tailing the log the usual way: everything after the last position it saw
    seen: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(seen) < 3:
        for rec in pg_store.read(after=seen[-1] if seen else 0):
            seen.append(rec.position)
        if len(seen) == 1:
            assert "fast" not in results, "a later append committed while a lower position was still open"
        time.sleep(0.02)
    slow.join(10)
    fast.join(10)
    assert results == {"slow": 2, "fast": 3}
    assert seen == [1, 2, 3]  # nothing skipped: the fast append waited for the slow one's commit


def test_concurrent_writers_get_gap_free_positions_and_one_chain(pg_store: EventStore) -> None:
    def writer(n: int) -> None:
        for i in range(25):
            append_one(pg_store, f"w{n}-{i % 3}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r.position for r in pg_store.read()] == list(range(1, 101))
    report = verify(pg_store)
    assert report["ok"] and report["events"] == 100, report


@pytest.mark.parametrize("statement", [
    "UPDATE events SET type = 'Y' WHERE position = 1",
    "DELETE FROM events WHERE position = 1",
    "TRUNCATE events",
    "UPDATE checkpoints SET root = 'x'",
    "DELETE FROM checkpoints",
])
def test_the_application_role_cannot_change_history(pg_store: EventStore, statement: str) -> None:
    append_one(pg_store, "a")
    with pytest.raises(ProgrammingError, match="permission denied"), pg_store.engine.begin() as conn:
        conn.execute(text(statement))
    assert [r.type for r in pg_store.read()] == ["X"]


@pytest.mark.parametrize("statement", [
    "UPDATE events SET type = 'Y' WHERE position = 1",
    "DELETE FROM events WHERE position = 1",
    "TRUNCATE events",
])
def test_even_the_owner_is_refused_by_the_append_only_trigger(pg_store: EventStore, pg_owner: Engine,
                                                              statement: str) -> None:
    append_one(pg_store, "a")
    with pytest.raises((InternalError, DBAPIError), match="append-only"), pg_owner.begin() as conn:
        conn.execute(text(statement))
    assert [r.type for r in pg_store.read()] == ["X"]


def test_the_application_may_insert_and_read_events(pg_store: EventStore) -> None:
    assert append_one(pg_store, "a") == 1
    assert store_test_urls()[0].startswith("postgresql+psycopg://steward_app:")
    with pg_store.engine.connect() as conn:
        assert conn.execute(text("SELECT current_user")).scalar() == "steward_app"


@pytest.mark.parametrize("now", [1_700_000_000.0, 1_700_000_000.123456, 0.5, 1e-7, 123456789012345678.0])
def test_the_server_side_check_hashes_exactly_as_the_python_one(pg_store: EventStore, now: float) -> None:
    odd = ['quo"te', "back\\slash", "tab\tnew\nline", "ünïcødé ✓", "ctl\x01", "plain"]
    with pg_store.engine.begin() as conn:
        EventRecorder(pg_store).append(
            conn, [PendingAppend([Event(s, s, {"v": s, "f": 0.1, "n": [1.5e300, -0.0]}) for s in odd],
                                             {"actor": "é\"", "k": None}, None),
                               PendingAppend([Event("x", "X", {})], {}, "mid-\u2028")], now)
    fast, slow = verify(pg_store, checkpoints=False), verify(pg_store, independent=True, checkpoints=False)
    assert fast["engine"] == "postgresql" and slow["engine"] == "python"
    assert fast["ok"] and slow["ok"] and fast["head_hash"] == slow["head_hash"], (fast, slow)


def test_the_server_side_check_hashes_utf8_bytes_whatever_the_client_encoding(pg_store: EventStore) -> None:
    """The server hashes text as its UTF-8 bytes (`textsend` under the check's own client_encoding), so a
    connection that asks for another encoding (one that holds these characters) does not hash other bytes.
    (The store itself reads JSON as UTF-8, so only the server-side passes run on that connection.)"""
    with pg_store.engine.begin() as conn:
        EventRecorder(pg_store).append(
            conn, [PendingAppend([Event("s", "X", {"v": "ünïcødé"})], {"actor": "é"}, "m-ø")])
    latin1 = EventStore.from_url(store_test_urls()[0] + "?client_encoding=LATIN1")
    try:
        with latin1.engine.connect() as conn:
            assert conn.execute(text("SHOW client_encoding")).scalar() == "LATIN1"
        events, head, suspicious, first, _ = _sql_chain_ok(latin1, 1, None)
    finally:
        latin1.engine.dispose()
    assert (events, head, suspicious, first) == (1, 1, [], 1)
    assert verify(pg_store, checkpoints=False)["engine"] == "postgresql"


def test_the_ledger_keeps_its_connections_and_replaces_one_the_server_dropped(pg_store: EventStore) -> None:
    """The ledger service's `Ledger` keeps one connection for its reads and one for its transactions
    (no pool checkout, and no ping, per batch); when the server ends one, that batch fails as a whole and
    the next runs on a new connection."""
    ledger = Ledger(pg_store, keep_connections=True)
    backends: list[tuple[int, int]] = []

    def pids() -> tuple[int, int]:
        return tuple(c.connection.driver_connection.info.backend_pid  # type: ignore[return-value, union-attr]
                     for c in (ledger._kept["read"], ledger._kept["write"]))

    try:
        ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"), "m0")], {("t", 0): 1})
        backends.append(pids())
        ledger.process([msg(SubmitJob("j1", "a", 1, 0.0, ["x"]), "m1")], {("t", 0): 2})
        backends.append(pids())
        assert backends[0] == backends[1]
        with pg_store.engine.begin() as conn:  # (a role may end its own sessions)
            conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": backends[1][1]})
        with pytest.raises(DBAPIError):
            ledger.process([msg(SubmitJob("j2", "a", 1, 0.0, ["x"]), "m2")], {("t", 0): 3})
        assert pg_store.head() == 2 and pg_store.load_offsets("ledger") == {("t", 0): 2}
        ledger.process([msg(SubmitJob("j2", "a", 1, 0.0, ["x"]), "m2")], {("t", 0): 3})
        assert pids()[0] == backends[0][0] and pids()[1] != backends[1][1]
        assert [r.message_id for r in pg_store.read()] == ["m0", "m1", "m2"]
        assert pg_store.load_offsets("ledger") == {("t", 0): 3}
    finally:
        ledger.close()
    assert ledger._kept == {}


# values COPY's text format escapes or that print in more than one way (ADR 0022: the writer's own COPY text)
ODD = ['q"uote', "back\\slash \\N", "tab\tnl\ncr\r", "\b\v\f\x01\x7f", "é😀\u2028\U0010fffd", "", "\\N", "plain"]


def test_the_writers_copy_text_reads_back_as_the_rows_psycopg_wrote(pg_store: EventStore) -> None:
    """The writer's rows (`copytext`, one COPY write per table) read back from PostgreSQL as the same row text
    as the old path's (psycopg's `write_row` of the same tuples), for events, dedup ids and job rows; and the
    live job rows give `steward audit rebuild`'s server-side checksum of the rebuild's `insert_rows`."""
    from steward.domain.state import Job
    from steward.store import copytext, projections
    from steward.store.encoding import RecordedEvent
    from steward.store.eventstore import COPY_CHUNK_ROWS, EVENT_COLUMNS, chunks, copy_data, copy_rows
    from steward.store.hashing import canonical_text

    times = [1754000000.123456, -0.0, 0.0, 1e-300, 1e300, 600.0, 5e-324]
    odd = [f"{s}{i}" if i >= len(ODD) else s for i, s in enumerate(ODD * 40)]  # 320 rows: two COPY pieces
    records, texts, old_events = [], [], []
    for i, s in enumerate(odd):
        payload, metadata = {"s": s, "n": i, "f": times[i % len(times)]}, {"actor": s}
        p, m = canonical_text(payload), canonical_text(metadata)
        rec = RecordedEvent(i + 1, f"job-{s}", i + 1, f"T{s}", 1 + i, payload, metadata, None if i == 2 else s,
                            times[i % len(times)], "0" * 64, f"{i:064x}")
        records.append(rec)
        texts.append((p, m))
        old_events.append((rec.position, rec.stream_id, rec.version, rec.type, rec.schema_version, p, m,
                           rec.message_id, rec.recorded_at, rec.prev_hash, rec.hash))
    processed = [(f"m{s}", None if i % 3 == 0 else i * 2**40) for i, s in enumerate(odd)]
    jobs: list[tuple[str, Job | None, int]] = [
        (f"j{s}", Job(f"j{s}", s, i, times[i % len(times)], (s, "x", ""), i % 2 == 0, s, -i, 1e9 + i,
                      assignments=((s, (0, i)), ("n2", ())) if i % 2 else (), exit_code=None if i % 2 else -i,
                      started_at=None if i % 3 else times[i % len(times)]), 2**33 + i)
        for i, s in enumerate(odd)] + [("jgone", None, 7)]
    with pg_store.engine.begin() as conn:
        for table in ("events", "processed_messages"):
            conn.exec_driver_sql(f"CREATE TEMPORARY TABLE old_{table} (LIKE {table}) ON COMMIT DROP")
        EventRecorder(pg_store).insert_recorded(conn, records, texts)
        copy_rows(conn, "old_events", EVENT_COLUMNS, old_events)
        # the rows as `mark_processed` writes them (it writes only those with no position since ADR 0026;
        # the formatter is checked on both)
        copy_data(conn, "processed_messages", copytext.PROCESSED_COLUMNS,
                  (copytext.processed_data(processed[i:i + COPY_CHUNK_ROWS]) for i in chunks(len(processed))))
        copy_rows(conn, "old_processed_messages", ("message_id", "position"), processed)
        projections.write_rows(conn, projections.ChangedRows([], [], jobs, frozenset(k for k, _, _ in jobs)))
        rebuilt = projections.fresh_table(conn, schema.proj_jobs)
        projections.insert_rows(conn, rebuilt, [projections.job_row(j, p) for _, j, p in jobs if j is not None])
        for new, old, key in (("events", "old_events", "position"),
                              ("processed_messages", "old_processed_messages", "message_id"),
                              ("proj_jobs", rebuilt.name, "job_id")):
            got = conn.exec_driver_sql(f"SELECT t::text FROM {new} t ORDER BY {key}").scalars().all()
            want = conn.exec_driver_sql(f"SELECT t::text FROM {old} t ORDER BY {key}").scalars().all()
            assert got == want and len(got) == len(odd) > COPY_CHUNK_ROWS, new
        assert projections.sql_checksum(conn, schema.proj_jobs) == projections.sql_checksum(conn, rebuilt)
        # and the values themselves, as the store reads them
        stored = conn.exec_driver_sql("SELECT payload::text, metadata::text, stream_id, message_id, recorded_at "
                                      "FROM events ORDER BY position").all()
    assert [tuple(r) for r in stored] == [(p, m, r.stream_id, r.message_id, r.recorded_at)
                                          for r, (p, m) in zip(records, texts, strict=True)]


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_job_row_written_outside_the_ledger_fails_one_batch_then_is_replaced(pg_store: EventStore,
                                                                               writer: str) -> None:
    """ADR 0022: the writer skips the DELETE of job rows new in a batch. A row written behind the ledger's
    back then meets the primary key: that batch fails and is undone, and the next attempt deletes every row
    it replaces, as the writer always did, so the ledger goes on and the table equals a rebuild. The same
    with the writer process (ADR 0025), whose error names the violation."""
    import psycopg

    from steward.audit.rebuild import rebuild
    from steward.ledger.recording.writer import WriterFailed, WriterStage

    stage = WriterStage(store_test_urls()[0]) if writer == "process" else None
    try:
        _outside_row_then_replaced(pg_store, Ledger(pg_store, writer=stage),
                                   psycopg.errors.UniqueViolation if stage is None else WriterFailed)
    finally:
        if stage is not None:
            stage.close()
    assert rebuild(pg_store)["ok"]


def _outside_row_then_replaced(pg_store: EventStore, ledger: Ledger, error: type[Exception]) -> None:
    ledger.process([msg(SetAllocations("cluster", {"a": 1.0}, "setup"))], {("t", 0): 1})
    with pg_store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO proj_jobs (job_id, project, state, gpus, min_runtime_s, resumable, job_class, priority, "
            "command, submitted_at, attempt, assignments, funded, position) "
            "VALUES ('j1', 'x', 'QUEUED', 1, 0, 0, 'batch', 0, '[]', 0, 0, '{}', 0, 99)")
    submit = msg(SubmitJob("j1", "a", 1, 0, ["t"]))
    with pytest.raises(error, match=r"(UniqueViolation: )?duplicate key value"):
        ledger.process([submit], {("t", 0): 2})
    assert pg_store.head() == 1 and ledger.head == 1 and pg_store.load_offsets("ledger") == {("t", 0): 1}
    recorded, _ = ledger.process([submit], {("t", 0): 2})
    assert [r.type for r in recorded] == ["JobSubmitted"]
    with pg_store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT project, position FROM proj_jobs").all() == [("a", 2)]
    # and once a batch committed, new rows skip their DELETE again
    recorded, _ = ledger.process([msg(SubmitJob("j2", "a", 1, 0, ["t"]))], {("t", 0): 3})
    assert ledger._skip_new_job_deletes and [r.position for r in recorded] == [3]


def backend_state(store: EventStore, pid: int) -> str:
    with store.engine.connect() as conn:
        state = conn.execute(text("SELECT state FROM pg_stat_activity WHERE pid = :p"), {"p": pid}).scalar_one()
        conn.rollback()
    return str(state)


def test_a_kept_read_connection_is_idle_between_reads_not_idle_in_a_transaction(pg_store: EventStore) -> None:
    """The ledger keeps its read connection between batches: a read on it ends its transaction, although
    the read's statements go to the driver directly (SQLAlchemy's rollback alone does nothing then). An
    open transaction would hold its tables' locks until the next batch, and past the last one."""
    with pg_store.engine.begin() as conn:
        EventRecorder(pg_store).append(conn, [PendingAppend([Event("a", "X", {})], {"actor": "t"}, "m-1")])
    with pg_store.engine.connect() as kept:
        pid = kept.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
        assert pg_store.stream_versions_now(["a", "b"], kept) == {"a": 1, "b": 0}
        assert backend_state(pg_store, pid) == "idle"
        assert pg_store.seen_messages_now(["m-1", "m-2"], ["a"], kept) == ({"m-1"}, {"a": 1})
        assert backend_state(pg_store, pid) == "idle"
        with kept.begin():  # and the connection still works through SQLAlchemy
            assert kept.execute(text("SELECT count(*) FROM events")).scalar_one() == 1
