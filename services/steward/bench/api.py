"""`steward bench api --clients 64 --seconds 20 --json`: the manager dashboard query through the real API
(uvicorn, Starlette, the guard, Strawberry with every protection on) against a bare Starlette endpoint
serving the same data from the same projections (same authentication, same read model), in one run.

The store is a fresh SQLite file seeded with the reference tree (../shared/data/scenarios/philly.yaml when
present), 40 nodes of 8 GPUs and `--jobs` jobs (finished in the window, running, waiting). The server runs
in its own process; the load comes from `--clients` keep-alive connections in this process, each sending
its next request as soon as the answer arrives (closed loop), for `--seconds` per endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from steward.api.app import authenticate, build_app
from steward.api.commands import LocalGateway
from steward.api.explain import derive_pending
from steward.api.settings import ApiSettings
from steward.auth.access import Access
from steward.auth.tokens import TokenError, TokenStore
from steward.bus.envelope import command_envelope
from steward.cli.scenario_file import load_yaml, tree_commands
from steward.config import REPO_ROOT, Settings
from steward.domain.commands import PlaceJob, RegisterNode, ReportJobExited, ReportJobStarted, SetAllocations, SubmitJob
from steward.domain.state import JOB_STATES
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

DASHBOARD = """query Dashboard {
  me { subject role scopes }
  allocations { name parent depth share entitlement entitledInWindow usageInWindow owed delivered
    deliveredOverOwed burn runningGpus waitingJobs waitingGpus }
  queue(first: 20) { waiting waitingGpus entries { position mine positionInProject reason blockingGpus
    job { id project gpus state submittedAt } } }
  jobCounts { state count }
}"""

FALLBACK_TREE: dict[str, dict[str, float]] = {
    "cluster": {"research": 0.5, "product": 0.3, "platform": 0.2},
    "research": {"r1": 0.45, "r2": 0.30, "r3": 0.15, "r4": 0.10},
    "product": {"p1": 0.40, "p2": 0.35, "p3": 0.25},
    "platform": {"f1": 0.35, "f2": 0.35, "f3": 0.20, "f4": 0.10},
}


# -- the server side ---------------------------------------------------------------------------------


def _tree() -> dict[str, dict[str, float]]:
    path = REPO_ROOT.parent / "shared" / "data" / "scenarios" / "philly.yaml"
    try:
        return {c.parent: c.shares for c in tree_commands(load_yaml(path), "bench")}
    except Exception:
        return FALLBACK_TREE


def seed(url: str, jobs: int, now: float) -> str:
    """Fill a fresh store; returns the dashboard's manager scope (the first division)."""
    upgrade(url)
    store = EventStore.from_url(url)
    tree = _tree()
    clock = [now - 3 * 24 * 3600.0]
    ledger = Ledger(store, consumer_name="bench", clock=lambda: clock[0])

    def run(cmds: list[Any]) -> None:
        for i in range(0, len(cmds), 500):
            ledger.process([("bench", command_envelope(c, actor="bench", role="admin").encode())
                            for c in cmds[i:i + 500]], {})

    run([SetAllocations(p, s, "bench") for p, s in tree.items()])
    run([RegisterNode(f"node-{i:02d}", 8, "V100", [f"block-{i // 8}", f"node-{i:02d}"]) for i in range(40)])
    projects = [c for shares in tree.values() for c in shares if c not in tree]
    rng = random.Random(7)
    free = {f"node-{i:02d}": list(range(8)) for i in range(40)}
    subs, places, starts, exits = [], [], [], []
    for k in range(jobs):
        gpus = rng.choice((1, 1, 2, 4, 8))
        job_id = f"b-{k:06d}"
        subs.append(SubmitJob(job_id, rng.choice(projects), gpus, rng.choice((0.0, 600.0, 3600.0)), ["true"]))
        node = next((n for n, g in free.items() if len(g) >= gpus), None)
        if node is not None and k % 3 != 2:
            gpu_ids, free[node] = free[node][:gpus], free[node][gpus:]
            places.append(PlaceJob(job_id, {node: gpu_ids}, True, {"policy": "bench"}))
            starts.append(ReportJobStarted(job_id, 1, 1000 + k))
            if k % 3 == 0:  # finished: its GPUs come back
                exits.append(ReportJobExited(job_id, 1, 0))
                free[node] = sorted(free[node] + gpu_ids)
    for batch in (subs, places, starts):
        run(batch)
        clock[0] += 3600.0
    run(exits)
    store.engine.dispose()
    return next(iter(tree["cluster"]))


