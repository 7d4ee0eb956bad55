"""What wakes the scheduler: a recorded event that may change a decision, read from the Kafka `events`
topic, or the cycle interval (protections expire, usage ages), whichever comes first.

A timer alone made a submission wait half an interval on average before any cycle saw it (docs/benchmarks.md
"Lease"). The consumer long-polls the broker (no group, every partition, from the end: the cycle reads the
store itself, the topic only says "something happened"), so an idle scheduler costs no CPU. When Kafka is
away the wake falls back to the timer and tries again at the next wait.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka import TopicPartition
from kafka.errors import KafkaError

from steward.bus.kafka import make_consumer
from steward.config import Settings

log = logging.getLogger("steward.scheduler")

# Events that never call for a new decision at once: the scheduler's own outcomes (it runs again at once
# after deciding anyway), reports that only refine later choices, and notes. Everything else wakes it
# (a new event type wakes it too, which is the safe side).
QUIET_EVENTS = frozenset({
    "JobPlaced", "JobPreemptionRequested", "JobDeferred", "JobStarted", "ExecutorHeartbeat", "CheckpointSaved",
    "AccessDenied", "CommandRefused", "CommandRejected", "SessionWarned", "SessionActive", "PeriodClosed",
    "NamespaceMapped",  # which project a Kubernetes namespace charges: read by its executor, not the scheduler
})


def wakes_scheduler(event_type: str) -> bool:
    """DESIGN.md "How data flows": the scheduler cycles over projections when the log changes them in a
    way that may place or preempt something (a submission, an end, a node or allocation change)."""
    return event_type not in QUIET_EVENTS


def event_type_of(raw: bytes | None) -> str:
    """The `type` of a relayed event (`""` for anything unreadable: it wakes the scheduler, harmlessly)."""
    try:
        data = json.loads(raw or b"")
    except ValueError:
        return ""
    return str(data.get("type", "")) if isinstance(data, dict) else ""


def any_wakes(raw_values: Iterable[bytes | None]) -> bool:
    return any(wakes_scheduler(event_type_of(v)) for v in raw_values)


ConsumerFactory = Callable[[], Any]


class EventWake:
    """`wait(timeout_s)` returns True when an event that may change a decision arrived, False after the
    timeout (or when stopped)."""

    def __init__(self, settings: Settings, stop: threading.Event, factory: ConsumerFactory | None = None) -> None:
        self.topic = settings.topic("events")
        self.stop = stop
        self._factory = factory or (lambda: make_consumer(settings, None, client_id="steward-scheduler-wake",
                                                          fetch_max_wait_ms=500))
        self._consumer: Any = None

    def _connect(self) -> Any:
        if self._consumer is not None:
            return self._consumer
        consumer = self._factory()
        partitions = consumer.partitions_for_topic(self.topic)
        if not partitions:
            consumer.close()
            return None
        parts = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(parts)
        consumer.seek_to_end(*parts)
        for tp in parts:  # resolve the end now: an event relayed from here on wakes the next wait
            consumer.position(tp)
        self._consumer = consumer
        return consumer

    def start(self) -> None:
        """Take the topic's end before the first cycle, so nothing recorded after that cycle is missed."""
        self._try_connect()

    def _try_connect(self) -> Any:
        try:
            return self._connect()
        except (KafkaError, OSError) as err:
            log.warning("events topic unavailable for waking (%s); cycling on the timer", type(err).__name__)
            self.close()
            return None

    def wait(self, timeout_s: float) -> bool:
        """Until an event that may change a decision arrives (True) or `timeout_s` passed (False); quiet
        events are read past."""
        deadline = time.monotonic() + timeout_s
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            consumer = self._try_connect()
            if consumer is None:
                self.stop.wait(left)
                return False
            try:
                polled = consumer.poll(timeout_ms=max(int(left * 1000), 1))
            except (KafkaError, OSError) as err:
                log.warning("waiting on the events topic failed (%s); cycling on the timer", type(err).__name__)
                self.close()
                self.stop.wait(max(deadline - time.monotonic(), 0.0))
                return False
            if any_wakes(r.value for records in polled.values() for r in records):
                return True
        return False

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # closing a broken consumer: nothing left to release
                log.debug("wake consumer close failed", exc_info=True)
