"""`steward audit rebuild`: prove the live projections equal a fold of the log.

`--full` folds the whole log from the first event into fresh tables and compares per-table checksums
(PostgreSQL checksums both tables next to the data; ADR 0003, 8). When they are equal it records a
*snapshot check* (`snapshot_checks`): the snapshot of that state at its head (an existing one, compared
with the fold, or a new base) and, per table, the row count and the sum of the SHA-256 of every row's
text (an order-free checksum that can be updated row by row).

Without `--full` the rebuild starts from the newest checked snapshot (its digest still the recorded one,
its chain tied to the log), folds only the events after it, and proves equality with the live tables by
the same sums: live = checked - (the changed jobs' rows at the snapshot) + (their rows now), the changed
rows written by the same writer into fresh tables and hashed by the same query; the small tables
(allocations, nodes) are rebuilt whole and compared as `--full` does. When there is no check, or the
sums differ, it runs the full rebuild (which names the differences).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Table, func, select, text

from steward.audit.snapshots import events_for_fold, open_view, save_base
from steward.audit.timetravel import StateAt
from steward.domain.state import Job
from steward.store import projections, schema
from steward.store.eventstore import EventStore, gc_paused, row_to_recorded
from steward.store.projections import Projector, allocation_row, job_row, node_row
from steward.store.snapshotparts import BASE_FORMAT, DELTA_FORMAT, SnapshotView
from steward.store.verifier import canonical_text

Sum = tuple[int, tuple[int, int, int, int]]  # (rows, sums of the four 64-bit words of each row's SHA-256)

_SQL_SUM = """SELECT count(*), {words} FROM (SELECT sha256(convert_to(t::text, 'UTF8')) AS h FROM {table} t) s"""
_WORDS = ", ".join(f"coalesce(sum(('x' || encode(substr(h, {1 + 8 * i}, 8), 'hex'))::bit(64)::bigint), 0)::text"
                   for i in range(4))


def _words(digest: bytes) -> tuple[int, int, int, int]:
    w = [int.from_bytes(digest[8 * i:8 * i + 8], "big", signed=True) for i in range(4)]
    return w[0], w[1], w[2], w[3]


def _add(a: Sum, b: Sum, sign: int = 1) -> Sum:
    return a[0] + sign * b[0], (a[1][0] + sign * b[1][0], a[1][1] + sign * b[1][1], a[1][2] + sign * b[1][2],
                                a[1][3] + sign * b[1][3])


def _sum_of_rows(rows: Iterable[dict[str, Any]]) -> Sum:
    total: Sum = (0, (0, 0, 0, 0))
    for row in rows:
        total = _add(total, (1, _words(hashlib.sha256(canonical_text(row).encode()).digest())))
    return total


def table_sum(conn: Connection, table: Table) -> Sum:
    """The order-free checksum of a table: PostgreSQL hashes each row's text next to the data; elsewhere
    the rows are read back and hashed in canonical form."""
    if conn.dialect.name == "postgresql":
        row = conn.execute(text(_SQL_SUM.format(words=_WORDS, table=table.name))).one()
        n, w = int(row[0]), [int(str(x)) for x in row[1:]]
        return n, (w[0], w[1], w[2], w[3])
    return _sum_of_rows(projections.read_rows(conn, table))


def rows_sum(conn: Connection, table: Table, rows: list[dict[str, Any]], prefix: str) -> Sum:
    """The checksum `table_sum` gives these rows, written by the live tables' writer into a fresh table."""
    if conn.dialect.name != "postgresql":
        return _sum_of_rows(rows)
    fresh = projections.fresh_table(conn, table, prefix)
    projections.insert_rows(conn, fresh, rows)
    return table_sum(conn, fresh)


def _sum_text(s: Sum) -> str:
    return hashlib.sha256(repr(s).encode()).hexdigest()


def checksum_kind(conn: Connection) -> str:
    return "sum of row sha256, " + ("postgresql row text" if conn.dialect.name == "postgresql" else "canonical rows")


