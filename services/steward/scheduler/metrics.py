"""The scheduler's metrics (docs/metrics.md): how long its cycles take and how fragmented each cluster's free
capacity is after the last one. The scheduler is a singleton, so these are never double-counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from steward.metrics import serve
from steward.policy.model import CycleResult, Snapshot
from steward.policy.placement import unusable_by_cluster
from steward.policy.routing import largest_waiting_by_cluster

CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
FRAGMENTED = "steward_fragmented_gpus"
FRAGMENTED_HELP = ("Free GPUs of a cluster that the largest waiting gang that may run there cannot use, after the "
                   "last cycle (ADR 0091; the lab's: sum over clusters).")


def fragmented_after(snap: Snapshot, result: CycleResult) -> dict[str, int]:
    """Each cluster's fragmented GPUs once the cycle's placements hold their GPUs (the jobs still running hold
    theirs, a stopping one until its stop is recorded), against the largest gang still waiting that may run there:
    the policy's per-cluster rule (`policy.placement.unusable_by_cluster` against
    `policy.routing.largest_waiting_by_cluster`), as the API's `ClusterOccupancy.fragmentedGpus`."""
    used: dict[str, int] = {}
    for job in snap.running:
        for nid, gpus in job.placement:
            used[nid] = used.get(nid, 0) + gpus
    placed = set()
    for p in result.placements:
        placed.add(p.job_id)
        for nid, gpus in p.assignments:
            used[nid] = used.get(nid, 0) + gpus
    waiting = [j for j in snap.pending if j.id not in placed]
    return unusable_by_cluster(snap.nodes, used, largest_waiting_by_cluster(waiting, snap.nodes))


class Fragmentation(Collector):
    """`steward_fragmented_gpus{cluster}` of the last cycle, computed when scraped (not once a cycle: the cycles
    run back to back while they decide)."""

    def __init__(self) -> None:
        self.last: tuple[Snapshot, CycleResult] | None = None

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(FRAGMENTED, FRAGMENTED_HELP, labels=["cluster"])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(FRAGMENTED, FRAGMENTED_HELP, labels=["cluster"])
        last = self.last
        if last is not None:
            for cluster, gpus in sorted(fragmented_after(*last).items()):
                family.add_metric([cluster], gpus)
        yield family


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.cycle_seconds = Histogram(
            "steward_scheduler_cycle_seconds",
            "One scheduling cycle: catch up on the log, plan, publish, wait for the ledger's outcomes.",
            buckets=CYCLE_BUCKETS, registry=registry)
        self.fragmented = Fragmentation()
        registry.register(self.fragmented)

    def observe(self, seconds: float, result: CycleResult | None, snap: Snapshot | None) -> None:
        """`result` is the last `CycleResult` and `snap` the snapshot it was decided on (None before the first)."""
        self.cycle_seconds.observe(seconds)
        if result is not None and snap is not None:
            self.fragmented.last = (snap, result)


_started: dict[int, SchedulerMetrics] = {}


def start(settings: Any, registry: CollectorRegistry = REGISTRY) -> SchedulerMetrics:
    """Register and serve the scheduler's metrics, once per process and registry (a test may run the
    scheduler loop several times in one process)."""
    if id(registry) not in _started:
        _started[id(registry)] = SchedulerMetrics(registry)
        serve("scheduler", settings, registry)
    return _started[id(registry)]
