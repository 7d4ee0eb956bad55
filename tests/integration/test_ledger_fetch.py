"""The ledger's fetch process (steward.ledger.intake.fetch, ADR 0019) against the real Kafka broker: batches in
partition order with the next offsets, nothing read before a seek decided after it, a stored offset
honoured, and no reader left behind when the ledger is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from steward.config import Settings
from steward.ledger.intake.fetch import Fetched, FetchStage
from tests.integration.conftest import REPO, TEST_ENV, kafka_options
from tests.integration.test_ledger_reliability import create_topics

pytestmark = pytest.mark.integration

BOOTSTRAP = TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"]


@pytest.fixture()
def topic(real_services: None) -> str:
    prefix = f"fetch{uuid.uuid4().hex[:8]}"
    create_topics(prefix)
    return prefix


def send(topic: str, items: list[tuple[int, bytes]]) -> None:
    """Each value to the given partition of `topic`, in order."""
    producer = KafkaProducer(**kafka_options(), acks="all")
    try:
        for partition, value in items:
            producer.send(topic, value=value, partition=partition)
        producer.flush(30)
    finally:
        producer.close(5)


def drain(stage: FetchStage, want: int, timeout_s: float = 30.0) -> list[Fetched]:
    got: list[Fetched] = []
    deadline = time.monotonic() + timeout_s
    while sum(len(f.messages) for f in got) < want and time.monotonic() < deadline:
        fetched = stage.poll(0.5)
        if fetched is not None:
            got.append(fetched)
    return got


@pytest.fixture()
def stage(topic: str) -> Iterator[FetchStage]:
    settings = Settings(topic_prefix=topic)
    fetch = FetchStage(settings, settings.topic("commands"), f"{topic}-ledger", max_records=50)
    fetch.wait_ready(threading.Event())
    yield fetch
    fetch.close()


def test_batches_keep_partition_order_and_name_the_next_offsets(topic: str, stage: FetchStage) -> None:
    commands = f"{topic}.commands"
    send(commands, [(i % 3, f"m{i}".encode()) for i in range(120)])
    assert stage.partitions == [0, 1, 2, 3, 4, 5]
    assert stage.poll(0.5) is None, "nothing may be read before the ledger seeks"
    stage.seek({})
    got = drain(stage, 120)
    per_partition: dict[str, list[str]] = {}
    for fetched in got:
        assert 0 < len(fetched.messages) <= 50
        for source, value in fetched.messages:
            per_partition.setdefault(source.split("@")[0], []).append(f"{source.split('@')[1]}={value!r}")
        for (t, p), offset in fetched.offsets.items():
            last = [s for s, _ in fetched.messages if s.startswith(f"{t}/{p}@")][-1]
            assert offset == int(last.split("@")[1]) + 1
    assert sorted(per_partition) == [f"{commands}/{p}" for p in range(3)]
    for p in range(3):
        values = [f"{i // 3}={f'm{i}'.encode()!r}" for i in range(p, 120, 3)]
        assert per_partition[f"{commands}/{p}"] == values


def test_a_seek_drops_what_was_read_before_it_and_starts_at_the_stored_offsets(topic: str,
                                                                               stage: FetchStage) -> None:
    commands = f"{topic}.commands"
    send(commands, [(0, f"a{i}".encode()) for i in range(200)])
    stage.seek({})
    first = drain(stage, 1)
    assert first and first[0].messages[0] == (f"{commands}/0@0", b"a0")
    while stage.poll(0.0) is not None:  # until a request is out that the process has not answered yet
        pass
    time.sleep(1.0)  # it answers meanwhile: a batch read before the seek below, waiting to be received
    stage.seek({(commands, 0): 150})  # as after a failed batch: back to the store's offsets
    after = drain(stage, 50)
    sources = [s for f in after for s, _ in f.messages]
    assert sources == [f"{commands}/0@{i}" for i in range(150, 200)]
    assert after[-1].offsets == {(commands, 0): 200}


def test_the_fetch_process_dies_with_a_sigkilled_ledger(topic: str) -> None:
    assert_child_dies_with_its_parent(f"""
        import threading, time
        from steward.config import Settings
        from steward.ledger.intake.fetch import FetchStage
        settings = Settings(topic_prefix={topic!r})
        stage = FetchStage(settings, settings.topic("commands"), "g", 10)
        stage.wait_ready(threading.Event())
        print(stage._proc.pid, flush=True)
        time.sleep(600)
    """)


def assert_child_dies_with_its_parent(script: str) -> None:
    """Run `script` (which prints its child's pid, then sleeps) in a process, SIGKILL that process, and check
    that the child is gone within 10 s."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env=os.environ.copy(), start_new_session=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child), "the child process outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_after_a_backlog_batch_the_next_one_is_already_on_its_way(topic: str, stage: FetchStage) -> None:
    """With a backlog, the ledger decides batch N+1 while N is recorded (ADR 0015): the batch after a full
    one is asked for at once, so a poll that does not wait finds it there. A small batch (no backlog) is
    asked for only when the ledger is ready, to take everything that arrived until then."""
    commands = f"{topic}.commands"
    send(commands, [(0, f"b{i}".encode()) for i in range(200)])
    stage.seek({})
    first = drain(stage, 50)
    assert len(first) == 1 and len(first[0].messages) == 50
    time.sleep(1.0)  # deciding and recording the first batch
    second = stage.poll(0.0)
    assert second is not None and second.messages[0] == (f"{commands}/0@50", b"b50")
    rest = drain(stage, 100)
    assert [s for f in rest for s, _ in f.messages] == [f"{commands}/0@{i}" for i in range(100, 200)]
    send(commands, [(0, b"late")])  # the request made after the last full batch is answered when it comes
    time.sleep(1.0)
    small = stage.poll(0.0)
    assert small is not None and small.messages == [(f"{commands}/0@200", b"late")]
    send(commands, [(0, b"later")])
    time.sleep(1.0)
    assert stage.poll(0.0) is None  # after a small batch nothing was asked for ahead: the request goes now
    (last,) = drain(stage, 1)
    assert last.messages == [(f"{commands}/0@201", b"later")]