def latest_check(store: EventStore) -> dict[str, Any] | None:
    t = schema.snapshot_checks
    with store.engine.connect() as conn:
        row = conn.execute(select(t).where(t.c.format.in_((BASE_FORMAT, DELTA_FORMAT)))
                           .order_by(t.c.position.desc(), t.c.checked_at.desc()).limit(1)).first()
        conn.rollback()
    return dict(row._mapping) if row else None


def _same_state(view: SnapshotView, proj: Projector) -> bool:
    with gc_paused():
        other = view.projector()
    return (other.jobs == proj.jobs and other.positions == proj.positions and other.allocations == proj.allocations
            and other.nodes == proj.nodes and other.used == proj.used and other.policy == proj.policy
            and other.namespaces == proj.namespaces
            and other.head_hash == proj.head_hash)


def _record_check(store: EventStore, proj: Projector, sums: dict[str, Sum], kind: str) -> dict[str, Any]:
    """Record the snapshot of `proj` (the stored one at its position when it equals the fold, else a new
    base) as checked, with the sums of the tables the fold was proved equal to."""
    view = open_view(store, proj.position)
    if view is not None and view.position == proj.position:
        if not _same_state(view, proj):
            return {"recorded": False, "position": proj.position,
                    "detail": "the stored snapshot at the head differs from the fold (not used)"}
        ref, fmt = view.chain[-1].ref, BASE_FORMAT if view.chain[-1].kind == "base" else DELTA_FORMAT
    else:
        ref, fmt = save_base(store, proj), BASE_FORMAT
    tables = {name: {"rows": s[0], "sum": [str(w) for w in s[1]]} for name, s in sums.items()}
    t = schema.snapshot_checks
    with store.engine.begin() as conn:
        if conn.execute(select(t.c.position).where(t.c.position == ref[0], t.c.digest == ref[1])).first():
            return {"recorded": True, "position": ref[0], "digest": ref[1], "detail": "checked before"}
        conn.execute(t.insert().values(
            position=ref[0], digest=ref[1], format=fmt, checked_at=time.time(), checksum_of=kind, tables=tables))
    return {"recorded": True, "position": ref[0], "digest": ref[1]}


def _repeatable(conn: Connection) -> Connection:
    if conn.dialect.name == "postgresql":  # the tail and the live tables from one snapshot of the database
        return conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


def _live_sums(store: EventStore, snapshot_id: str) -> dict[str, Sum]:
    """The live tables' sums as another transaction sees them (PostgreSQL's exported snapshot)."""
    with store.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        conn.begin()
        conn.execute(text(f"SET TRANSACTION SNAPSHOT '{snapshot_id}'"))
        out = {t.name: table_sum(conn, t) for t in schema.PROJECTION_TABLES}
        conn.rollback()
    return out


def rebuild_full(store: EventStore, replace: bool = False, record: bool = True) -> dict[str, Any]:
    """Fold the whole log into fresh tables and compare checksums; when equal, record a snapshot check."""
    started = time.perf_counter()
    proj = Projector()
    pg = store.dialect == "postgresql"
    if not pg:  # SQLite: fold before the transaction (it takes the write lock, other readers would wait)
        with gc_paused():
            for position, ev, at, h in events_for_fold(store, 0):
                proj.apply(ev, at, position, h)
    folded = time.perf_counter()
    sums: dict[str, Sum] = {}
    with store.engine.connect() as conn, ThreadPoolExecutor(max_workers=1) as pool:
        conn = _repeatable(conn)
        conn.begin()
        live = None
        if pg:
            # The transaction fixes the head and the live tables; the live tables' sums (for the check) are
            # computed on its exported snapshot by the server while this process folds the log up to it.
            head = int(conn.execute(select(func.max(schema.events.c.position))).scalar() or 0)
            if record:
                live = pool.submit(_live_sums, store, str(conn.execute(text("SELECT pg_export_snapshot()")).scalar()))
            with gc_paused():
                for position, ev, at, h in events_for_fold(store, 0, head):
                    proj.apply(ev, at, position, h)
            folded = time.perf_counter()
        tail = conn.execute(select(schema.events).where(schema.events.c.position > proj.position)
                            .order_by(schema.events.c.position)).all()
        for rec in map(row_to_recorded, tail):
            proj.apply(rec.as_event(), rec.recorded_at, rec.position, rec.hash)
        with gc_paused():
            rows = proj.rows()
        tables = projections.compare(conn, rows)
        ok = all(t["equal"] for t in tables.values())
        kind = checksum_kind(conn)
        if ok and record:  # equal tables have equal sums: the live ones (PostgreSQL) or the rebuilt rows
            sums = live.result() if live is not None else {t: _sum_of_rows(r) for t, r in rows.items()}
        elif live is not None:
            live.result()
        if replace and not ok:
            projections.replace_live(conn, rows)
        conn.commit()
    checked = _record_check(store, proj, sums, kind) if ok and record and proj.position else None
    done = time.perf_counter()
    return {"ok": ok, "mode": "full", "events": proj.position, "head": proj.position, "tables": tables,
            "replaced": replace and not ok, "snapshot_check": checked,
            "fold_seconds": round(folded - started, 3), "seconds": round(done - started, 3)}


