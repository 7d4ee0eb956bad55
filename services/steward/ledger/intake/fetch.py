"""The ledger's Kafka fetch stage, in a process of its own (ADR 0019, ADR 0024).

kafka-python fetches in pure Python, under what would be the same GIL as the ledger's deciding thread and
its writer thread. This stage runs the consumer in a child process and hands the ledger whole batches of
raw messages (`source`, value bytes) with the next offset of each partition. The child reads the records
straight from kafka-python's record batches as those pairs (steward.ledger.intake.records, ~0.2 us a record
compiled, against ~4 us through kafka-python's record objects) and sends them marshal'd over a socket
pair (steward.ledger.processes): receiving a batch costs the ledger ~0.1-0.2 us a message.

The ledger asks for each batch when it is ready for one, and gets everything read since (up to a batch);
the process reads ahead meanwhile. The stage is stateless. The ledger still decides, records, and stores
the offsets in the same transaction as the events; it tells the stage where to read from (`seek`, with
the offsets in the store) at the start and after any batch that did not commit. Every seek opens a new
epoch: what was read before it is dropped (held, or already sent), so nothing read before a rewind is
ever decided after it. Every `topic_refresh_s` the stage lists the command topics again and takes the
partitions of any created since (a new executor's topic, `infra/kafka.sh add-executor`), read from the
beginning (nothing of them was ever decided), without a restart of the ledger. The child dies with the
ledger (`PR_SET_PDEATHSIG`, and a closed pipe), so a SIGKILLed ledger leaves no reader behind.
"""

from __future__ import annotations

import gc
import logging
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kafka.errors import KafkaError

from steward.bus.identity import is_command_topic
from steward.config import Settings
from steward.ledger.intake.recordbatch import Pair
from steward.ledger.intake.records import install, source_prefix
from steward.ledger.processes import Wire, die_with_parent, start_child, stop_child

log = logging.getLogger("steward.ledger.fetch")

Messages = list[tuple[str, bytes | None]]
Offsets = dict[tuple[str, int], int]

# How long the stage waits for the commands topic to have partitions before it gives up.
PARTITIONS_TIMEOUT_S = 60.0
# The consumer's settings for a ledger that reads batches of thousands of small commands.
FETCH_MAX_BYTES = 64 * 1024 * 1024
MAX_PARTITION_FETCH_BYTES = 4 * 1024 * 1024
# Batches the process reads ahead of the ledger's requests before it waits.
HELD_BATCHES = 2
# how long the fetch process waits after a retriable Kafka error before it polls again (`poll_or_wait`)
POLL_RETRY_S = 0.5
# how often the fetch process lists the command topics for ones created since (STEWARD_LEDGER_TOPIC_REFRESH_S)
TOPIC_REFRESH_S = 5.0


