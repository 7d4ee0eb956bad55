"""Projections (read models): allocations, nodes, jobs (the queue is the jobs in state QUEUED).

The ledger folds every recorded event with `Projector` (the pure domain `evolve`, handed only the job
an event names for the job-local event types, so a fold costs O(1) per event instead of copying every
job) and writes the rows each event changed, stamped with the position of the last event that changed
them, in the same transaction as the events. `steward audit rebuild` folds the whole log again into
fresh tables and proves both equal (per-table checksums); the reference fold over the whole state
(`steward.ledger.ledger.fold`) is checked against the projector in the tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, MetaData, Table, delete, select, text

from steward.store import copytext, schema
from steward.store.eventstore import (
    ANY_JSON_TEXTS,
    COPY_CHUNK_ROWS,
    chunks,
    copy_data,
    copy_rows,
    json_texts,
    sql_literal,
)

# the fold and the rows it changed live in `steward.store.projector` (pure, compiled: ADR 0020)
from steward.store.projector import JOB_LOCAL_EVENTS as JOB_LOCAL_EVENTS
from steward.store.projector import ChangedRows as ChangedRows
from steward.store.projector import Key as Key
from steward.store.projector import Projector as Projector
from steward.store.projector import allocation_row as allocation_row
from steward.store.projector import capture as capture
from steward.store.projector import fold_events as fold_events
from steward.store.projector import job_row as job_row
from steward.store.projector import node_row as node_row
from steward.store.verifier import canonical_text


def _upsert(conn: Connection, table: Table, key: str, keys: list[str], rows: list[dict[str, Any]]) -> None:
    if keys and conn.dialect.name == "postgresql":  # one JSON parameter: no statement with thousands of literals
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(f"DELETE FROM {table.name} WHERE {key} = {ANY_JSON_TEXTS}", (json_texts(keys),))
    else:
        for i in range(0, len(keys), 5000):
            conn.execute(delete(table).where(table.c[key].in_(keys[i:i + 5000])))
    insert_rows(conn, table, rows)


def held_jobs(rows: ChangedRows) -> list[str]:
    """The jobs whose rows `rows` replaces, but for those new in the batch (`rows.new_jobs`): no earlier batch
    wrote them, so there is nothing to delete (ADR 0022)."""
    new = rows.new_jobs
    return [k for k, _, _ in rows.jobs if k not in new]


def jobs_delete_sql(conn: Connection, rows: ChangedRows) -> str | None:
    """PostgreSQL: the DELETE of the job rows `rows` replaces, as one literal statement (for the writer's
    first round trip, `EventRecorder.lock_head`), or None."""
    held = held_jobs(rows)
    return jobs_delete_sql_for(conn, held) if held else None


def jobs_delete_sql_for(conn: Connection, held: Sequence[str]) -> str:
    """The DELETE of the job rows of `held` (job ids) as one literal statement."""
    return f"DELETE FROM proj_jobs WHERE job_id = {ANY_JSON_TEXTS % sql_literal(conn, json_texts(held))}"


def keyed_rows(rows: ChangedRows) -> list[tuple[str, str, list[str], list[dict[str, Any]]]]:
    """The allocation and node rows `rows` replaces, as (table, key column, keys, new rows); a key without
    a new row is a row gone from the state."""
    return [
        ("proj_allocations", "name", [k for k, _, _ in rows.allocations],
         [allocation_row(a, p) for _, a, p in rows.allocations if a is not None]),
        ("proj_nodes", "node_id", [k for k, _, _ in rows.nodes],
         [node_row(x, p) for _, x, p in rows.nodes if x is not None]),
    ]


def upsert_rows(conn: Connection, table: str, key: str, keys: list[str], rows: list[dict[str, Any]]) -> None:
    """One of `keyed_rows`' tables: delete the rows of `keys`, insert `rows`."""
    _upsert(conn, schema.metadata.tables[table], key, keys, rows)


def jobs_pieces(rows: ChangedRows) -> Iterator[bytes]:
    """PostgreSQL: the job rows of `rows` as pieces of COPY text (compiled, ADR 0022), built one at a time."""
    jobs = rows.jobs
    return (copytext.jobs_data(jobs[i:i + COPY_CHUNK_ROWS]) for i in chunks(len(jobs)))


def write_rows(conn: Connection, rows: ChangedRows, jobs_deleted: bool = False) -> None:
    """Replace the rows `rows` names by their captured values (a row gone from the state is deleted): one
    array DELETE and one COPY per table. `jobs_deleted`: the caller ran `jobs_delete_sql` already."""
    for table, key, keys, new in keyed_rows(rows):
        if keys:
            upsert_rows(conn, table, key, keys, new)
    if conn.dialect.name == "postgresql":
        if not jobs_deleted:
            delete = jobs_delete_sql(conn, rows)
            if delete:
                conn.connection.driver_connection.execute(delete)  # type: ignore[union-attr]
        copy_data(conn, "proj_jobs", JOB_COLUMNS, jobs_pieces(rows))
        return
    job_keys = [k for k, _, _ in rows.jobs]
    _upsert(conn, schema.proj_jobs, "job_id", job_keys, [job_row(j, p) for _, j, p in rows.jobs if j is not None])


def write(conn: Connection, proj: Projector, changed: Iterable[tuple[str, str]]) -> None:
    """Write the rows `changed` as they are in `proj` (a row gone from the state is deleted)."""
    write_rows(conn, capture(proj, changed))


JOB_COLUMNS = copytext.JOB_COLUMNS  # the table's columns in order (tests/property/test_copytext.py)


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
        # a JSON column's None is SQL NULL (`JSON(none_as_null=True)`), as `copytext` writes it
        copy_rows(conn, table.name, cols, ([dumps(r[c]) if c in json_cols and r[c] is not None else r[c]
                                            for c in cols] for r in rows))
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