class _Tail:
    """The state from a snapshot view through the tail: job by job (`StateAt`) while every event is
    job-local, else a whole `Projector` folded again from the view; with the ids of the changed jobs."""

    def __init__(self, view: SnapshotView) -> None:
        self.view = view
        self.state: StateAt | Projector = StateAt(view)
        self.events: list[tuple[int, Any, float, str]] = []
        self.changed: set[str] = set()

    def fold(self, events: list[tuple[int, Any, float, str]]) -> None:
        if isinstance(self.state, StateAt) and not all(StateAt.folds(ev) for _, ev, _, _ in events):
            with gc_paused():
                self.state = self.view.projector()
            events, self.events = [*self.events, *events], []
        st = self.state
        if isinstance(st, StateAt):
            st.prefetch(ev.payload["job_id"] for _, ev, _, _ in events)
            for pos, ev, at, h in events:
                st.apply(ev, at, pos, h)
            self.changed.update(st.changed)
        else:
            with gc_paused():
                for pos, ev, at, h in events:
                    self.changed.update(k for t, k in st.apply(ev, at, pos, h) if t == "j")
        self.events += events
        self.view.lookup(sorted(self.changed))  # the rows at the snapshot, read while no transaction is open

    @property
    def head(self) -> int:
        return self.state.position

    def rows(self) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        """The changed jobs' rows now, and the small tables whole."""
        st, ids = self.state, sorted(self.changed)
        if isinstance(st, StateAt):
            new = [job_row(j, st.changed_at[k]) for k in ids if (j := st.job(k)) is not None]
        else:
            new = [job_row(st.jobs[k], st.positions[("j", k)]) for k in ids if k in st.jobs]
        pos = st.positions
        return new, {
            "proj_allocations": [allocation_row(a, pos[("a", n)]) for n, a in sorted(st.allocations.items())],
            "proj_nodes": [node_row(x, pos[("n", n)]) for n, x in sorted(st.nodes.items())],
        }


def _late(conn: Connection, after: int) -> list[tuple[int, Any, float, str]]:
    rows = conn.execute(select(schema.events).where(schema.events.c.position > after)
                        .order_by(schema.events.c.position)).all()
    return [(r.position, r.as_event(), r.recorded_at, r.hash) for r in map(row_to_recorded, rows)]


def _live(conn: Connection) -> tuple[Sum, dict[str, list[dict[str, Any]]]]:
    """The live jobs table's sum and the small tables' rows, as the transaction sees them."""
    return table_sum(conn, schema.proj_jobs), {
        t.name: projections.read_rows(conn, t) for t in (schema.proj_allocations, schema.proj_nodes)}


