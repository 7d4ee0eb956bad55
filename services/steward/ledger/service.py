"""The ledger service: Kafka `commands` -> decide -> event store, and the outbox relay to `events`.

Offsets live in the store (auto-commit off); on partition assignment the consumer seeks to them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from kafka import ConsumerRebalanceListener, TopicPartition
from sqlalchemy import select

from steward.bus.kafka import make_consumer, make_producer
from steward.config import Settings
from steward.ledger.core import DeadLetter, Ledger
from steward.store import schema
from steward.store.eventstore import EventStore

log = logging.getLogger("steward.ledger")


class _SeekToStored(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, ledger: Ledger, consumer: Any) -> None:
        self.ledger = ledger
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    def on_partitions_assigned(self, assigned: Any) -> None:
        stored = self.ledger.store.load_offsets(self.ledger.consumer_name)
        for tp in assigned:
            offset = stored.get((tp.topic, tp.partition))
            if offset is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset)


class OutboxRelay:
    """Publishes recorded events to the `events` topic in log order, resuming from its stored position."""

    name = "events-topic"

    def __init__(self, settings: Settings, store: EventStore) -> None:
        self.settings = settings
        self.store = store
        self.topic = settings.topic("events")
        self.producer = make_producer(settings, max_in_flight_requests_per_connection=1)

    def position(self) -> int:
        with self.store.engine.connect() as conn:
            value = conn.execute(
                select(schema.relay_positions.c.position).where(schema.relay_positions.c.relay == self.name)
            ).scalar()
            conn.rollback()
        return int(value or 0)

    def save(self, position: int) -> None:
        with self.store.engine.begin() as conn:
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

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self.pump() == 0:
                    stop.wait(0.05)
            except Exception:
                log.exception("outbox relay failed; retrying")
                stop.wait(1.0)


def run_ledger(settings: Settings, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    store = EventStore.from_url(settings.resolved_store_url)
    ledger = Ledger(store)
    log.info("ledger started at position %d", ledger.head)
    relay = OutboxRelay(settings, store)
    relay_thread = threading.Thread(target=relay.run, args=(stop,), name="outbox-relay", daemon=True)
    relay_thread.start()
    consumer = make_consumer(settings, "steward-ledger")
    consumer.subscribe([settings.topic("commands")], listener=_SeekToStored(ledger, consumer))
    dead_producer = make_producer(settings)
    try:
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=200, max_records=500)
            if not polled:
                continue
            messages: list[tuple[str, bytes | None]] = []
            offsets: dict[tuple[str, int], int] = {}
            for tp, records in polled.items():
                for r in records:
                    messages.append((f"{tp.topic}/{tp.partition}@{r.offset}", r.value))
                    offsets[(tp.topic, tp.partition)] = r.offset + 1
            recorded, dead = ledger.process(messages, offsets)
            for d in dead:
                _dead_letter(dead_producer, settings, d)
            if dead:
                dead_producer.flush(timeout=10)
            # also commit to Kafka, for visibility in consumer-group tools; the store's copy is the truth
            consumer.commit({TopicPartition(t, p): _offset_meta(o) for (t, p), o in offsets.items()})
            if recorded:
                log.info("recorded %d events up to position %d", len(recorded), ledger.head)
    finally:
        consumer.close()
        dead_producer.close(timeout=5)
        stop.set()
        relay_thread.join(timeout=5)


def _offset_meta(offset: int) -> Any:
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:
        return OffsetAndMetadata(offset, "")


def _dead_letter(producer: Any, settings: Settings, d: DeadLetter) -> None:
    value = json.dumps({"error": d.error, "source": d.source, "at": time.time(),
                        "raw": (d.raw or b"").decode("utf-8", "replace")[:100_000]}).encode()
    producer.send(settings.topic("deadletter"), value=value)
    log.warning("dead-lettered %s: %s", d.source, d.error)
