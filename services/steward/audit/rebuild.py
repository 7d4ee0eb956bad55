"""`steward audit rebuild`: fold the whole log into fresh tables and prove they equal the live
projections (per-table checksums)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select

from steward.audit.snapshots import events_for_fold
from steward.store import projections, schema
from steward.store.eventstore import EventStore, gc_paused, row_to_recorded
from steward.store.projections import Projector


def rebuild(store: EventStore, replace: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    proj = Projector()
    with gc_paused():
        for position, ev, at, h in events_for_fold(store, 0):
            proj.apply(ev, at, position, h)
    folded = time.perf_counter()
    with store.engine.connect() as conn:
        if conn.dialect.name == "postgresql":  # the tail and the live tables from one snapshot
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        conn.begin()
        tail = conn.execute(select(schema.events).where(schema.events.c.position > proj.position)
                            .order_by(schema.events.c.position)).all()
        for rec in map(row_to_recorded, tail):
            proj.apply(rec.as_event(), rec.recorded_at, rec.position, rec.hash)
        with gc_paused():
            rows = proj.rows()
        tables = projections.compare(conn, rows)
        if replace and not all(t["equal"] for t in tables.values()):
            projections.replace_live(conn, rows)
        conn.commit()
    done = time.perf_counter()
    return {"ok": all(t["equal"] for t in tables.values()), "events": proj.position, "head": proj.position,
            "tables": tables, "replaced": replace and not all(t["equal"] for t in tables.values()),
            "fold_seconds": round(folded - started, 3), "seconds": round(done - started, 3)}
