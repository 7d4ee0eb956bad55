"""Projections (read models): allocations, nodes, jobs (the queue is the jobs in state QUEUED).

The ledger folds every recorded event with `Projector` (the pure domain `evolve`, handed only the job
an event names for the job-local event types, so a fold costs O(1) per event instead of copying every
job) and writes the rows each event changed, stamped with the position of the last event that changed
them, in the same transaction as the events. `steward audit rebuild` folds the whole log again into
fresh tables and proves both equal (per-table checksums); the reference fold over the whole state
(`steward.ledger.core.fold`) is checked against the projector in the tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, MetaData, Table, delete, select, text

from steward.audit.verifier import canonical_text
from steward.domain.events import Event
from steward.domain.state import JOB_LOCAL_EVENTS as STATE_JOB_LOCAL_EVENTS
from steward.domain.state import AllocationNode, ClusterNode, Job, LedgerState, evolve, evolve_job
from steward.store import schema
from steward.store.eventstore import ANY_JSON_TEXTS, copy_rows, json_texts


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


def allocation_row(a: AllocationNode, position: int) -> dict[str, Any]:
    return {"name": a.name, "parent": a.parent, "share": a.share, "position": position}


def _upsert(conn: Connection, table: Table, key: str, keys: list[str], rows: list[dict[str, Any]]) -> None:
    if keys and conn.dialect.name == "postgresql":  # one JSON parameter: no statement with thousands of literals
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(f"DELETE FROM {table.name} WHERE {key} = {ANY_JSON_TEXTS}", (json_texts(keys),))
    else:
        for i in range(0, len(keys), 5000):
            conn.execute(delete(table).where(table.c[key].in_(keys[i:i + 5000])))
    insert_rows(conn, table, rows)


@dataclass(frozen=True, slots=True)
class ChangedRows:
    """The projection rows a batch changed, as they were at the end of that batch: (key, record or None
    when the row is gone, position) per table. Records are frozen, so holding them is a snapshot; the
    ledger writes these while it decides the next batch."""

    allocations: list[tuple[str, AllocationNode | None, int]]
    nodes: list[tuple[str, ClusterNode | None, int]]
    jobs: list[tuple[str, Job | None, int]]


def capture(proj: Projector, changed: Iterable[tuple[str, str]]) -> ChangedRows:
    keys: dict[str, set[str]] = {"a": set(), "n": set(), "j": set()}
    for kind, key in changed:
        keys[kind].add(key)
    pos = proj.positions
    allocations, nodes, jobs = proj.allocations, proj.nodes, proj.jobs
    return ChangedRows(
        [(k, allocations.get(k), pos.get(("a", k), 0)) for k in sorted(keys["a"])],
        [(k, nodes.get(k), pos.get(("n", k), 0)) for k in sorted(keys["n"])],
        [(k, jobs.get(k), pos.get(("j", k), 0)) for k in sorted(keys["j"])],
    )


_JSON_TEXT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # as `insert_rows` writes JSON


def job_copy_row(job: Job, position: int) -> tuple[Any, ...]:
    """`job_row` as the tuple `insert_rows` writes for it on PostgreSQL (columns in table order, JSON as
    text), built directly (equal: tests/unit/store/test_projection_rows.py)."""
    return (job.job_id, job.project, job.state, job.gpus, job.min_runtime_s, int(job.resumable), job.job_class,
            job.priority, _JSON_TEXT(list(job.command)), job.submitted_at, job.attempt,
            _JSON_TEXT({n: list(g) for n, g in job.assignments}) if job.assignments else "{}", int(job.funded),
            job.started_at, job.ended_at, job.exit_code, position)


def write_rows(conn: Connection, rows: ChangedRows) -> None:
    """Replace the rows `rows` names by their captured values (a row gone from the state is deleted): one
    array DELETE and one COPY per table."""
    _upsert(conn, schema.proj_allocations, "name", [k for k, _, _ in rows.allocations],
            [allocation_row(a, p) for _, a, p in rows.allocations if a is not None])
    _upsert(conn, schema.proj_nodes, "node_id", [k for k, _, _ in rows.nodes],
            [node_row(x, p) for _, x, p in rows.nodes if x is not None])
    job_keys = [k for k, _, _ in rows.jobs]
    if conn.dialect.name == "postgresql":
        if job_keys:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.execute(f"DELETE FROM proj_jobs WHERE job_id = {ANY_JSON_TEXTS}", (json_texts(job_keys),))
            present = [job_copy_row(j, p) for _, j, p in rows.jobs if j is not None]
            if present:
                copy_rows(conn, "proj_jobs", JOB_COLUMNS, present)
        return
    _upsert(conn, schema.proj_jobs, "job_id", job_keys, [job_row(j, p) for _, j, p in rows.jobs if j is not None])


def write(conn: Connection, proj: Projector, changed: Iterable[tuple[str, str]]) -> None:
    """Write the rows `changed` as they are in `proj` (a row gone from the state is deleted)."""
    write_rows(conn, capture(proj, changed))


# ------------------------------------------------------------------------------------ the fast fold


# Event types whose `evolve` reads and changes only the job named by `payload["job_id"]` (besides the
# GPU use): they are folded by the domain's `evolve_job` on that job alone. Any other type is folded on
# the whole state (correct for anything `evolve` does, at the cost of its dict copies).
JOB_LOCAL_EVENTS = STATE_JOB_LOCAL_EVENTS

Key = tuple[str, str]  # ("a" | "n" | "j", key)


def _changed(before: dict[str, Any], after: dict[str, Any], kind: str) -> list[Key]:
    if after is before:
        return []
    out = [(kind, k) for k, v in after.items() if before.get(k) is not v]
    out += [(kind, k) for k in before if k not in after]
    return out


@dataclass(slots=True)
class Projector:
    """The ledger state folded event by event, with the position of the last event that changed each
    row (for the projections)."""

    allocations: dict[str, AllocationNode] = field(default_factory=dict)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    positions: dict[Key, int] = field(default_factory=dict)
    position: int = 0
    recorded_at: float = 0.0
    head_hash: str = "0" * 64
    # open undo frames, oldest first: (scalars before the batch, jobs before, positions before)
    _frames: list[tuple[Any, dict[str, Job | None], dict[Key, int | None]]] = field(default_factory=list)

    def view(self) -> LedgerState:
        """The whole state without copying (for the pure, read-only `decide`)."""
        return LedgerState(self.allocations, self.nodes, self.jobs, self.used, self.policy)

    def begin(self) -> None:
        """Start recording what `apply` changes in a new undo frame, so that `rollback` can undo a failed
        batch. Frames stack: the ledger decides the next batch while the one before commits."""
        self._frames.append(((self.allocations, self.nodes, self.used, self.policy, self.position,
                              self.recorded_at, self.head_hash), {}, {}))

    def rollback(self) -> None:
        """Undo every open frame, newest first (the batches after a failed one were decided on it)."""
        while self._frames:
            self.rollback_newest()

    def rollback_newest(self) -> None:
        """Undo the newest open frame only (a batch that failed while being decided)."""
        if self._frames:
            undo, undo_jobs, undo_positions = self._frames.pop()
            (self.allocations, self.nodes, self.used, self.policy, self.position, self.recorded_at,
             self.head_hash) = undo
            for job_id, job in undo_jobs.items():
                if job is None:
                    self.jobs.pop(job_id, None)
                else:
                    self.jobs[job_id] = job
            for key, pos in undo_positions.items():
                if pos is None:
                    self.positions.pop(key, None)
                else:
                    self.positions[key] = pos

    def commit(self) -> None:
        """The oldest open frame's batch is durable: forget how to undo it."""
        if self._frames:
            self._frames.pop(0)

    def apply(self, event: Event, at: float, position: int, event_hash: str | None = None) -> list[Key]:
        """Fold one recorded event; returns the rows it changed."""
        payload = event.payload
        job_id = payload.get("job_id")
        if event.type in JOB_LOCAL_EVENTS and isinstance(job_id, str):
            changed = self._apply_job_local(event, at, position, job_id)
        else:
            changed = self._apply_whole(event, at, position)
        self.position, self.recorded_at = position, at
        if event_hash is not None:
            self.head_hash = event_hash
        return changed

    def _apply_job_local(self, event: Event, at: float, position: int, job_id: str) -> list[Key]:
        old = self.jobs.get(job_id)
        step = evolve_job(old, self.used, event, at)
        if step is None:
            return []
        job, self.used = step
        key = ("j", job.job_id)
        if self._frames:
            _, undo_jobs, undo_positions = self._frames[-1]
            if key not in undo_positions:
                undo_positions[key] = self.positions.get(key)
            if job.job_id not in undo_jobs:
                undo_jobs[job.job_id] = self.jobs.get(job.job_id)
        self.jobs[job.job_id] = job
        self.positions[key] = position
        return [key]

    def _apply_whole(self, event: Event, at: float, position: int) -> list[Key]:
        after = evolve(self.view(), event, at)
        new_jobs = after.jobs
        changed = _changed(self.jobs, new_jobs, "j")
        changed += _changed(self.allocations, after.allocations, "a")
        changed += _changed(self.nodes, after.nodes, "n")
        recording = bool(self._frames)
        undo_jobs, undo_positions = (self._frames[-1][1], self._frames[-1][2]) if recording else ({}, {})
        for kind, key in changed:
            if recording and (kind, key) not in undo_positions:
                undo_positions[(kind, key)] = self.positions.get((kind, key))
            if kind == "j":
                if recording and key not in undo_jobs:
                    undo_jobs[key] = self.jobs.get(key)
                if key in new_jobs:
                    self.jobs[key] = new_jobs[key]
                    self.positions[("j", key)] = position
                else:
                    self.jobs.pop(key, None)
                    self.positions.pop(("j", key), None)
            else:
                table = after.allocations if kind == "a" else after.nodes
                if key in table:
                    self.positions[(kind, key)] = position
                else:
                    self.positions.pop((kind, key), None)
        self.allocations, self.nodes, self.used, self.policy = after.allocations, after.nodes, after.used, after.policy
        return changed

    def state(self) -> LedgerState:
        return LedgerState(dict(self.allocations), dict(self.nodes), dict(self.jobs), dict(self.used),
                           dict(self.policy))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        pos = self.positions
        return {
            "proj_allocations": [allocation_row(a, pos[("a", n)]) for n, a in sorted(self.allocations.items())],
            "proj_nodes": [node_row(x, pos[("n", n)]) for n, x in sorted(self.nodes.items())],
            "proj_jobs": [job_row(j, pos[("j", k)]) for k, j in sorted(self.jobs.items())],
        }


