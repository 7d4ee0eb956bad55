"""The scheduler service: a cycle over the projections, decisions published as commands to Kafka.

The cycle itself is pure (`steward.scheduler.plan`); this shell only reads, calls and publishes.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import select

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.scheduler.plan import ClusterView, JobView, NodeView, plan_placements
from steward.store import schema
from steward.store.eventstore import EventStore

log = logging.getLogger("steward.scheduler")

ACTIVE_STATES = ("QUEUED", "PREEMPTED", "PLACED", "RUNNING")


def read_view(store: EventStore) -> ClusterView:
    with store.engine.connect() as conn:
        nodes = [
            NodeView(r.node_id, r.gpus, r.gpu_model, tuple(r.path), r.state)
            for r in conn.execute(select(schema.proj_nodes).order_by(schema.proj_nodes.c.node_id))
        ]
        jobs = [
            JobView(r.job_id, r.project, r.state, r.gpus, r.priority, r.submitted_at,
                    {n: tuple(g) for n, g in r.assignments.items()})
            for r in conn.execute(
                select(schema.proj_jobs).where(schema.proj_jobs.c.state.in_(ACTIVE_STATES))
            )
        ]
        conn.rollback()
    return ClusterView(tuple(nodes), tuple(jobs))


def run_scheduler(settings: Settings, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    store = EventStore.from_url(settings.resolved_store_url)
    publisher = CommandPublisher(settings)
    in_flight: dict[str, float] = {}  # job id -> when its PlaceJob was published
    log.info("scheduler started")
    try:
        while not stop.is_set():
            now = time.time()
            view = read_view(store)
            queued_ids = {j.job_id for j in view.jobs if j.state in ("QUEUED", "PREEMPTED")}
            in_flight = {j: t for j, t in in_flight.items() if j in queued_ids and now - t < 10.0}
            decisions = plan_placements(view, frozenset(in_flight))
            for d in decisions:
                env = command_envelope(d, actor="scheduler", role="system")
                publisher.publish(env, wait=False)
                in_flight[d.job_id] = now
            if decisions:
                publisher.flush()
                log.info("placed %d job(s)", len(decisions))
            stop.wait(settings.scheduler_interval_s)
    finally:
        publisher.close()
