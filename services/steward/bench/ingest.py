"""`steward bench ingest --events N --json`: commands from Kafka into the PostgreSQL store (decide, hash
chain, projections, offsets, one transaction per batch), end-to-end latency, and references on the same
events: a raw COPY into an equivalent table, and the `eventsourcing` library's PostgreSQL recorder given
the ledger's batches (`eventsourcing_events_per_s`) and saving one command's events per transaction as its
`Application` does (`eventsourcing_app_events_per_s`, on the first 5,000 events).

Needs the stack's Kafka and PostgreSQL (`steward up`, or the test services); it works in its own
database (`steward_bench`, created by the owner role) and its own topics, and removes the topics after.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import create_engine, text

from steward.bus.envelope import command_envelope
from steward.bus.kafka import client_options
from steward.config import Settings
from steward.domain.commands import CancelJob, SetAllocations, SubmitJob
from steward.ledger.ledger import Ledger
from steward.ledger.service import LEDGER_GC_THRESHOLD, run_ledger
from steward.store.eventstore import EventStore, RecordedEvent
from steward.store.migrate import upgrade
from steward.store.verifier import canonical_text

PROJECTS = [f"p{i}" for i in range(10)]
# events saved one command per transaction for `eventsourcing_app_events_per_s` (a transaction each:
# a sample is enough for the rate)
APP_STYLE_EVENTS = 5_000


def bench_urls(settings: Settings, database: str) -> tuple[str, str]:
    app, owner = settings.postgres_urls()
    return app.rsplit("/", 1)[0] + f"/{database}", owner.rsplit("/", 1)[0] + f"/{database}"


def fresh_database(settings: Settings, database: str) -> tuple[str, str]:
    """An empty, migrated database owned by the owner role."""
    app_url, owner_url = bench_urls(settings, database)
    admin = create_engine(settings.postgres_urls()[1], isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": database}).first():
            conn.execute(text(f'CREATE DATABASE "{database}"'))
            conn.execute(text(f'GRANT CONNECT, TEMPORARY ON DATABASE "{database}" TO steward_app'))
    admin.dispose()
    owner = create_engine(owner_url)
    with owner.begin() as conn:
        for (t,) in conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).all():
            conn.execute(text(f'DROP TABLE IF EXISTS "{t}" CASCADE'))
        conn.execute(text("DROP FUNCTION IF EXISTS steward_refuse_event_change() CASCADE"))
    owner.dispose()
    upgrade(owner_url)
    return app_url, owner_url


def create_topics(settings: Settings, prefix: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(**client_options(settings))
    try:
        admin.create_topics([NewTopic(f"{prefix}.commands", 6, 1), NewTopic(f"{prefix}.events", 1, 1),
                             NewTopic(f"{prefix}.deadletter", 1, 1)])
    finally:
        admin.close()


def delete_topics(settings: Settings, prefix: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(**client_options(settings))
    try:
        admin.delete_topics([f"{prefix}.commands", f"{prefix}.events", f"{prefix}.deadletter"])
    except Exception:
        pass
    finally:
        admin.close()


def commands(n: int, start: int = 0) -> list[Any]:
    """n commands of one event each: job submissions, every fifth cancels the job before it."""
    out: list[Any] = []
    i = start
    while len(out) < n:
        i += 1
        if i % 5 == 0:
            out.append(CancelJob(f"j{i - 1}", "bench"))
        else:
            out.append(SubmitJob(f"j{i}", PROJECTS[i % len(PROJECTS)], 1 + i % 4, 600.0,
                                 ["python", "train.py", f"--seed={i}"], i % 2 == 0, "batch", i % 3))
    return out


def produce(settings: Settings, topic: str, cmds: Sequence[Any], rate: float | None = None) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(**client_options(settings), acks="all", linger_ms=5,
                             batch_size=256 * 1024, compression_type=None)
    started = time.monotonic()
    for i, c in enumerate(cmds):
        env = command_envelope(c, actor="bench", role="admin")
        env.meta["sent_at"] = time.time()
        producer.send(topic, key=env.key.encode(), value=env.encode())
        if rate:
            ahead = started + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    producer.flush(timeout=120)
    producer.close(timeout=10)


def _produce_paced(settings_json: str, n: int, start: int, rate: float) -> None:
    settings = Settings.model_validate_json(settings_json)
    produce(settings, settings.topic("commands"), commands(n, start=start), rate)


def paced_producer(settings: Settings, n: int, start: int, rate: float) -> None:
    """The latency phase's commands, paced, from a process of their own (as the API publishes them): in
    the ledger's process its threads would share the GIL with the producer, and a busy ledger would
    delay the sends it is timed on."""
    import multiprocessing

    proc = multiprocessing.get_context("spawn").Process(
        target=_produce_paced, args=(settings.model_dump_json(), n, start, rate), daemon=True)
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"the paced producer exited {proc.exitcode}")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def copy_reference(owner_url: str, rows: list[tuple[Any, ...]]) -> float:
    """Raw COPY of the same rows into an equivalent table (no lock, no hash, no projections)."""
    engine = create_engine(owner_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS bench_copy"))
        conn.execute(text("CREATE TABLE bench_copy (LIKE events INCLUDING ALL)"))
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        started = time.perf_counter()
        with cur.copy("COPY bench_copy (position, stream_id, version, type, schema_version, payload, metadata, "
                      "message_id, recorded_at, prev_hash, hash) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        raw.commit()
        elapsed = time.perf_counter() - started
    finally:
        raw.close()
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE bench_copy"))
    engine.dispose()
    return len(rows) / elapsed


def eventsourcing_reference(owner_url: str, events: list[RecordedEvent], batch: int | None,
                            limit: int | None = None) -> float | None:
    """The `eventsourcing` library's PostgreSQL application recorder on the same events: in the ledger's
    batches (`batch` events per `insert_events`, one transaction each), or with `batch=None` the way the
    library's `Application` saves, one command's events per transaction (here one event per command), on
    the first `limit` events."""
    try:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
    except ImportError:
        return None
    from sqlalchemy.engine import make_url

    url = make_url(owner_url)
    datastore = PostgresDatastore(dbname=url.database or "", host=url.host or "127.0.0.1", port=url.port or 5432,
                                  user=url.username or "", password=url.password or "", pool_size=1)
    recorder = PostgresApplicationRecorder(datastore, events_table_name="es_bench")
    recorder.create_table()
    ns = uuid.UUID("6f1c2a4e-8f57-4d1e-9a43-0f3c2b8e6d11")
    stored = [StoredEvent(uuid.uuid5(ns, e.stream_id), e.version, e.type, canonical_text(e.payload).encode())
              for e in events[:limit]]
    by_message: list[list[StoredEvent]] = []
    if batch is None:
        last: str | None = None
        for e, s in zip(events, stored, strict=False):
            if by_message and e.message_id == last:
                by_message[-1].append(s)
            else:
                by_message.append([s])
            last = e.message_id
    else:
        by_message = [stored[i:i + batch] for i in range(0, len(stored), batch)]
    started = time.perf_counter()
    for chunk in by_message:
        recorder.insert_events(chunk)
    elapsed = time.perf_counter() - started
    with datastore.transaction(commit=True) as curs:
        curs.execute("DROP TABLE es_bench")
    datastore.close()
    return len(stored) / elapsed


def batch_observer(commits: list[tuple[float, int]],
                   latencies: list[float]) -> Callable[[list[RecordedEvent]], None]:
    """The ledger's `on_batch` for the bench (called in its writer thread): each committed batch's end-to-end
    latencies, then its (time, size). In that order: the bench thread counts `commits` to know when the
    backlog is drained and then clears `latencies`, so a batch's latencies must be in before it is counted
    (the other order let up to a batch of backlog events, seconds old, into the latency figures)."""

    def on_batch(recorded: list[RecordedEvent]) -> None:
        now = time.time()
        batch = [(now - float(r.metadata["sent_at"])) * 1000 for r in recorded if r.metadata.get("sent_at") is not None]
        latencies.extend(batch)
        commits.append((time.perf_counter(), len(recorded)))

    return on_batch


def run(events: int, latency_events: int, latency_rate: float | None, references: bool,
        settings: Settings | None = None) -> dict[str, Any]:
    base = settings or Settings()
    app_url, owner_url = fresh_database(base, os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench"))
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    create_topics(base, prefix)
    settings = base.model_copy(update={"store_url": app_url, "topic_prefix": prefix})
    store = EventStore.from_url(app_url)
    # the tree first, through the ledger's unit of work (aggregates in other partitions have no order)
    tree = command_envelope(SetAllocations("cluster", dict.fromkeys(PROJECTS, 0.1), "bench"), actor="bench",
                            role="admin")
    Ledger(store).process([("setup", tree.encode())], {})
    commits: list[tuple[float, int]] = []
    latencies: list[float] = []
    on_batch = batch_observer(commits, latencies)

    try:
        # 1. throughput: a backlog of `events` commands, drained by the ledger
        produce(settings, settings.topic("commands"), commands(events))
        cpu_started = time.process_time()
        stop = threading.Event()
        stats: dict[str, float] = {}
        ledger = threading.Thread(target=run_ledger, args=(settings, stop, on_batch, False, stats), daemon=True)
        ledger.start()
        deadline = time.monotonic() + 600
        while sum(n for _, n in commits) < events and time.monotonic() < deadline:
            time.sleep(0.02)
        throughput_commits = list(commits)
        latencies.clear()
        # 2. latency: commands at a steady rate under the measured capacity
        (t0, _), t_end = throughput_commits[0], throughput_commits[-1][0]
        drained = sum(n for _, n in throughput_commits[1:])
        events_per_s = drained / (t_end - t0) if t_end > t0 else float("nan")
        rate = latency_rate or max(100.0, 0.5 * events_per_s)
        if latency_events:
            paced_producer(settings, latency_events, 10 * events, rate)
            while sum(n for _, n in commits) < events + latency_events and time.monotonic() < deadline:
                time.sleep(0.02)
        stop.set()
        ledger.join(30)
        # before the read-back below (references only); with the fetch process's CPU (ADR 0019)
        fetch_cpu, writer_cpu = stats.get("fetch_cpu_s", 0.0), stats.get("writer_cpu_s", 0.0)  # ADR 0025
        ledger_cpu = time.process_time() - cpu_started + fetch_cpu + writer_cpu
        recorded = store.read(after=1)
        batches = len(throughput_commits)
        cpu = time.process_time() - cpu_started + fetch_cpu + writer_cpu
        result: dict[str, Any] = {
            "events": events, "events_per_s": round(events_per_s, 1),
            "client_cpu_s_per_1k_events": round(1000 * cpu / (events + latency_events), 3),
            "ledger_cpu_s_per_1k_events": round(1000 * ledger_cpu / (events + latency_events), 3),
            "fetch_cpu_s_per_1k_events": round(1000 * fetch_cpu / (events + latency_events), 3),
            "writer_cpu_s_per_1k_events": round(1000 * writer_cpu / (events + latency_events), 3),
            "batches": batches, "avg_batch": round(events / max(1, batches), 1),
            "latency_events": len(latencies), "latency_rate_per_s": round(rate, 1),
            "latency_ms_p50": round(percentile(latencies, 0.50), 2),
            "latency_ms_p99": round(percentile(latencies, 0.99), 2),
            "latency_ms_mean": round(statistics.fmean(latencies), 2) if latencies else None,
        }
        if references:
            rows = [(r.position, r.stream_id, r.version, r.type, r.schema_version, canonical_text(r.payload),
                     canonical_text(r.metadata), r.message_id, r.recorded_at, r.prev_hash, r.hash)
                    for r in recorded[:events]]
            copy_rate = copy_reference(owner_url, rows)
            es_rate = eventsourcing_reference(owner_url, recorded[:events], max(1, int(result["avg_batch"])))
            app_limit = min(events, APP_STYLE_EVENTS)
            es_app_rate = eventsourcing_reference(owner_url, recorded[:events], None, app_limit)
            result |= {
                "copy_events_per_s": round(copy_rate, 1),
                "eventsourcing_events_per_s": round(es_rate, 1) if es_rate else None,
                "eventsourcing_app_events_per_s": round(es_app_rate, 1) if es_app_rate else None,
                "eventsourcing_app_events": app_limit,
                "ratio_to_copy": round(events_per_s / copy_rate, 3),
                "ratio_to_eventsourcing": round(events_per_s / es_rate, 2) if es_rate else None,
                "ratio_to_eventsourcing_app": round(events_per_s / es_app_rate, 2) if es_app_rate else None,
            }
        result["load_average"] = [round(x, 2) for x in os.getloadavg()]
        return result
    finally:
        store.engine.dispose()
        delete_topics(base, prefix)


def ledger_alone(events: int, batch: int = 2_000, settings: Settings | None = None) -> dict[str, Any]:
    """The ledger's unit of work without Kafka: `Ledger.process` on `events` commands in batches of
    `batch` into a fresh PostgreSQL store, with the ledger service's garbage-collector settings; the CPU
    per event is the main thread's share of the ledger's cost (decode, decide, fold, hash, COPY)."""
    base = settings or Settings()
    app_url, _ = fresh_database(base, os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench") + "_alone")
    store = EventStore.from_url(app_url)
    try:
        tree = command_envelope(SetAllocations("cluster", dict.fromkeys(PROJECTS, 0.1), "bench"), actor="bench",
                                role="admin")
        Ledger(store).process([("setup", tree.encode())], {})
        raws = [command_envelope(c, actor="bench", role="user").encode() for c in commands(events)]
        ledger = Ledger(store)
        gc.collect()
        gc.freeze()
        before = gc.get_threshold()
        gc.set_threshold(*LEDGER_GC_THRESHOLD)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            for i in range(0, events, batch):
                ledger.process([("commands-0", r) for r in raws[i:i + batch]], {("commands", 0): i + batch})
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        finally:
            gc.set_threshold(*before)
            gc.unfreeze()
        return {"events": events, "batch": batch, "cpu_us_per_event": round(cpu / events * 1e6, 2),
                "events_per_cpu_s": round(events / cpu, 1), "events_per_s": round(events / wall, 1),
                "load_average": os.getloadavg()[0]}
    finally:
        store.engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="steward bench ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="commands in the backlog (one event each)")
    parser.add_argument("--latency-events", type=int, default=None, help="paced commands for the latency figures")
    parser.add_argument("--latency-rate", type=float, default=None, help="their rate (default: half the capacity)")
    parser.add_argument("--no-references", action="store_true", help="skip the COPY and eventsourcing runs")
    parser.add_argument("--ledger-alone", action="store_true",
                        help="only Ledger.process on the commands in batches of 2,000, PostgreSQL, no Kafka")
    parser.add_argument("--json", action="store_true", help="print JSON (the only output there is)")
    args = parser.parse_args(argv)
    if args.events < 10:
        sys.stderr.write("steward bench ingest: --events must be at least 10\n")
        return 2
    latency_events = args.latency_events if args.latency_events is not None else min(20_000, args.events // 5)
    try:
        if args.ledger_alone:
            result = ledger_alone(args.events)
        else:
            result = run(args.events, latency_events, args.latency_rate, not args.no_references)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        sys.stderr.write(f"steward bench ingest: {type(err).__name__}: {first}\n")
        return 1
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
