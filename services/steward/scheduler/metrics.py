"""The scheduler's metrics (docs/metrics.md): how long its cycles take and how fragmented the free
capacity is after the last one. The scheduler is a singleton, so these are never double-counted."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram

from steward.domain.nodes import takes_new_work
from steward.metrics import serve

CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.cycle_seconds = Histogram(
            "steward_scheduler_cycle_seconds",
            "One scheduling cycle: catch up on the log, plan, publish, wait for the ledger's outcomes.",
            buckets=CYCLE_BUCKETS, registry=registry)
        self.fragmented = Gauge("steward_fragmented_gpus",
                                "Free GPUs that the largest waiting gang cannot use, after the last cycle.",
                                registry=registry)

    def observe(self, seconds: float, result: Any, nodes: dict[str, Any]) -> None:
        """`result` is the last `CycleResult` (None before the first), `nodes` the folded cluster nodes."""
        self.cycle_seconds.observe(seconds)
        if result is not None:
            capacity = sum(n.gpus for n in nodes.values() if takes_new_work(n.state))
            self.fragmented.set(round(result.fragmentation * capacity))


_started: dict[int, SchedulerMetrics] = {}


def start(settings: Any, registry: CollectorRegistry = REGISTRY) -> SchedulerMetrics:
    """Register and serve the scheduler's metrics, once per process and registry (a test may run the
    scheduler loop several times in one process)."""
    if id(registry) not in _started:
        _started[id(registry)] = SchedulerMetrics(registry)
        serve("scheduler", settings, registry)
    return _started[id(registry)]