JOB_COLUMNS = tuple(c.name for c in schema.proj_jobs.columns)


def fold_events(events: Iterable[tuple[int, Event, float]], start: Projector | None = None) -> Projector:
    proj = start or Projector()
    for position, ev, at in events:
        proj.apply(ev, at, position)
    return proj


# ------------------------------------------------------------------------------------ rebuild + checksums


def read_rows(conn: Connection, table: Table) -> list[dict[str, Any]]:
    key = next(iter(table.primary_key.columns))
    return [dict(r._mapping) for r in conn.execute(select(table).order_by(key))]


def checksum(rows: Iterable[dict[str, Any]]) -> str:
    """SHA-256 over the canonical rows in key order (integral floats and ints compare equal)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(canonical_text(row).encode())
        h.update(b"\n")
    return h.hexdigest()


def fresh_table(conn: Connection, table: Table, prefix: str = "rebuild_") -> Table:
    """An empty temporary copy of `table` (the app role may create temporary tables, not tables)."""
    name = prefix + table.name
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"CREATE TEMPORARY TABLE {name} (LIKE {table.name} INCLUDING DEFAULTS) ON COMMIT DROP"))
    else:
        conn.execute(text(f"DROP TABLE IF EXISTS temp.{name}"))
        conn.execute(text(f"CREATE TEMP TABLE {name} AS SELECT * FROM {table.name} WHERE 0"))
    return table.to_metadata(MetaData(), name=name)


def insert_rows(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        cols = [c.name for c in table.columns]
        json_cols = {c.name for c in table.columns if c.type.__class__.__name__ == "JSON"}
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        copy_rows(conn, table.name, cols, ([dumps(r[c]) if c in json_cols else r[c] for c in cols] for r in rows))
        return
    for i in range(0, len(rows), 5000):
        conn.execute(table.insert(), rows[i:i + 5000])


def sql_checksum(conn: Connection, table: Table) -> tuple[int, str]:
    """(rows, SHA-256 over the MD5 of every row's text in key order), computed by PostgreSQL next to the
    data. Two tables of the same definition holding the same values give the same text (floats print
    shortest-exact, JSON columns keep the text they were written with, both sides by `insert_rows`)."""
    key = next(iter(table.primary_key.columns)).name
    row = conn.execute(text(
        f"SELECT count(*), encode(sha256(convert_to(coalesce(string_agg(md5(t::text), '' ORDER BY t.{key}), ''), "
        f"'UTF8')), 'hex') FROM {table.name} t")).one()
    return int(row[0]), str(row[1])


def compare(conn: Connection, rebuilt: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Write `rebuilt` into fresh tables and compare per-table checksums with the live tables.

    On PostgreSQL the server checksums both tables (`sql_checksum`); equal checksums prove equal rows. When
    they differ (or on SQLite), both tables are read back and compared row by row in canonical form, which
    also names the differences (and tells a different encoding of equal values from a different value)."""
    out: dict[str, dict[str, Any]] = {}
    for table in schema.PROJECTION_TABLES:
        fresh = fresh_table(conn, table)
        insert_rows(conn, fresh, rebuilt[table.name])
        if conn.dialect.name == "postgresql":
            (live_n, live_sum), (fresh_n, fresh_sum) = sql_checksum(conn, table), sql_checksum(conn, fresh)
            if live_sum == fresh_sum:
                out[table.name] = {"rows": fresh_n, "live_rows": live_n, "checksum": fresh_sum,
                                   "live_checksum": live_sum, "equal": True, "checksum_of": "postgresql row text"}
                continue
        live_rows, fresh_rows = read_rows(conn, table), read_rows(conn, fresh)
        live_sum, fresh_sum = checksum(live_rows), checksum(fresh_rows)
        entry: dict[str, Any] = {"rows": len(fresh_rows), "live_rows": len(live_rows), "checksum": fresh_sum,
                                 "live_checksum": live_sum, "equal": live_sum == fresh_sum,
                                 "checksum_of": "canonical rows"}
        if live_sum != fresh_sum:
            entry["differences"] = list(_differences(table, live_rows, fresh_rows))[:10]
        out[table.name] = entry
    return out


def _differences(table: Table, live: list[dict[str, Any]], fresh: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    key = next(iter(table.primary_key.columns)).name
    a = {r[key]: canonical_text(r) for r in live}
    b = {r[key]: canonical_text(r) for r in fresh}
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            yield {"key": k, "live": a.get(k), "rebuilt": b.get(k)}


def replace_live(conn: Connection, rebuilt: dict[str, list[dict[str, Any]]]) -> None:
    """Replace every live projection row by the rebuilt rows (repair after an outside write)."""
    for table in schema.PROJECTION_TABLES:
        conn.execute(delete(table))
        insert_rows(conn, table, rebuilt[table.name])
