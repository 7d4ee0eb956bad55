"""Projections (read models) written from the ledger's folded state, in the same transaction as the
events. A rebuild folds the whole log through the same `evolve` and writes every row again, so the
live tables and a rebuild can only differ if something outside the ledger wrote to them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Table, delete, select

from steward.domain.state import ClusterNode, Job, LedgerState
from steward.store import schema


@dataclass(slots=True)
class Touched:
    allocations: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)

    def add(self, event_type: str, payload: dict[str, Any]) -> None:
        if event_type == "AllocationsSet":
            self.allocations.update(payload["shares"])
        elif event_type == "NodeRegistered":
            self.nodes.add(payload["node_id"])
        elif "job_id" in payload and event_type != "CommandRejected":
            self.jobs.add(payload["job_id"])


def job_row(job: Job, position: int) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "project": job.project,
        "state": job.state,
        "gpus": job.gpus,
        "min_runtime_s": job.min_runtime_s,
        "resumable": int(job.resumable),
        "job_class": job.job_class,
        "priority": job.priority,
        "command": list(job.command),
        "submitted_at": job.submitted_at,
        "attempt": job.attempt,
        "assignments": {n: list(g) for n, g in job.assignments},
        "funded": int(job.funded),
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "exit_code": job.exit_code,
        "position": position,
    }


def node_row(node: ClusterNode, position: int) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "gpus": node.gpus,
        "gpu_model": node.gpu_model,
        "path": list(node.path),
        "executor": node.executor,
        "state": node.state,
        "position": position,
    }


def _upsert(conn: Connection, table: Table, key: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    conn.execute(delete(table).where(table.c[key].in_([r[key] for r in rows])))
    conn.execute(table.insert(), rows)


def write(conn: Connection, state: LedgerState, touched: Touched, position: int) -> None:
    """Write the rows of everything `touched` as they are in `state`."""
    _upsert(conn, schema.proj_allocations, "name", [
        {"name": a.name, "parent": a.parent, "share": a.share, "position": position}
        for n in sorted(touched.allocations) if (a := state.allocations.get(n))
    ])
    _upsert(conn, schema.proj_nodes, "node_id", [
        node_row(state.nodes[n], position) for n in sorted(touched.nodes) if n in state.nodes
    ])
    _upsert(conn, schema.proj_jobs, "job_id", [
        job_row(state.jobs[j], position) for j in sorted(touched.jobs) if j in state.jobs
    ])


def write_all(conn: Connection, state: LedgerState, position: int) -> None:
    """Replace every projection row by the rows of `state` (a rebuild)."""
    for table in schema.PROJECTION_TABLES:
        conn.execute(delete(table))
    touched = Touched(set(state.allocations), set(state.nodes), set(state.jobs))
    write(conn, state, touched, position)


def read_rows(conn: Connection, table: Table) -> Iterable[dict[str, Any]]:
    key = next(iter(table.primary_key.columns))
    return [dict(r._mapping) for r in conn.execute(select(table).order_by(key))]
