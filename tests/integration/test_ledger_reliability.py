"""The ledger against the real Kafka and PostgreSQL: SIGKILLed again and again while commands flow,
PostgreSQL and then Kafka restarted mid-stream, malformed and oversized messages. After each: every
command recorded exactly once, projections equal a clean rebuild, the chain verifies, lag is zero, and
the outbox published the log in order without gaps.

Sizes are parameters (the soak in docs/benchmarks.md runs 100,000 commands):
STEWARD_SOAK_COMMANDS (default 20,000), STEWARD_SOAK_KILLS (default 20).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from sqlalchemy import func, select

from steward.audit.rebuild import rebuild
from steward.audit.verify import verify
from steward.bus.envelope import command_envelope
from steward.domain.commands import CancelJob, SetAllocations, SubmitJob
from steward.store import schema
from steward.store.eventstore import EventStore
from tests.integration.conftest import REPO, TEST_ENV, TEST_RUN_DIR, kafka_options
from tests.integration.pg import pg_owner, pg_store, store_test_urls

pytestmark = pytest.mark.integration
__all__ = ["pg_owner", "pg_store"]

COMMANDS = int(os.environ.get("STEWARD_SOAK_COMMANDS", "20000"))
KILLS = int(os.environ.get("STEWARD_SOAK_KILLS", "20"))
BOOTSTRAP = TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"]


def create_topics(prefix: str) -> None:
    proc = subprocess.run(["bash", str(REPO / "infra" / "kafka.sh"), "topics", f"{prefix}.commands:6",
                           f"{prefix}.events:1", f"{prefix}.deadletter:1"], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr


def workload(n: int, seed: int = 7) -> list[tuple[str, bytes]]:
    """(key, value) of n valid commands, each recorded as exactly one event: a tree, nodes, then job
    submissions with a cancellation of the previous job every fifth command. The first message (the
    tree) must be recorded before the rest is sent: aggregates in other partitions have no order."""
    rng = random.Random(seed)
    commands: list[Any] = [SetAllocations("cluster", {"a1": 0.5, "b1": 0.5}, "soak")]
    i = 0
    while len(commands) < n:
        i += 1
        if i % 5 == 0:
            commands.append(CancelJob(f"j{i - 1}", "soak"))
        else:
            commands.append(SubmitJob(f"j{i}", rng.choice(["a1", "b1"]), 1, 0.0, ["true"]))
    out = []
    for c in commands[:n]:
        env = command_envelope(c, actor="soak", role="admin", message_id=str(uuid.uuid4()))
        out.append((env.key, env.encode()))
    return out


class LedgerProcess:
    """`steward run ledger` as its own process (we start it, so we may kill it)."""

    def __init__(self, prefix: str, log: Path) -> None:
        self.env = os.environ | {
            "STEWARD_STORE_URL": store_test_urls()[0], "STEWARD_TOPIC_PREFIX": prefix,
            "STEWARD_RUN_DIR": str(TEST_RUN_DIR / prefix), "STEWARD_CHECKPOINT_EVERY": "5000",
            "STEWARD_SNAPSHOT_EVERY": "5000", "STEWARD_LOG_LEVEL": "WARNING",
            # the operator's principal: the ledger's own may read only the `steward.` command topics
            "STEWARD_COMPONENT": "admin",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen([sys.executable, "-m", "steward.cli.main", "run", "ledger"], env=self.env,
                                         stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture()
def topics(pg_store: EventStore) -> Iterator[str]:
    prefix = f"rel{uuid.uuid4().hex[:8]}"
    create_topics(prefix)
    yield prefix


def publish(prefix: str, messages: list[tuple[str, bytes]], pace_s: float = 0.0,
            store: EventStore | None = None) -> None:
    """Send every message (retrying through broker restarts: a resend is deduplicated by its id); with
    `store`, the first message alone, then the rest once it is recorded."""
    if store is not None:
        publish(prefix, messages[:1])
        while store.head() < 1:
            time.sleep(0.05)
        messages = messages[1:]
    producer = KafkaProducer(**kafka_options(), acks="all", linger_ms=5, retries=10,
                             reconnect_backoff_max_ms=2000, request_timeout_ms=15000)
    topic = f"{prefix}.commands"
    try:
        for i in range(0, len(messages), 200):
            chunk = messages[i:i + 200]
            while True:
                try:
                    futures = [producer.send(topic, key=k.encode(), value=v) for k, v in chunk]
                    for f in futures:
                        f.get(timeout=30)
                    break
                except Exception:
                    time.sleep(1.0)
            if pace_s:
                time.sleep(pace_s)
    finally:
        producer.close(timeout=10)


def end_offsets(topic: str) -> dict[tuple[str, int], int]:
    consumer = KafkaConsumer(**kafka_options())
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


def wait_until_caught_up(store: EventStore, prefix: str, expected: int, timeout: float = 180) -> None:
    ends = end_offsets(f"{prefix}.commands")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stored = store.load_offsets("ledger")
        with store.engine.connect() as conn:
            relayed = conn.execute(select(func.max(schema.relay_positions.c.position))).scalar() or 0
        if (store.head() >= expected and relayed >= store.head()
                and all(stored.get(k, 0) == v for k, v in ends.items() if v)):
            return
        time.sleep(0.3)
    raise AssertionError(f"not caught up: head {store.head()} of {expected}, offsets {stored} vs {ends}")


def outbox_positions(prefix: str, expected: int, timeout: float = 60) -> list[int]:
    consumer = KafkaConsumer(**kafka_options(), auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(f"{prefix}.events", 0)])
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=1000, max_records=10_000)
            for records in batch.values():
                seen += [json.loads(r.value)["position"] for r in records]
            if len(set(seen)) >= expected and not batch:
                break
    finally:
        consumer.close()
    return seen


def assert_exactly_once(store: EventStore, prefix: str, expected: int) -> None:
    with store.engine.connect() as conn:
        events = conn.execute(select(func.count()).select_from(schema.events)).scalar()
        ids = conn.execute(select(func.count(func.distinct(schema.events.c.message_id)))).scalar()
        processed = conn.execute(select(func.count()).select_from(schema.processed_messages)).scalar()
        rejected = conn.execute(select(func.count()).select_from(schema.events)
                                .where(schema.events.c.type == "CommandRejected")).scalar()
    # every message recorded an event: each is known by it, none by a dedup row (ADR 0026)
    assert (events, ids, processed) == (expected, expected, 0)
    assert rejected == 0
    report = verify(store)
    assert report["ok"] and report["head"] == expected, report
    rebuilt = rebuild(store)
    assert rebuilt["ok"], {t: v["equal"] for t, v in rebuilt["tables"].items()}
    # the outbox: the whole log, in order; a crash may repeat a tail (consumers dedup by position)
    positions = outbox_positions(prefix, expected)
    first_seen = list(dict.fromkeys(positions))
    assert first_seen == list(range(1, expected + 1))


def test_sigkill_the_ledger_again_and_again_while_commands_flow(topics: str, pg_store: EventStore,
                                                                tmp_path: Path) -> None:
    messages = workload(COMMANDS)
    duplicates = messages[100:100 + COMMANDS // 100]  # redelivered by an over-eager producer
    pace = KILLS * 2.0 / (len(messages) / 200)  # the stream lasts about as long as the kills
    feeder = threading.Thread(target=publish, args=(topics, messages + duplicates, pace, pg_store))
    feeder.start()
    ledger = LedgerProcess(topics, tmp_path / "ledger.log")
    rng = random.Random(11)
    kills = 0
    try:
        for _ in range(KILLS):
            before = pg_store.head()
            ledger.start()
            deadline = time.monotonic() + 30
            while pg_store.head() <= before and feeder.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.5))  # at a random point of its work
            ledger.kill()
            kills += 1
        feeder.join(300)
        ledger.start()
        wait_until_caught_up(pg_store, topics, COMMANDS)
    finally:
        ledger.stop()
        feeder.join(5)
    assert kills == KILLS
    assert_exactly_once(pg_store, topics, COMMANDS)


def writer_process(ledger_pid: int) -> int | None:
    """The ledger's writer process (ADR 0025), found among its children."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == ledger_pid and b"steward.ledger.recording.writer" in cmdline:
            return int(entry.name)
    return None