def serve(url: str, port: int, token_file: Path, scope: str, cache: bool) -> None:
    """The API as `steward up` builds it (Kafka replaced by the in-process ledger), plus /bare/dashboard."""
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    store = EventStore.from_url(url)
    token, _ = TokenStore(store).create(role="manager", scopes=[scope], subject="bench-manager", created_by="bench")
    token_file.write_text(token)
    run_dir = token_file.parent
    api = ApiSettings(run_dir=run_dir, api_rate_per_s=1_000_000, api_rate_burst=1_000_000, api_result_cache=cache)
    built = build_app(Settings(run_dir=run_dir, store_url=url), api, store=store, gateway=LocalGateway(store))
    services = built.services

    async def bare(request: Request) -> JSONResponse:
        header = request.headers.get("authorization", "")
        try:
            principal = await authenticate(services.auth, header.removeprefix("Bearer ").strip())
        except TokenError:
            return JSONResponse({"error": "unauthenticated"}, status_code=401)

        def read() -> dict[str, Any]:
            snap = services.read.view()
            access = Access.of(principal, snap.parents)
            figs = services.read.figures(7 * 24 * 3600.0)
            entries = []
            for item in snap.queue()[:20]:
                j = item.job
                if access.sees(j["project"]):
                    why = derive_pending(j, snap, item)
                    entries.append({"position": item.position, "mine": True,
                                    "positionInProject": item.position_in_project, "reason": why.reason,
                                    "blockingGpus": why.blocking_gpus,
                                    "job": {"id": j["job_id"], "project": j["project"], "gpus": j["gpus"],
                                            "state": j["state"], "submittedAt": j["submitted_at"]}})
                else:
                    entries.append({"position": item.position, "mine": False, "positionInProject": None,
                                    "reason": None, "blockingGpus": None, "job": None})
            counts = services.read.job_counts()
            return {
                "me": {"subject": principal.subject, "role": principal.role.value, "scopes": list(principal.scopes)},
                "allocations": [
                    {"name": f.name, "parent": f.parent, "depth": f.depth, "share": f.share,
                     "entitlement": f.entitlement, "entitledInWindow": f.entitled_in_window,
                     "usageInWindow": f.usage_in_window, "owed": f.owed, "delivered": f.delivered,
                     "deliveredOverOwed": f.delivered_over_owed, "burn": f.burn, "runningGpus": f.running_gpus,
                     "waitingJobs": f.waiting_jobs, "waitingGpus": f.waiting_gpus}
                    for f in figs if access.sees(f.name)],
                "queue": {"waiting": len(snap.queue()),
                          "waitingGpus": sum(int(i.job["gpus"]) for i in snap.queue()), "entries": entries},
                "jobCounts": [{"state": s, "count": counts.get(s, 0)} for s in JOB_STATES],
            }

        return JSONResponse({"data": await asyncio.to_thread(read)})

    built.app.router.routes.insert(0, Route("/bare/dashboard", bare, methods=["POST"]))
    uvicorn.run(built.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


# -- the load side -----------------------------------------------------------------------------------


def _request(path: str, body: bytes, token: str, port: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> int:
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        await reader.readexactly(length)
    return status


async def load(port: int, path: str, body: bytes, token: str, clients: int, seconds: float) -> dict[str, Any]:
    raw = _request(path, body, token, port)
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                status = await _one(reader, writer, raw)
                latencies.append(time.perf_counter() - t0)
                if status != 200:
                    errors += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else 0.0

    return {"requests": len(latencies), "requests_per_s": round(len(latencies) / elapsed, 1),
            "latency_ms_p50": pct(0.50), "latency_ms_p99": pct(0.99),
            "latency_ms_mean": round(statistics.fmean(latencies) * 1000, 2) if latencies else 0.0, "errors": errors}


def _wait_for(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench api: the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("bench api: the server did not start")


@contextlib.contextmanager
def _server(tmp: str, url: str, scope: str, cache: str) -> Iterator[tuple[int, str]]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    token_file = Path(tmp) / f"token-{cache}"
    env = os.environ | {"STEWARD_RUN_DIR": tmp, "STEWARD_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "steward.bench.api", "--serve", url, str(port), str(token_file),
                             scope, cache], env=env)
    try:
        _wait_for(port, proc)
        while not token_file.exists():
            time.sleep(0.05)
        yield port, token_file.read_text().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _phase(port: int, path: str, body: bytes, token: str, args: argparse.Namespace) -> dict[str, Any]:
    warm = asyncio.run(load(port, path, body, token, 4, 1.0))
    if warm["errors"]:
        raise SystemExit(f"bench api: {path} failed during warm-up ({warm})")
    return asyncio.run(load(port, path, body, token, args.clients, args.seconds))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="steward bench api", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0, help="per endpoint")
    ap.add_argument("--jobs", type=int, default=5000, help="jobs in the seeded store")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    ap.add_argument("--serve", nargs=5, metavar=("URL", "PORT", "TOKEN_FILE", "SCOPE", "CACHE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        url, port, token_file, scope, cache = args.serve
        serve(url, int(port), Path(token_file), scope, cache == "cache")
        return 0
    if args.clients < 1 or args.seconds <= 0 or args.jobs < 0:
        ap.error("--clients and --seconds must be positive, --jobs non-negative")
    with tempfile.TemporaryDirectory(prefix="steward-bench-api-") as tmp:
        url = f"sqlite:///{tmp}/steward.db"
        t0 = time.perf_counter()
        scope = seed(url, args.jobs, time.time())
        seeded_s = time.perf_counter() - t0
        body = json.dumps({"query": DASHBOARD, "variables": {}}).encode()
        with _server(tmp, url, scope, "cache") as (port, token):
            gql = _phase(port, "/graphql", body, token, args)
            bare = _phase(port, "/bare/dashboard", b"{}", token, args)
        with _server(tmp, url, scope, "nocache") as (port, token):
            uncached = _phase(port, "/graphql", body, token, args)
    result = {
        "benchmark": "api", "query": "manager dashboard", "clients": args.clients, "seconds": args.seconds,
        "jobs": args.jobs, "seed_s": round(seeded_s, 2),
        "requests_per_s": gql["requests_per_s"], "latency_ms_p50": gql["latency_ms_p50"],
        "latency_ms_p99": gql["latency_ms_p99"], "latency_ms_mean": gql["latency_ms_mean"],
        "errors": gql["errors"], "requests": gql["requests"],
        "bare_requests_per_s": bare["requests_per_s"], "bare_latency_ms_p50": bare["latency_ms_p50"],
        "bare_latency_ms_p99": bare["latency_ms_p99"], "bare_errors": bare["errors"],
        "ratio_to_bare": round(gql["requests_per_s"] / bare["requests_per_s"], 3) if bare["requests_per_s"] else None,
        "uncached_requests_per_s": uncached["requests_per_s"], "uncached_latency_ms_p50": uncached["latency_ms_p50"],
        "uncached_latency_ms_p99": uncached["latency_ms_p99"], "uncached_errors": uncached["errors"],
        "uncached_ratio_to_bare": round(uncached["requests_per_s"] / bare["requests_per_s"], 3)
        if bare["requests_per_s"] else None,
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "targets": {"latency_ms_p99": 50, "ratio_to_bare": 0.5},
    }
    result["meets_targets"] = bool(result["latency_ms_p99"] <= 50 and (result["ratio_to_bare"] or 0) >= 0.5)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
