"""The ledger's metrics (docs/metrics.md): counters and the admission-wait histogram, incremented from each
committed batch of recorded events, and the lag gauges, read from Kafka and the store at scrape time.

Every event is recorded by exactly one ledger, so these counters sum across ledgers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import select

from steward.bus.kafka import make_consumer
from steward.domain.leadership import fenced_role
from steward.domain.state import LedgerState
from steward.metrics import serve
from steward.store import schema
from steward.store.eventstore import EventStore, RecordedEvent

log = logging.getLogger("steward.metrics")

ADMISSION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200, 604800)
BATCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
UNKNOWN = "unknown"


class LedgerMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.events = Counter("steward_ledger_events", "Events recorded, by event type.", ["type"],
                              registry=registry)
        self.rejections = Counter("steward_ledger_rejections", "Commands refused by the domain, by code.",
                                  ["code"], registry=registry)
        self.preemptions = Counter("steward_preemptions", "Running jobs stopped by a decision.",
                                   ["reason", "allocation"], registry=registry)
        self.restored = Counter("steward_sessions_restored", "Sessions re-opened from their checkpoint.",
                                ["outcome"], registry=registry)
        self.deadletters = Counter("steward_deadletter", "Messages sent to the dead-letter topic.",
                                   registry=registry)
        self.fenced = Counter("steward_ledger_fenced_commands",
                              "Commands refused because their role's lease has a newer epoch (ADR 0065), by role.",
                              ["role"], registry=registry)
        self.admission_wait = Histogram(
            "steward_admission_wait_seconds", "Submit (or requeue) to the start of the attempt.", ["class"],
            buckets=ADMISSION_BUCKETS, registry=registry)
        self.batch_seconds = Histogram("steward_ledger_batch_seconds", "One ledger transaction.",
                                       buckets=BATCH_BUCKETS, registry=registry)

    def observe_batch(self, recorded: Sequence[RecordedEvent], state: LedgerState, dead: int = 0,
                      seconds: float | None = None, reasons: Iterable[str] = ()) -> None:
        """Count one committed batch; `state` is the ledger's state after it (jobs' allocation and class);
        `reasons`: why each of its dead letters was refused."""
        if seconds is not None:
            self.batch_seconds.observe(seconds)
        if dead:
            self.deadletters.inc(dead)
        for reason in reasons:
            if (role := fenced_role(reason)) is not None:
                self.fenced.labels(role=role).inc()
        for rec in recorded:
            self.events.labels(type=rec.type).inc()
            p = rec.payload
            if rec.type == "CommandRejected":
                self.rejections.labels(code=str(p.get("code", UNKNOWN))).inc()
            elif rec.type == "JobPreempted":
                job = state.jobs.get(str(p.get("job_id", "")))
                self.preemptions.labels(reason=str(p.get("reason") or UNKNOWN),
                                        allocation=job.project if job else UNKNOWN).inc()
            elif rec.type == "JobStarted":
                self._started(p, state)

    def _started(self, p: dict[str, Any], state: LedgerState) -> None:
        job = state.jobs.get(str(p.get("job_id", "")))
        if job is None:
            return
        attempt = int(p.get("attempt", job.attempt))
        queued = job.requeued_at if attempt > 1 and job.requeued_at is not None else job.submitted_at
        started = float(p.get("started_at") or job.started_at or queued)
        self.admission_wait.labels(job.job_class).observe(max(0.0, started - queued))
        if job.restored_from and attempt == 1:
            same = bool(job.preferred_node) and job.preferred_node in job.nodes
            self.restored.labels(outcome="same_node" if same else "other_node").inc()


class LedgerStore(Protocol):
    """What the lag collector reads of the event store."""

    @property
    def engine(self) -> Any: ...

    def load_offsets(self, consumer: str) -> dict[tuple[str, int], int]: ...

    def head(self) -> int: ...


class LagCollector(Collector):
    """At each scrape: `steward_ledger_lag_messages` (per topic and partition of every command topic the ledger
    reads: the end offset minus the offset stored with the ledger's last transaction), their sum
    `steward_ledger_backlog_messages`, `steward_event_store_head` and `steward_outbox_lag_events`. A part that
    does not answer leaves its series out of that scrape (logged), never a made-up value."""

    def __init__(self, store: LedgerStore, consumer_name: str, end_offsets: Any,
                 relay: str = "events-topic") -> None:
        self.store = store
        self.consumer_name = consumer_name
        self.end_offsets = end_offsets  # callable: () -> {(topic, partition): end offset}
        self.relay = relay
        self._lock = threading.Lock()
        self._warned_at = 0.0

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []

    def _warn(self, what: str, err: Exception) -> None:
        if time.monotonic() - self._warned_at > 60:
            self._warned_at = time.monotonic()
            log.warning("metrics: %s not read (%s: %s)", what, type(err).__name__, err)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            yield from self._collect()

    def _collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            stored = self.store.load_offsets(self.consumer_name)
            head = self.store.head()
            with self.store.engine.connect() as conn:
                published = conn.execute(select(schema.relay_positions.c.position).where(
                    schema.relay_positions.c.relay == self.relay)).scalar()
                conn.rollback()
        except Exception as err:
            self._warn("the store", err)
            return
        yield GaugeMetricFamily("steward_event_store_head", "The last recorded global position.", value=head)
        yield GaugeMetricFamily("steward_outbox_lag_events", "Events not yet published on the events topic.",
                                value=max(0, head - int(published or 0)))
        try:
            ends: dict[tuple[str, int], int] = self.end_offsets()
        except Exception as err:
            self._warn("Kafka end offsets", err)
            return
        lag = GaugeMetricFamily("steward_ledger_lag_messages",
                                "Commands on a partition of a command topic not yet decided.",
                                labels=["topic", "partition"])
        total = 0
        for (topic, partition), end in sorted(ends.items()):
            behind = max(0, end - stored.get((topic, partition), 0))
            total += behind
            lag.add_metric([topic, str(partition)], behind)
        yield lag
        yield GaugeMetricFamily("steward_ledger_backlog_messages",
                                "Commands on every command topic not yet decided (the sum of the lag).", value=total)


def kafka_end_offsets(consumer: Any, prefix: str) -> Any:
    """A callable for `LagCollector`: the end offset of every partition of every command topic of `prefix`
    (`steward.bus.identity.is_command_topic`: the topics the ledger reads, ADR 0036), listed anew at each
    scrape so that a topic created since (a new executor's) is counted at once. A consumer of its own, used
    only by the scrape."""
    # lazy: Kafka's client loads only in the process that serves the ledger's metrics
    from kafka import TopicPartition

    from steward.bus.identity import is_command_topic

    def read() -> dict[tuple[str, int], int]:
        parts = [TopicPartition(t, p) for t in sorted(consumer.topics()) if is_command_topic(prefix, t)
                 for p in sorted(consumer.partitions_for_topic(t) or ())]
        ends = consumer.end_offsets(parts) if parts else {}
        return {(tp.topic, tp.partition): int(offset) for tp, offset in ends.items()}

    return read


def start(settings: Any, store: EventStore, consumer_name: str,
          registry: CollectorRegistry = REGISTRY) -> LedgerMetrics:
    """Register the ledger's metrics and serve them (steward.metrics.serve); returns the counters. Once per
    process and registry."""
    if id(registry) in _started:  # once per process (a test may run the ledger loop several times)
        return _started[id(registry)]
    metrics = _started[id(registry)] = LedgerMetrics(registry)
    consumer = make_consumer(settings, None, client_id="steward-ledger-metrics", request_timeout_ms=15000)
    registry.register(LagCollector(store, consumer_name, kafka_end_offsets(consumer, settings.topic_prefix)))
    serve("ledger", settings, registry)
    return metrics


_started: dict[int, LedgerMetrics] = {}
