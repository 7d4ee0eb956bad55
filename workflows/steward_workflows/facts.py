"""Facts the workflows need from the event store, read (never written) by the worker's activities."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select

from steward.domain.budget import period_figures
from steward.domain.commands import ReportHeartbeat
from steward.domain.state import ACTIVE_STATES, LedgerState, evolve
from steward.store import schema
from steward.store.eventstore import EventStore
from steward_workflows.payloads import ExecutorLiveness, JobOnNode, NodeOccupancy, PeriodFigures


class StoreFacts:
    def __init__(self, store: EventStore) -> None:
        self.store = store

    def attempt_current(self, job_id: str, attempt: int) -> bool:
        """Is `attempt` still the job's placed or running attempt? (projections are written in the same
        transaction as the events the outbox relays, so they are never older than an event read)."""
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(schema.proj_jobs.c.state, schema.proj_jobs.c.attempt).where(schema.proj_jobs.c.job_id == job_id)
            ).first()
            conn.rollback()
        return row is not None and row.attempt == attempt and row.state in ACTIVE_STATES

    def project_of(self, job_id: str) -> str:
        """The job's project ("" when the store has no such job)."""
        with self.store.engine.connect() as conn:
            project = conn.execute(
                select(schema.proj_jobs.c.project).where(schema.proj_jobs.c.job_id == job_id)).scalar()
            conn.rollback()
        return str(project) if project is not None else ""

    def executor_liveness(self, executor: str, job_id: str = "") -> ExecutorLiveness:
        """When the ledger recorded the executor's last heartbeat (its stream's newest event: one indexed row),
        and how many placements on its nodes are not yet started besides `job_id`'s (ADR 0069)."""
        stream = ReportHeartbeat(executor, {}).aggregate
        events = schema.events
        with self.store.engine.connect() as conn:
            heard = conn.execute(select(events.c.recorded_at).where(events.c.stream_id == stream)
                                 .order_by(events.c.version.desc()).limit(1)).scalar()
            nodes: set[str] = set(conn.execute(select(schema.proj_nodes.c.node_id)
                                     .where(schema.proj_nodes.c.executor == executor)).scalars())
            placed = conn.execute(select(schema.proj_jobs.c.job_id, schema.proj_jobs.c.assignments)
                                  .where(schema.proj_jobs.c.state == "PLACED")).all()
            conn.rollback()
        queued = sum(1 for row in placed if row.job_id != job_id and not nodes.isdisjoint(row.assignments or {}))
        return ExecutorLiveness(executor, float(heard) if heard is not None else None, queued, time.time())

    def recorded_policy(self) -> dict[str, Any]:
        """The policy overrides in force: the settings of the last `PolicySet` (none: {})."""
        last: dict[str, Any] = {}
        for rec in self.store.stream("policy"):
            if rec.type == "PolicySet":
                last = dict(rec.payload.get("settings") or {})
        return last

    def node_occupancy(self, node_id: str) -> NodeOccupancy:
        """The node's state and the placed or running jobs on it, each folded from its own stream."""
        with self.store.engine.connect() as conn:
            node = conn.execute(select(schema.proj_nodes).where(schema.proj_nodes.c.node_id == node_id)).first()
            rows = conn.execute(
                select(schema.proj_jobs.c.job_id, schema.proj_jobs.c.assignments)
                .where(schema.proj_jobs.c.state.in_(sorted(ACTIVE_STATES)))
            ).all()
            conn.rollback()
        if node is None:
            return NodeOccupancy(node_id, "unknown")
        jobs = []
        for row in rows:
            job_id: str = row.job_id
            if node_id not in (row.assignments or {}):
                continue
            state = LedgerState()
            for rec in self.store.stream(f"job-{job_id}"):
                state = evolve(state, rec.as_event(), rec.recorded_at)
            job = state.jobs.get(job_id)
            if job is None or job.state not in ACTIVE_STATES:
                continue
            jobs.append(JobOnNode(job.job_id, job.attempt, job.state, job.protected_until, job.preempting,
                                  job.resumable))
        return NodeOccupancy(node_id, node.state, jobs, node.executor)

    def period(self, start: float, end: float) -> PeriodFigures:
        count = 0

        def history() -> Iterator[tuple[str, dict[str, Any], float]]:
            nonlocal count
            for rec in self.store.iterate():
                count += 1
                yield rec.type, rec.payload, rec.recorded_at

        figures, capacity = period_figures(history(), start, end)
        return PeriodFigures(start, end, capacity, figures, count)