class FetchFailed(RuntimeError):
    """The fetch process could not read the topic, or exited."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """One batch as the ledger decides it: messages in partition order, and the next offset to read of
    every partition they came from."""

    messages: Messages
    offsets: Offsets


class FetchStage:
    """The parent's side: starts the fetch process, seeks it, receives its batches."""

    def __init__(self, settings: Settings, topic: str, group: str, max_records: int,
                 topic_refresh_s: float = TOPIC_REFRESH_S) -> None:
        # A new interpreter (`python -m steward.ledger.intake.fetch`), not multiprocessing: the ledger has threads
        # (no fork), and spawn would re-import whatever script started the ledger. The two talk through a
        # socket pair (steward.ledger.processes: marshal'd messages).
        self._conn, self._proc = start_child("steward.ledger.intake.fetch")
        self._conn.send((settings.model_dump_json(), topic, group, max_records, topic_refresh_s))
        self._epoch = 0
        self._max_records = max_records
        self._asked = False  # a request for a batch is out
        self.cpu_s = 0.0  # the fetch process's CPU once it took the partitions, known once it stopped
        self.partitions: list[int] = []  # the partitions of `topic`
        self.topics: list[str] = []  # every topic read: `topic` and the other command topics (ADR 0036), as
        # the process last reported them (it adds the topics created since, see `fetch_main`)

    def wait_ready(self, stop: threading.Event) -> None:
        """Wait until the process has taken every partition of the topic (FetchFailed when it cannot)."""
        while not stop.is_set():
            if self._conn.poll(0.2):
                kind, *args = self._recv()
                if kind == "ready":
                    self.partitions = list(args[0])
                    self.topics = list(args[1])
                    return
                if kind == "error":
                    raise FetchFailed(str(args[0]))

    def seek(self, stored: Offsets) -> None:
        """Read every partition from its stored offset (from the beginning when none is stored); batches
        fetched before this are dropped."""
        self._epoch += 1
        self._conn.send(("seek", self._epoch, dict(stored)))

    def commit(self, offsets: Offsets) -> None:
        """Also commit `offsets` to Kafka (for consumer-group tools; the store's copy is the truth)."""
        self._conn.send(("commit", dict(offsets)))

    def poll(self, timeout_s: float) -> Fetched | None:
        """The next batch read since the last seek, waiting up to `timeout_s`; None when there is none.

        The process answers a request with everything it holds (up to `max_records`), so the batch is what
        arrived until the ledger was ready for it, as a poll of its own consumer would give it: sending each
        fetch as it came would hand the ledger small batches while it records, and leave the rest for a
        batch later (one more batch of latency). After a batch of at least half `max_records` (a backlog)
        the next one is asked for at once."""
        if not self._asked:
            self._conn.send(("want",))
            self._asked = True
        deadline = time.monotonic() + timeout_s
        while True:
            if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                return None  # (the request stands: the next poll takes its answer)
            kind, *args = self._recv()
            if kind == "batch":
                self._asked = False
                epoch, messages, offsets = args
                if epoch == self._epoch:
                    if len(messages) >= self._max_records // 2:
                        # a backlog: ask for the next batch now, to have it while this one is decided and
                        # recorded (the ledger decides batch N+1 while N is written, ADR 0015)
                        self._conn.send(("want",))
                        self._asked = True
                    return Fetched(messages, offsets)
                self._conn.send(("want",))  # read before the last seek: dropped, and asked again
                self._asked = True
                continue
            if kind == "error":
                raise FetchFailed(str(args[0]))
            if kind == "topics":
                self._took(args[0])

    def _took(self, topics: list[str]) -> None:
        added = sorted(set(topics) - set(self.topics))
        self.topics = list(topics)
        log.info("reading %d command topics (new: %s)", len(topics), ", ".join(added) or "none")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the process (it reports its CPU time on the way out)."""
        cpu = stop_child(self._conn, self._proc, timeout_s)
        if cpu is not None:
            self.cpu_s = cpu

    def _recv(self) -> Any:
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            try:
                code = self._proc.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
            raise FetchFailed(f"the fetch process exited (exit code {code})") from None


# ----------------------------------------------------------------------------------- the child process


def fetch_main(conn: Wire) -> None:
    """The fetch process: take every partition of the topic and of every other command topic of its prefix
    (each component writes a command topic of its own, ADR 0036), then poll batches of up to `max_records`
    and send them to the ledger, tagged with the epoch of the last seek; nothing is read before the first.
    Every `topic_refresh_s` it lists the command topics again (`Assignment.refresh`): partitions created
    since are added and read from the offset the last seek had for them, or from the beginning."""
    gc.set_threshold(50_000, 20, 100)  # kafka-python allocates a few objects per record; none are kept
    # lazy: only the fetch child process consumes; the ledger imports this module for FetchStage
    from steward.bus.kafka import make_consumer

    try:
        settings_json, topic, group, max_records, refresh_s = conn.recv()
    except (EOFError, OSError):
        return
    settings = Settings.model_validate_json(settings_json)
    consumer = make_consumer(settings, group, max_poll_records=max_records, fetch_max_bytes=FETCH_MAX_BYTES,
                             max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES)
    try:
        deadline = time.monotonic() + PARTITIONS_TIMEOUT_S
        partitions = consumer.partitions_for_topic(topic)
        while not partitions:
            if time.monotonic() > deadline:
                conn.send(("error", f"topic {topic} has no partitions (is it created?)"))
                return
            if conn.poll(0.5) and conn.recv()[0] == "stop":
                conn.send(("stopped", 0.0))
                return
            partitions = consumer.partitions_for_topic(topic)
        assignment = Assignment(consumer, settings.topic_prefix, topic)
        if not assignment.refresh():
            conn.send(("error", "the command topics could not be listed (Kafka away?)"))
            return
        conn.send(("ready", sorted(partitions), assignment.topics))
        next_refresh = time.monotonic() + refresh_s
        lean = install(consumer)  # records as (source, value) pairs straight from the batches (ADR 0024)
        started = time.process_time()  # the CPU reported at the end leaves out the start (imports, connect)
        epoch: int | None = None
        wanted = False  # the ledger asked for a batch
        held = Held()  # read, not yet sent: in partition order
        while True:
            while epoch is None or conn.poll(0):  # commands first; before the first seek, only commands
                kind, *args = conn.recv()
                if kind == "want":
                    wanted = True
                elif kind == "seek":
                    epoch, stored = args
                    held.clear()
                    assignment.seek(stored)
                elif kind == "commit":
                    _commit(consumer, args[0])
                elif kind == "stop":
                    conn.send(("stopped", time.process_time() - started))
                    return
            if time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + refresh_s
                if assignment.refresh():
                    conn.send(("topics", assignment.topics))
            if wanted and held.count:
                messages, offsets = held.take(max_records)
                conn.send(("batch", epoch, messages, offsets))
                wanted = False
                continue
            if held.count >= HELD_BATCHES * max_records:
                conn.poll(0.2)  # enough in hand: wait for the ledger's next request
                continue
            # waiting for a record the ledger asked for, or reading ahead while it decides and records
            polled = poll_or_wait(consumer, 200 if wanted else 20, max_records)
            for tp, records in polled.items():
                if not lean:
                    prefix = source_prefix(tp.topic, tp.partition)
                    records = [(prefix + str(r.offset), r.value) for r in records]
                held.add((tp.topic, tp.partition), records)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the ledger is gone
    finally:
        consumer.close()


class Assignment:
    """The partitions the fetch process reads: every partition of every command topic of the prefix
    (`steward.bus.identity.is_command_topic`), the ledger's own `topic` first. `refresh` lists the topics
    again and takes the partitions created since; `seek` positions every partition at the ledger's stored
    offset (the beginning when none is stored), and a partition taken later at the offset the last seek
    had for it (none: the beginning), so that nothing of a new topic is skipped."""

    def __init__(self, consumer: Any, prefix: str, topic: str) -> None:
        self.consumer = consumer
        self.prefix = prefix
        self.topic = topic
        self.topics: list[str] = []
        self.partitions: list[Any] = []  # TopicPartition, in the order taken
        self._stored: Offsets | None = None  # the last seek's offsets (None before the first)

    def refresh(self) -> bool:
        """Take the partitions of command topics created since the last refresh; True when there were any.
        A retriable Kafka error (the broker away for a moment) leaves the assignment as it is until the
        next refresh."""
        from kafka import TopicPartition

        try:
            listed = self.consumer.topics()  # a metadata request: what the ledger may read now
        except KafkaError as err:
            if not err.retriable:
                raise
            log.warning("command topics not listed (%s); trying again later", type(err).__name__)
            return False
        topics = [self.topic, *sorted(t for t in listed if t != self.topic and is_command_topic(self.prefix, t))]
        known = set(self.partitions)
        new = [tp for t in topics for tp in (TopicPartition(t, p) for p in sorted(
            self.consumer.partitions_for_topic(t) or ())) if tp not in known]
        if not new:
            return False
        self.partitions += new
        self.topics = sorted({tp.topic for tp in self.partitions}, key=lambda t: (t != self.topic, t))
        self.consumer.assign(self.partitions)  # kafka-python keeps the positions of the partitions it had
        if self._stored is not None:
            self._position(new)
        return True

    def seek(self, stored: Offsets) -> None:
        self._stored = dict(stored)
        self._position(self.partitions)

    def _position(self, partitions: list[Any]) -> None:
        stored = self._stored or {}
        for tp in partitions:
            offset = stored.get((tp.topic, tp.partition))
            if offset is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset)


def poll_or_wait(consumer: Any, timeout_ms: int, max_records: int) -> dict[Any, Any]:
    """`consumer.poll`, or nothing for now when the broker is away for a moment: a retriable `KafkaError`
    (connection refused or reset while the broker restarts, a request timed out) is logged and waited out
    for `POLL_RETRY_S`, and the loop polls again. kafka-python keeps the position of every partition at
    the first record it has not returned, so nothing is skipped or read twice. Other errors end the
    process, and the ledger fails loudly (`FetchFailed`). (Before, a connection error raised from `poll`
    during a broker restart ended the process and the ledger with it.)"""
    try:
        return dict(consumer.poll(timeout_ms=timeout_ms, max_records=max_records))
    except KafkaError as err:
        if not err.retriable:
            raise
        log.warning("Kafka away (%s: %s); polling again in %.1f s", type(err).__name__, err, POLL_RETRY_S)
        time.sleep(POLL_RETRY_S)
        return {}


class Held:
    """What the process has read and not sent yet: each poll's records of one partition as one chunk, in the
    order read (so each partition's records stay in order)."""

    def __init__(self) -> None:
        self._chunks: deque[tuple[tuple[str, int], list[Pair]]] = deque()
        self.count = 0

    def add(self, key: tuple[str, int], pairs: list[Pair]) -> None:
        if pairs:
            self._chunks.append((key, pairs))
            self.count += len(pairs)

    def clear(self) -> None:
        self._chunks.clear()
        self.count = 0

    def take(self, limit: int) -> tuple[Messages, Offsets]:
        """The first `limit` records (all when fewer), and the next offset of each partition they end."""
        messages: Messages = []
        offsets: Offsets = {}
        chunks = self._chunks
        while chunks and len(messages) < limit:
            key, pairs = chunks[0]
            room = limit - len(messages)
            if len(pairs) > room:
                chunks[0] = (key, pairs[room:])
                pairs = pairs[:room]
            else:
                chunks.popleft()
            messages += pairs
            last = pairs[-1][0]
            offsets[key] = int(last[last.rindex("@") + 1:]) + 1
        self.count -= len(messages)
        return messages, offsets


def _commit(consumer: Any, offsets: Offsets) -> None:
    """Commit to Kafka without waiting (only consumer-group tools read it; the store's copy is the truth):
    a synchronous commit held the next fetch for a round trip to the group coordinator."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    def meta(offset: int) -> Any:
        try:
            return OffsetAndMetadata(offset, "", -1)
        except TypeError:
            return OffsetAndMetadata(offset, "")

    def done(_offsets: Any, response: Any) -> None:
        if isinstance(response, Exception):
            log.info("offsets not committed to Kafka (%s); the store has them", type(response).__name__)

    try:
        consumer.commit_async({TopicPartition(t, p): meta(o) for (t, p), o in offsets.items()}, callback=done)
    except Exception as err:
        log.info("offsets not committed to Kafka (%s); the store has them", type(err).__name__)


if __name__ == "__main__":  # python -m steward.ledger.intake.fetch FD PARENT_PID (started by FetchStage)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the ledger, which stops this process
    die_with_parent(int(sys.argv[2]))
    fetch_main(Wire.from_fd(int(sys.argv[1])))
