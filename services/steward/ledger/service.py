"""The ledger service: Kafka `commands` -> decide -> event store, and the outbox relay to `events`.

Offsets live in the store (auto-commit off). The ledger is the single writer of the store, so it takes
every partition of the commands topic itself (`assign`, no group membership: a restart after a crash
does not wait for the group to notice the dead member) and seeks each to its stored offset. The Kafka
consumer runs in a fetch process of its own (`steward.ledger.intake.fetch`, ADR 0019), which the ledger seeks.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from steward.audit.checkpoints import key_path, latest_checkpoint, load_or_create_key, make_checkpoint
from steward.audit.snapshots import SNAPSHOT_EVERY, take_snapshots
from steward.bus.kafka import make_producer
from steward.config import Settings
from steward.ledger.intake.fetch import TOPIC_REFRESH_S, Fetched, FetchStage
from steward.ledger.ledger import DeadLetter, Ledger, LogMoved, Prepared
from steward.ledger.memory import BatchCollector
from steward.ledger.recording.writer import WriterDied, WriterStage
from steward.logs import log_recorded
from steward.metrics import serve
from steward.store import schema
from steward.store.eventstore import EventStore, RecordedEvent
from steward.store.leases import Active, Fence, Fenced, fenced_transaction, lead

log = logging.getLogger("steward.ledger")
commands_log = logging.getLogger("steward.ledger.commands")  # one line per decided command


class OutboxRelay:
    """Publishes recorded events to the `events` topic in log order, resuming from its stored position. With a
    `fence` (the active ledger's) its position is read and saved in fenced transactions (ADR 0097): a paused old
    active's relay cannot hold the position's row for ever, move the position back, or publish again when it
    resumes."""

    name = "events-topic"
    fence: Fence | None = None  # set by `run` (the active's); None: no standbys (benchmarks, tests)

    def __init__(self, settings: Settings, store: EventStore) -> None:
        self.settings = settings
        self.store = store
        self.topic = settings.topic("events")
        self.producer = make_producer(settings, max_in_flight_requests_per_connection=1)

    def position(self) -> int:
        """The stored position, read fenced like the save: a resumed old active's relay is refused here, before it
        publishes a chunk again."""
        with fenced_transaction(self.store.engine, self.fence) as conn:
            value = conn.execute(
                select(schema.relay_positions.c.position).where(schema.relay_positions.c.relay == self.name)
            ).scalar()
        return int(value or 0)

    def save(self, position: int) -> None:
        with fenced_transaction(self.store.engine, self.fence) as conn:
            table = schema.relay_positions
            updated = conn.execute(
                table.update().where(table.c.relay == self.name).values(position=position)
            ).rowcount
            if not updated:
                conn.execute(table.insert().values(relay=self.name, position=position))

    def pump(self) -> int:
        after = self.position()
        chunk = self.store.read(after, limit=1000)
        for rec in chunk:
            value = json.dumps(rec.to_dict(), separators=(",", ":")).encode()
            self.producer.send(self.topic, key=rec.stream_id.encode(), value=value)
        if chunk:
            self.producer.flush(timeout=30)
            self.save(chunk[-1].position)
        return len(chunk)

    def run(self, stop: threading.Event, fence: Fence | None = None) -> None:
        self.fence = fence
        while not stop.is_set():
            try:
                if self.pump() == 0:
                    stop.wait(0.05)
            except Fenced as refused:
                log.warning("outbox relay stops: %s", refused)
                return
            except Exception:
                log.exception("outbox relay failed; retrying")
                stop.wait(1.0)


class Auditor:
    """Signs a Merkle checkpoint every `checkpoint_every` events (or `checkpoint_s` seconds when events
    came meanwhile) and saves a projection snapshot every `snapshot_every` events. Both are derived from
    the committed log, in their own transactions (fenced with the active ledger's `fence`, ADR 0097): a crash
    here loses nothing."""

    def __init__(self, settings: Settings, store: EventStore, fence: Fence | None = None) -> None:
        self.settings = settings
        self.store = store
        self.fence = fence
        self.checkpoint_every = int(os.environ.get("STEWARD_CHECKPOINT_EVERY", "1000"))
        self.checkpoint_s = float(os.environ.get("STEWARD_CHECKPOINT_SECONDS", "30"))
        self.snapshot_every = int(os.environ.get("STEWARD_SNAPSHOT_EVERY", str(SNAPSHOT_EVERY)))
        self.key = load_or_create_key(key_path(settings.run_dir))
        self.last_checkpoint_at = time.monotonic()

    def tick(self) -> None:
        head = self.store.head()
        last = latest_checkpoint(self.store)
        size = last["tree_size"] if last else 0
        due = head - size >= self.checkpoint_every or (
            head > size and time.monotonic() - self.last_checkpoint_at >= self.checkpoint_s)
        if due:
            make_checkpoint(self.store, self.key, upto=head, fence=self.fence)
            self.last_checkpoint_at = time.monotonic()
        take_snapshots(self.store, self.snapshot_every, upto=head, fence=self.fence)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            try:
                self.tick()
            except Fenced as refused:
                log.warning("checkpoints and snapshots stop: %s", refused)
                return
            except Exception:
                log.exception("checkpoint/snapshot failed; retrying")
                stop.wait(5.0)


def run_ledger_candidate(settings: Settings, stop: threading.Event) -> None:
    """The ledger as one candidate of its role (ADR 0060), through `steward.store.leases.lead`: warmed up
    (`_warm_ledger`) and standing by until it holds the `ledger` lease, then the ledger writing with the lease's
    epoch as its fence, until `stop` or until a standby took over (a standby again then, warmed up anew).
    `steward up --standbys` starts two; one alone takes the lease at once (a killed predecessor's connection is
    closed, a stopped one gave the lease up)."""
    store = EventStore.from_url(settings.resolved_store_url)
    serve("ledger", settings)  # a standby serves `steward_leader{role="ledger"} 0`

    @contextmanager
    def warm_up(stop: threading.Event) -> Iterator[Active]:
        with _warm_ledger(settings, store) as warm:
            warm.fetch.wait_ready(stop)

            def active(active_stop: threading.Event, epoch: int) -> None:
                _run_warm(warm, settings, store, active_stop, fence=("ledger", epoch))

            yield active

    try:
        lead(store.engine, "ledger", stop, warm_up=warm_up, head_lock=True)
    finally:
        store.engine.dispose()


LEDGER_CONSUMER = "ledger"  # the ledger's name for its stored offsets


@dataclass
class _Warm:
    """What a ledger starts before it knows the state or holds the lease (ADR 0060: a standby has it ready when
    it takes over): the fetch and writer processes, the dead-letter producer, the metrics and the outbox relay."""

    fetch: FetchStage
    writer_stage: WriterStage | None
    dead_producer: Any
    metrics: Any
    relay: OutboxRelay | None


@contextmanager
def _warm_ledger(settings: Settings, store: EventStore, background: bool = True,
                 stats: dict[str, float] | None = None) -> Iterator[_Warm]:
    """Start what depends on neither the state nor the lease; stop it on the way out (`stats` gets the fetch and
    writer processes' CPU seconds then)."""
    batch = int(os.environ.get("STEWARD_LEDGER_BATCH", "2000"))
    # PostgreSQL's transactions run in a writer process of its own (ADR 0025) unless STEWARD_LEDGER_WRITER=thread;
    # it is told the store and the fence once the lease is held
    writer_stage = (WriterStage(settings.resolved_store_url, defer=True)
                    if store.dialect == "postgresql" and ledger_writer_mode() == "process" else None)
    # Kafka is read in a process of its own (kafka-python parses records in Python: ADR 0019)
    # it also takes the command topics created while it runs (a new executor's), every topic_refresh_s()
    fetch = FetchStage(settings, settings.topic("commands"), f"{settings.topic_prefix}-ledger", batch,
                       topic_refresh_s())
    dead_producer = make_producer(settings)
    metrics = relay = None
    try:
        if background:
            from steward.ledger import metrics as metrics_ledger

            metrics = metrics_ledger.start(settings, store, LEDGER_CONSUMER)
            relay = OutboxRelay(settings, store)
        yield _Warm(fetch, writer_stage, dead_producer, metrics, relay)
    finally:
        fetch.close()
        if writer_stage is not None:
            writer_stage.close()
        if stats is not None:
            stats["fetch_cpu_s"] = fetch.cpu_s
            stats["writer_cpu_s"] = writer_stage.cpu_s if writer_stage is not None else 0.0
        dead_producer.close(timeout=5)
        if relay is not None:  # a ledger that steps down warms up again with clients of its own
            relay.producer.close(timeout=5)


def run_ledger(settings: Settings, stop: threading.Event | None = None,
               on_batch: Callable[[list[RecordedEvent]], None] | None = None, background: bool = True,
               stats: dict[str, float] | None = None) -> None:
    """Consume commands until `stop`, without a lease (benchmarks; `steward run ledger` is `run_ledger_candidate`);
    `on_batch` sees each committed batch right after its commit, in the writer thread, in log order (an error
    there is logged, the batch stays committed); `background` runs the outbox relay and the checkpoint/snapshot
    thread; `stats` gets the fetch and writer processes' CPU seconds (`fetch_cpu_s`, `writer_cpu_s`) when the
    ledger stops. Raises `WriterDied` when the writer process exits (a restart reads what the store committed)."""
    stop = stop or threading.Event()
    store = EventStore.from_url(settings.resolved_store_url)
    with _warm_ledger(settings, store, background, stats) as warm:
        warm.fetch.wait_ready(stop)
        if not stop.is_set():
            _run_warm(warm, settings, store, stop, None, on_batch)


def _run_warm(warm: _Warm, settings: Settings, store: EventStore, stop: threading.Event, fence: Fence | None,
              on_batch: Callable[[list[RecordedEvent]], None] | None = None) -> None:
    """The ledger proper, on what `_warm_ledger` started: read the state, then decide and record batches until
    `stop`; with a `fence` (role, epoch) every batch checks the lease under the head lock (`Fenced`)."""
    fetch, writer_stage, dead_producer, metrics, relay = (warm.fetch, warm.writer_stage, warm.dead_producer,
                                                          warm.metrics, warm.relay)
    batch = int(os.environ.get("STEWARD_LEDGER_BATCH", "2000"))
    if writer_stage is not None:
        writer_stage.open(fence)
    # the command topics vouch for their senders; refusals are recorded in the chain (ADR 0036)
    ledger = Ledger(store, LEDGER_CONSUMER, keep_connections=True, writer=writer_stage,
                    topic_prefix=settings.topic_prefix, fence=fence)
    log.info("ledger started at position %d", ledger.head)
    gc_before = _quiet_collector()
    collector = BatchCollector(time.monotonic())
    switch_before = sys.getswitchinterval()
    sys.setswitchinterval(LEDGER_SWITCH_INTERVAL_S)
    relay_thread: threading.Thread | None = None
    if relay is not None:
        relay_thread = threading.Thread(target=relay.run, args=(stop, fence), name="outbox-relay", daemon=True)
        relay_thread.start()
        auditor = Auditor(settings, store, fence)
        threading.Thread(target=auditor.run, args=(stop,), name="auditor", daemon=True).start()
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-writer")
    in_flight: tuple[Future[None], Prepared, float] | None = None

    def publish_dead(dead: list[DeadLetter]) -> None:
        _dead_letters(dead_producer, settings, dead)

    def write(prepared: Prepared) -> None:
        ledger.record(prepared, publish_dead)
        if on_batch is not None and prepared.records:
            try:
                on_batch(prepared.records)
            except Exception:
                log.exception("on_batch failed (the batch is committed)")

    def settle() -> bool:
        """Wait for the batch being recorded; False (and everything open undone) when it failed."""
        nonlocal in_flight
        if in_flight is None:
            return True
        future, prepared, started = in_flight
        in_flight = None
        try:
            future.result()
        except (WriterDied, Fenced) as err:  # died: only the store knows whether its batch committed (a restart
            log.error("%s", err)  # reads it); fenced: a standby took over, nothing committed, this ledger steps down
            ledger.abort()
            raise
        except Exception as err:  # the store or the dead-letter topic is away: nothing was committed
            log.warning("batch not recorded (%s: %s); re-reading from the stored offsets",
                        type(err).__name__, str(err).splitlines()[0] if str(err) else "")
            ledger.abort(reload=isinstance(err, LogMoved))
            _rewind(ledger, fetch, stop)
            return False
        ledger.committed(prepared)
        fetch.commit(prepared.offsets)  # also to Kafka, for consumer-group tools; the store's copy is the truth
        recorded = prepared.records
        if metrics is not None:
            metrics.observe_batch(recorded, ledger.proj.view(), len(prepared.dead), time.perf_counter() - started,
                                  (d.error for d in prepared.dead))
        if recorded:
            log.info("recorded %d events up to position %d", len(recorded), recorded[-1].position)
            log_recorded(commands_log, recorded)
        return True

    try:
        _rewind(ledger, fetch, stop)
        backlog = False
        while not stop.is_set():
            # With a backlog (the last poll filled at least half a batch), the next batch is decided while
            # the one before is recorded (pipelined, one batch in flight): the writer waits on PostgreSQL
            # while this thread decodes and decides. Without one, the batch before is settled first, so
            # that the next poll takes everything that arrived while it was recorded (deciding early
            # would leave those for the batch after: one more batch of latency).
            if in_flight is not None and (not backlog or in_flight[0].done()) and not settle():
                continue
            fetched = fetch.poll(0.0 if in_flight else 0.2)
            if fetched is None and in_flight is None and ledger.refusals_due():
                fetched = Fetched([], {})  # a refusal summary whose window closed: recorded without a message
            if fetched is None:
                if in_flight is None:
                    continue
                settle()
                continue
            messages, offsets = fetched.messages, fetched.offsets
            backlog = len(messages) >= batch // 2
            started = time.perf_counter()
            try:
                prepared = ledger.prepare(messages, offsets)
            except Exception as err:  # the store is away (dedup or version read)
                log.warning("batch not decided (%s: %s); re-reading from the stored offsets",
                            type(err).__name__, str(err).splitlines()[0] if str(err) else "")
                settle()
                ledger.abort()
                _rewind(ledger, fetch, stop)
                continue
            collector.batch_decided(time.monotonic())  # what it left alive is out of the collector's way
            if not settle():
                continue  # the batch before failed: this one was decided on it and is undone too
            in_flight = (writer.submit(write, prepared), prepared, started)
        settle()
    finally:
        gc.set_threshold(*gc_before)
        sys.setswitchinterval(switch_before)
        gc.unfreeze()
        writer.shutdown(wait=True)
        ledger.close()
        stop.set()
        if relay_thread is not None:
            relay_thread.join(timeout=5)


class LedgerSettingError(ValueError):
    """A ledger setting from the environment is not one of its values."""


def ledger_writer_mode() -> str:
    """Where the PostgreSQL ledger runs its transactions, from STEWARD_LEDGER_WRITER: "process" (a writer
    process, ADR 0025; the default) or "thread" (a thread of the ledger's process, ADR 0015)."""
    mode = os.environ.get("STEWARD_LEDGER_WRITER", "process").strip().lower() or "process"
    if mode not in ("process", "thread"):
        raise LedgerSettingError(f"STEWARD_LEDGER_WRITER must be 'process' or 'thread', not {mode!r}")
    return mode


def topic_refresh_s() -> float:
    """How often the ledger lists the command topics for ones created since it started (a new executor's
    topic is read without a restart), from STEWARD_LEDGER_TOPIC_REFRESH_S: seconds, 0.1 to 3600 (5)."""
    raw = os.environ.get("STEWARD_LEDGER_TOPIC_REFRESH_S", "").strip()
    if not raw:
        return TOPIC_REFRESH_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 3600:
        raise LedgerSettingError(f"STEWARD_LEDGER_TOPIC_REFRESH_S must be seconds between 0.1 and 3600, not {raw!r}")
    return value


# The cyclic collector's thresholds while the ledger runs: a generation-0 pass every 50,000 allocations
# instead of 700. The ledger allocates dozens of acyclic objects per event and holds the whole state
# (every job record), which each older-generation pass walks again; with the defaults the collector
# cost ~20 us of CPU per event, a third of the unit of work (docs/benchmarks.md, ingest round 4).
# Cyclic garbage is still collected, in larger and rarer passes.
LEDGER_GC_THRESHOLD = (50_000, 20, 100)


# How long the deciding thread keeps the GIL while the writer thread waits for it (Python's default is
# 5 ms). The writer makes about ten round trips to PostgreSQL per batch and needs the GIL back after each;
# while the main thread decides the next batch, every one of them waited up to the whole interval
# (tens of ms a batch, docs/benchmarks.md ingest round 5).
LEDGER_SWITCH_INTERVAL_S = 0.0005


def _quiet_collector() -> tuple[int, int, int]:
    """Move the state loaded at start out of the collector's sight (`gc.freeze`: it is long-lived and
    acyclic) and raise the thresholds; returns the thresholds before, restored (and the frozen objects
    handed back to the collector) when the ledger stops."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*LEDGER_GC_THRESHOLD)
    return before


def _dead_letters(producer: Any, settings: Settings, dead: list[DeadLetter]) -> None:
    """Publish and flush before the batch commits: a dead letter is never lost (a crash in between
    repeats it; its `source` offset identifies it)."""
    # (the chain has each as a `CommandRefused` event, or in a summary: steward.ledger.deciding.refusals)
    for d in dead:
        value = json.dumps({"error": d.error, "source": d.source, "at": time.time(),
                            "raw": (d.raw or b"").decode("utf-8", "replace")[:100_000]}).encode()
        producer.send(settings.topic("deadletter"), key=d.source.encode(), value=value)
        log.warning("dead-lettered %s: %s", d.source, d.error)
    if dead:
        producer.flush(timeout=30)


def _rewind(ledger: Ledger, fetch: FetchStage, stop: threading.Event) -> None:
    """Seek the fetch stage back to the offsets the store holds (retrying while it is away)."""
    delay = 0.5
    while not stop.is_set():
        try:
            stored = ledger.store.load_offsets(ledger.consumer_name)
            break
        except Exception as err:
            log.warning("store unavailable (%s); retrying in %.1f s", type(err).__name__, delay)
            stop.wait(delay)
            delay = min(delay * 2, 5.0)
    else:
        return
    fetch.seek(stored)