def test_a_killed_writer_process_stops_the_ledger_and_a_restart_records_everything_once(
        topics: str, pg_store: EventStore, tmp_path: Path) -> None:
    """SIGKILL the writer process mid-stream: the ledger fails loudly (it cannot know whether the batch the
    process was writing committed), and a restarted ledger reads the store and loses and repeats nothing."""
    n = min(COMMANDS, 6000)
    messages = workload(n, seed=9)
    log = tmp_path / "ledger.log"
    ledger = LedgerProcess(topics, log)
    ledger.env["STEWARD_LEDGER_WRITER"] = "process"
    ledger.start()
    feeder = threading.Thread(target=publish, args=(topics, messages, 0.1, pg_store))
    feeder.start()
    try:
        deadline = time.monotonic() + 60
        while pg_store.head() < n // 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ledger.proc is not None
        child = writer_process(ledger.proc.pid)
        assert child is not None, "no writer process under the ledger"
        os.kill(child, signal.SIGKILL)
        assert ledger.proc.wait(30) != 0, "the ledger went on without its writer"
        assert "the writer process exited" in log.read_text()
        ledger.start()
        feeder.join(300)
        wait_until_caught_up(pg_store, topics, n)
    finally:
        ledger.stop()
        feeder.join(5)
    assert_exactly_once(pg_store, topics, n)


