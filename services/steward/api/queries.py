"""Reads of the projections and the log for the API (synchronous; called in a thread)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from steward.domain.state import AllocationNode, LedgerState
from steward.store import schema
from steward.store.eventstore import EventStore


def allocation_rows(store: EventStore) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(schema.proj_allocations))]
        conn.rollback()
    return rows


def allocation_state(store: EventStore) -> LedgerState:
    """Just enough state for the pure guards the API runs before publishing (e.g. known project)."""
    allocations = {r["name"]: AllocationNode(r["name"], r["parent"], r["share"]) for r in allocation_rows(store)}
    return LedgerState(allocations=allocations)


def job_row(store: EventStore, job_id: str) -> dict[str, Any] | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(schema.proj_jobs).where(schema.proj_jobs.c.job_id == job_id)).first()
        conn.rollback()
    return dict(row._mapping) if row else None


def job_rows(store: EventStore, state: str | None, project: str | None, limit: int) -> list[dict[str, Any]]:
    q = select(schema.proj_jobs).order_by(schema.proj_jobs.c.submitted_at.desc()).limit(limit)
    if state:
        q = q.where(schema.proj_jobs.c.state == state)
    if project:
        q = q.where(schema.proj_jobs.c.project == project)
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(q)]
        conn.rollback()
    return rows


def node_rows(store: EventStore) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(schema.proj_nodes).order_by(schema.proj_nodes.c.node_id))]
        conn.rollback()
    return rows
