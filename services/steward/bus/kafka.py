"""Thin kafka-python wrappers: an idempotent producer and consumers with auto-commit off."""

from __future__ import annotations

import logging
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from steward.bus.envelope import Envelope
from steward.config import Settings

log = logging.getLogger(__name__)


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap,
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": 2,
        "retries": 2**31 - 1,
        "max_in_flight_requests_per_connection": 5,
        "client_id": "steward",
    }
    options.update(overrides)
    return KafkaProducer(**options)


def make_consumer(settings: Settings, group: str | None, **overrides: Any) -> KafkaConsumer:
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": 500,
        "client_id": f"steward-{group or 'reader'}",
    }
    options.update(overrides)
    return KafkaConsumer(**options)


class CommandPublisher:
    """Publishes command envelopes to the commands topic, keyed by aggregate."""

    def __init__(self, settings: Settings, producer: KafkaProducer | None = None) -> None:
        self.settings = settings
        self.topic = settings.topic("commands")
        self.producer = producer or make_producer(settings)

    def publish(self, envelope: Envelope, *, wait: bool = True, timeout: float = 10.0) -> None:
        future = self.producer.send(self.topic, key=envelope.key.encode(), value=envelope.encode())
        if wait:
            future.get(timeout=timeout)

    def flush(self, timeout: float | None = 10.0) -> None:
        self.producer.flush(timeout=timeout)

    def close(self) -> None:
        self.producer.close(timeout=5)

