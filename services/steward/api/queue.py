"""The queue in the order the scheduler takes it now (DESIGN.md "Ordering (hierarchical fair share)").

Nothing here re-implements the policy. The API keeps the scheduler's own view of the log
(`steward.scheduler.service.SchedulerState`: the same fold, the same usage window fed with the funded
intervals of ended attempts, the policy settings recorded by `PolicySet`), builds the policy snapshot
with the scheduler's bridge (`snapshot_of`, `running_job`, `policy_node`), and orders the waiting jobs
with the functions the cycle's phase 2 calls (`standing`, `order_pending`). So a job's position overall
and inside its project is the one the scheduler's next cycle would give it.

The order is computed once per store head and at most every `ttl_s` seconds (usage moves with the
clock even when the log does not); the fold catches up incrementally.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from steward.api.outlook import QuotaFigures, quota_figures
from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import LedgerState
from steward.policy.ordering import demand_of, order_pending, standing
from steward.policy.routing import clusters_of, largest_waiting_by_cluster, positions_in_clusters
from steward.scheduler.bridge import HOLDING_STATES, policy_node, running_job, snapshot_of
from steward.scheduler.service import SchedulerState
from steward.store.eventstore import EventStore

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PolicyOrder:
    """Waiting job ids in global order, each job's 1-based position overall and in its project, and the
    fair-share standing of each project (the evidence: ranks, shares, usage level by level)."""

    head: int
    now: float
    ordering: str
    jobs: tuple[str, ...]
    position: Mapping[str, int]
    position_in_project: Mapping[str, int]
    standing: Mapping[str, dict[str, Any]]
    position_in_clusters: Mapping[str, int]
    """ADR 0073: the position among the waiting jobs that accept a cluster the job accepts (`position` with one
    cluster; `policy.routing.positions_in_clusters`)."""
    clusters: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The clusters each waiting job may run on (`policy.routing.clusters_of`: the models and clusters it
    accepts, its allocation's pin): a cluster's queue is the jobs that may run there."""
    largest_by_cluster: Mapping[str, int] = field(default_factory=dict)
    """ADR 0091: the GPUs of the largest waiting gang that may run on each cluster (0: none;
    `policy.routing.largest_waiting_by_cluster`), the gang the cluster's fragmentation is measured against."""


def order_now(view: SchedulerState, now: float) -> PolicyOrder:
    """The global order of `view`'s waiting jobs at `now`, as the cycle's phase 2 computes it."""
    state = view.state
    running = [running_job(j, now) for j in state.jobs.values() if j.state in HOLDING_STATES]
    nodes = {nid: policy_node(node) for nid, node in state.nodes.items()}
    usage = view.usage.usage(max(now, view.usage.now), running, nodes)
    snap = snapshot_of(state, usage, view.settings, now)
    capacity = sum(n.gpus for n in snap.nodes if takes_new_work(n.state))
    stand = standing(snap.tree, snap.usage, capacity, snap.settings, demand_of(snap))
    order = order_pending(snap.pending, stand, snap.usage, snap.settings)
    ids = tuple(j.id for j in order.jobs)
    accepted = clusters_of(order.jobs, snap.nodes)
    in_project: dict[str, int] = {}
    for group in order.by_project.values():
        for i, job in enumerate(group, 1):
            in_project[job.id] = i
    return PolicyOrder(
        head=view.head, now=now, ordering=snap.settings.ordering, jobs=ids,
        position={j: i for i, j in enumerate(ids, 1)}, position_in_project=in_project,
        standing={p: stand.evidence(snap.tree, p) for p in order.by_project},
        position_in_clusters=positions_in_clusters(order.jobs, snap.nodes, accepted), clusters=accepted,
        largest_by_cluster=largest_waiting_by_cluster(order.jobs, snap.nodes, accepted))


class PolicyQueue:
    """The scheduler's view of the log, kept current, and its order (thread-safe; call in a thread)."""

    def __init__(self, store: EventStore, settings: PolicySettings | None = None,
                 clock: Callable[[], float] = time.time, ttl_s: float = 2.0) -> None:
        self.store = store
        self.clock = clock
        self.ttl_s = ttl_s
        self._view = SchedulerState(settings or PolicySettings.steward())
        self._lock = threading.Lock()
        self._last: PolicyOrder | None = None
        self._quotas: tuple[int, dict[str, QuotaFigures]] | None = None

    def _catch_up(self) -> None:
        self._view.catch_up(self.store)
        self._view.follow_policy(self.store)

    def last(self) -> PolicyOrder | None:
        """The last order computed, whatever its head and age (no IO): for a figure pushed at every head (the
        occupancy subscription) that may lag the log by an order's computation."""
        return self._last

    def cached(self, head: int) -> PolicyOrder | None:
        """The last order if `order(head)` would return it without recomputing (no IO), else None."""
        last = self._last
        if last is not None and last.head >= head and self.clock() - last.now < self.ttl_s:
            return last
        return None

    def read(self, fn: Callable[[LedgerState, PolicySettings, float], T]) -> T:
        """`fn(state, settings, now)` on the view caught up with the store (the submit preview, the
        debug quotas in force): the state and the settings the scheduler's next cycle reads."""
        with self._lock:
            self._catch_up()
            return fn(self._view.state, self._view.settings, self.clock())

    def cached_quotas(self, head: int) -> dict[str, QuotaFigures] | None:
        """`quotas(head)` when it needs no IO, else None."""
        hit = self._quotas
        return hit[1] if hit is not None and hit[0] >= head else None

    def quotas(self, head: int) -> dict[str, QuotaFigures]:
        """Every allocation's debug quota in force at the store's head (at least `head`): they move only
        with the log (an allocation change, a node, a policy change), so they are kept per head."""
        hit = self._quotas
        if hit is not None and hit[0] >= head:
            return hit[1]

        def compute(state: LedgerState, settings: PolicySettings, now: float) -> tuple[int, dict[str, QuotaFigures]]:
            return self._view.head, quota_figures(state, settings)

        self._quotas = self.read(compute)
        return self._quotas[1]

    def order(self, head: int | None = None) -> PolicyOrder:
        """The order at the store's head (at least `head`), computed anew when the log moved or the
        last one is older than `ttl_s`."""
        last = self._last
        now = self.clock()
        if last is not None and (head is None or last.head >= head) and now - last.now < self.ttl_s:
            return last
        if not self._lock.acquire(blocking=False):
            if last is not None and (head is None or last.head >= head):
                return last  # only the clock moved and another thread is recomputing: the last order meanwhile
            self._lock.acquire()
        try:
            last = self._last
            if last is not None and (head is None or last.head >= head) and now - last.now < self.ttl_s:
                return last
            self._catch_up()
            order = order_now(self._view, now)
            self._last = order
            return order
        finally:
            self._lock.release()