def test_restart_postgres_then_kafka_mid_stream(topics: str, pg_store: EventStore, tmp_path: Path) -> None:
    n = min(COMMANDS, 6000)
    messages = workload(n, seed=3)
    ledger = LedgerProcess(topics, tmp_path / "ledger.log")
    ledger.start()
    feeder = threading.Thread(target=publish, args=(topics, messages, 0.25, pg_store))
    feeder.start()
    try:
        for service in ("postgres", "kafka"):
            before = pg_store.head()
            deadline = time.monotonic() + 60
            while pg_store.head() < before + n // 5 and time.monotonic() < deadline:
                time.sleep(0.1)
            proc = subprocess.run(["bash", str(REPO / "infra" / f"{service}.sh"), "restart"], capture_output=True,
                                  text=True, timeout=180, env=os.environ.copy())
            assert proc.returncode == 0, proc.stderr
            pg_store.engine.dispose()
        feeder.join(300)
        wait_until_caught_up(pg_store, topics, n)
        assert ledger.proc is not None and ledger.proc.poll() is None, "the ledger died"
    finally:
        ledger.stop()
        feeder.join(5)
    assert_exactly_once(pg_store, topics, n)


def test_malformed_and_oversized_messages_are_dead_lettered_and_the_ledger_goes_on(
        topics: str, pg_store: EventStore, tmp_path: Path) -> None:
    good = workload(50, seed=5)
    bad: list[tuple[str, bytes]] = [("x", b"not json"), ("x", b"[1,2]"), ("x", b'{"id": "only"}'),
                                    ("x", json.dumps({"id": "u", "type": "Nope", "key": "x", "payload": {}}).encode()),
                                    ("x", b"{" + b" " * (300 * 1024) + b"}")]
    ledger = LedgerProcess(topics, tmp_path / "ledger.log")
    ledger.start()
    try:
        publish(topics, good[:25] + bad + good[25:], store=pg_store)
        wait_until_caught_up(pg_store, topics, 50)
    finally:
        ledger.stop()
    consumer = KafkaConsumer(**kafka_options(), auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(f"{topics}.deadletter", 0)])
    letters = [json.loads(r.value) for r in consumer]
    consumer.close()
    errors = sorted(d["error"].split(":")[0] for d in letters)
    assert len(letters) == 5, letters
    assert any(e.startswith("oversized") for e in errors)
    assert all(d["source"].startswith(f"{topics}.commands/") for d in letters)
    # each is also in the chain (issue 21): a CommandRefused of the topic's principal, at its coordinates
    refused = [r for r in pg_store.iterate(0) if r.type == "CommandRefused"]
    assert sorted(f"{r.payload['topic']}/{r.payload['partition']}@{r.payload['offset']}" for r in refused) == sorted(
        d["source"] for d in letters)
    assert {r.payload["principal"] for r in refused} == {"steward-api"}
    assert pg_store.head() == 50 + 5
