"""CPU of PostgreSQL, the Kafka broker and the bench's own processes during `steward bench ingest`'s
throughput phase only (from the end of the backlog's production to the batch that completes the drain),
and PostgreSQL's CPU during the raw COPY reference. Prints JSON.

    PYTHONPATH=services:workflows .venv/bin/python bench/server_cpu.py --pg-pid P --broker-pid B \
        [--events 40000] [--references] [--statements]

--pg-pid is the postmaster (its live children's utime+stime plus its own and its reaped children's),
--broker-pid the broker JVM (all threads). --statements resets pg_stat_statements at the drain's start
and prints calls, time and rows per statement at its end (needs the extension preloaded; it costs CPU,
so take the CPU figures from runs without it). Uses the same Settings (env) as the bench.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steward.bench import ingest
from steward.config import Settings

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2:].split()


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, ValueError):
                continue
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` (with its reaped children) and of its live children (with theirs)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            f = _stat(p)
        except OSError:
            continue
        total += sum(int(x) for x in f[11:15])  # utime stime cutime cstime
    return total / TICK


def snapshot(pg: int, broker: int) -> dict[str, float]:
    return {"pg": tree_cpu(pg), "broker": tree_cpu(broker), "bench": tree_cpu(os.getpid()),
            "wall": time.perf_counter()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-pid", type=int, required=True)
    parser.add_argument("--broker-pid", type=int, required=True)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--references", action="store_true", help="also the COPY reference (and eventsourcing)")
    parser.add_argument("--idle", type=float, default=0.0, help="then sample the idle servers this long (s)")
    parser.add_argument("--sql", action="append", default=[],
                        help="run this as the superuser in the bench database before the drain (a server-side variant)")
    parser.add_argument("--statements", action="store_true", help="pg_stat_statements over the drain")
    args = parser.parse_args()
    for pid in (args.pg_pid, args.broker_pid):
        if not Path(f"/proc/{pid}/stat").exists():
            sys.stderr.write(f"server_cpu: no process {pid}\n")
            return 2
    marks: dict[str, dict[str, float]] = {}
    settings = Settings()
    stmt_rows: list[dict[str, Any]] = []

    def statements(reset: bool) -> None:
        # as the superuser over the socket (infra/postgres.sh psql): the extension lives in database postgres
        psql = ["bash", str(Path(__file__).resolve().parents[1] / "infra" / "postgres.sh"), "psql", "-AtF", "\t"]
        if reset:
            subprocess.run([*psql, "-c", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
                            "-c", "SELECT pg_stat_statements_reset()",
                            "-c", "SELECT pg_stat_reset_shared('wal')"], check=True, capture_output=True)
            return
        db = os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench")
        out = subprocess.run([*psql, "-c",
                              "SELECT calls, total_exec_time, rows, wal_bytes, regexp_replace(query, '\\s+', ' ', 'g') "
                              "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
                              f"'{db}') ORDER BY total_exec_time DESC LIMIT 25"],
                             check=True, capture_output=True, text=True).stdout
        walstat = subprocess.run([*psql, "-c", "SELECT wal_records, wal_fpi, wal_bytes, wal_sync FROM pg_stat_wal"],
                             check=True, capture_output=True, text=True).stdout.split()
        stmt_rows.append({"wal_records": int(walstat[0]), "wal_fpi": int(walstat[1]), "wal_bytes": int(walstat[2]),
                          "wal_sync": int(walstat[3])})
        for line in out.splitlines():
            calls, ms, rows, wal, query = line.split("\t", 4)
            stmt_rows.append({"calls": int(calls), "ms": round(float(ms), 1), "rows": int(rows),
                              "wal_bytes": int(wal), "query": query[:160]})

    real_produce = ingest.produce
    real_observer = ingest.batch_observer
    real_copy = ingest.copy_reference

    def produce(*a: Any, **k: Any) -> None:
        real_produce(*a, **k)
        if "drain_start" not in marks:
            for sql in args.sql:
                db = os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench")
                subprocess.run(["bash", str(Path(__file__).resolve().parents[1] / "infra" / "postgres.sh"), "psql",
                                "-d", db, "-v", "ON_ERROR_STOP=1", "-c", sql], check=True, capture_output=True)
            if args.statements:
                statements(reset=True)
            marks["drain_start"] = snapshot(args.pg_pid, args.broker_pid)

    def observer(commits: list[tuple[float, int]], latencies: list[float]) -> Callable[[Any], None]:
        inner = real_observer(commits, latencies)
        seen = [0]

        def on_batch(recorded: Any) -> None:
            inner(recorded)
            if not seen[0]:
                marks["first_batch"] = snapshot(args.pg_pid, args.broker_pid)
                marks["first_batch"]["events"] = len(recorded)
            seen[0] += len(recorded)
            if seen[0] >= args.events and "drain_end" not in marks:
                marks["drain_end"] = snapshot(args.pg_pid, args.broker_pid)

        return on_batch

    def copy_reference(owner_url: str, rows: list[tuple[Any, ...]]) -> float:
        marks["copy_start"] = snapshot(args.pg_pid, args.broker_pid)
        rate = float(real_copy(owner_url, rows))
        marks["copy_end"] = snapshot(args.pg_pid, args.broker_pid)
        return rate

    ingest.produce = produce
    ingest.batch_observer = observer
    ingest.copy_reference = copy_reference
    try:
        result = ingest.run(args.events, 0, None, args.references, settings)
    except Exception as err:  # a variant may break the bench's read-back after the drain: keep the drain's figures
        if "drain_end" not in marks:
            raise
        result = {"events_per_s": None, "load_average": [round(x, 2) for x in os.getloadavg()],
                  "after_drain_error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
    if args.statements:
        statements(reset=False)
    kept = ("events_per_s", "load_average", "after_drain_error")
    out: dict[str, Any] = {k: v for k, v in result.items() if k in kept}
    # the whole drain (with the ledger's start: connections, the consumer group's join), then from the
    # first committed batch on (the window the bench's events_per_s uses)
    b = marks["drain_end"]
    for name, a, n in (("drain", marks["drain_start"], args.events),
                       ("after_first_batch", marks["first_batch"], args.events - int(marks["first_batch"]["events"]))):
        wall = b["wall"] - a["wall"]
        per_1k = {k: round(1000 * (b[k] - a[k]) / n, 4) for k in ("pg", "broker", "bench")}
        out[name] = {"wall_s": round(wall, 3), "events": n, "events_per_s": round(n / wall, 1),
                     "cpu_s_per_1k_events": per_1k | {"total": round(sum(per_1k.values()), 4)},
                     "cores_busy": {k: round((b[k] - a[k]) / wall, 2) for k in ("pg", "broker", "bench")}}
    if args.idle:
        i0 = snapshot(args.pg_pid, args.broker_pid)
        time.sleep(args.idle)
        i1 = snapshot(args.pg_pid, args.broker_pid)
        out["idle_cores_busy"] = {k: round((i1[k] - i0[k]) / (i1["wall"] - i0["wall"]), 3) for k in ("pg", "broker")}
    if "copy_start" in marks:
        c0, c1 = marks["copy_start"], marks["copy_end"]
        out["copy_events_per_s"] = result["copy_events_per_s"]
        out["copy_pg_cpu_s_per_1k_events"] = round(1000 * (c1["pg"] - c0["pg"]) / args.events, 4)
        out["copy_bench_cpu_s_per_1k_events"] = round(1000 * (c1["bench"] - c0["bench"]) / args.events, 4)
    if stmt_rows:
        out["statements"] = stmt_rows
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