def rebuild_from_check(store: EventStore, check: dict[str, Any]) -> dict[str, Any] | None:
    """The rebuild from a checked snapshot (None when that snapshot can no longer be read as recorded)."""
    started = time.perf_counter()
    view = open_view(store, int(check["position"]))
    if view is None or view.chain[-1].ref != (int(check["position"]), str(check["digest"])):
        return None
    tail = _Tail(view)
    if store.dialect == "postgresql":
        # One REPEATABLE READ transaction fixes the head and the live tables; PostgreSQL sums the live jobs
        # table on it while this process folds the events up to that head (read on other connections:
        # events are immutable, so they are the ones the transaction sees).
        with store.engine.connect() as conn:
            conn = _repeatable(conn)
            conn.begin()
            head = int(conn.execute(select(func.max(schema.events.c.position))).scalar() or 0)
            with ThreadPoolExecutor(max_workers=1) as pool:
                live = pool.submit(_live, conn)
                tail.fold(list(events_for_fold(store, view.position, head)))
                folded = time.perf_counter()
                live_sum, live_small = live.result()
            report = _compare_from_check(conn, check, tail, live_sum, live_small)
            conn.rollback()
    else:
        tail.fold(list(events_for_fold(store, view.position)))
        folded = time.perf_counter()
        for _ in range(5):
            with store.engine.connect() as conn:
                conn.begin()
                late = _late(conn, tail.head)
                if late:  # fold outside the write lock (SQLite takes it at BEGIN), then look again
                    conn.rollback()
                    tail.fold(late)
                    continue
                report = _compare_from_check(conn, check, tail, *_live(conn))
                conn.rollback()
                break
        else:
            return None
    done = time.perf_counter()
    return report | {"from_snapshot": view.position, "tail_events": tail.head - view.position,
                     "snapshot_check": {"position": view.position, "digest": view.chain[-1].ref[1],
                                        "checked_at": check["checked_at"]},
                     "fold_seconds": round(folded - started, 3), "seconds": round(done - started, 3)}


def _compare_from_check(conn: Connection, check: dict[str, Any], tail: _Tail, live: Sum,
                        live_small: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    if checksum_kind(conn) != check["checksum_of"]:
        raise ValueError("the snapshot check was recorded on another kind of database")
    new_rows, small = tail.rows()
    old_rows = [job_row(Job(*r[:-1]), r[-1]) for r in tail.view.lookup(sorted(tail.changed)).values()
                if r is not None]
    tables: dict[str, dict[str, Any]] = {}
    for table in (schema.proj_allocations, schema.proj_nodes):
        fresh = projections.fresh_table(conn, table)
        projections.insert_rows(conn, fresh, small[table.name])
        live_sum = projections.checksum(live_small[table.name])
        fresh_sum = projections.checksum(projections.read_rows(conn, fresh))
        tables[table.name] = {"rows": len(small[table.name]), "live_rows": len(live_small[table.name]),
                              "checksum": fresh_sum, "live_checksum": live_sum, "equal": fresh_sum == live_sum,
                              "checksum_of": "canonical rows"}
    recorded = check["tables"]["proj_jobs"]
    w = [int(x) for x in recorded["sum"]]
    base: Sum = (int(recorded["rows"]), (w[0], w[1], w[2], w[3]))
    expected = _add(_add(base, rows_sum(conn, schema.proj_jobs, new_rows, "rebuild_new_")),
                    rows_sum(conn, schema.proj_jobs, old_rows, "rebuild_old_"), -1)
    tables["proj_jobs"] = {"rows": expected[0], "live_rows": live[0], "checksum": _sum_text(expected),
                           "live_checksum": _sum_text(live), "equal": expected == live,
                           "checksum_of": check["checksum_of"], "changed_rows": len(tail.changed)}
    return {"ok": all(t["equal"] for t in tables.values()), "mode": "snapshot", "events": tail.head,
            "head": tail.head, "tables": tables, "replaced": False}


def rebuild(store: EventStore, replace: bool = False, full: bool = False) -> dict[str, Any]:
    """From the newest checked snapshot when there is one (and neither `full` nor `replace` is asked),
    else from the first event; a snapshot rebuild that finds a difference is redone in full (which names
    the differing rows)."""
    if not full and not replace:
        check = latest_check(store)
        if check is not None:
            report = rebuild_from_check(store, check)
            if report is not None and report["ok"]:
                return report
            out = rebuild_full(store)
            out["snapshot_rebuild"] = "differs" if report is not None else "the checked snapshot is gone or changed"
            return out
    return rebuild_full(store, replace)
