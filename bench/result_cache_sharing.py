"""The API result cache's executions per request (a measuring script, not a `steward bench` command): the soak's
four reads (`steward bench soak`) from 50 admin tokens of their own, each thinking 0.1-0.3 s, while a thread
records a `SubmitJob` every 0.25 s (the log moves), against the test API server (tests/unit/api/harness.py) with
the cache keyed as it is (`shared`: by role and scopes unless the answer read who asks) or per principal
(`per-principal`, as before commit 4361a86), alternating in one process:

    PYTHONPATH=services:workflows:. .venv/bin/python bench/result_cache_sharing.py shared per-principal

Prints one JSON line per run: requests, executions (GraphQL executions counted by an extension), executions per
request, CPU seconds of the process per 1,000 requests (client, server and the recording thread together). The
latencies it prints are not the API's: the recording thread decides and writes in the same process and stalls
its event loop; `steward bench soak` measures those on the whole stack."""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from strawberry.extensions import SchemaExtension
from tests.unit.api.harness import record, serve

from steward.api.app import ResultCache
from steward.auth.principal import Principal
from steward.auth.tokens import TokenStore
from steward.bench.soak import READS
from steward.domain.commands import SubmitJob


class Executions(SchemaExtension):
    count = 0

    def on_execute(self) -> Iterator[None]:
        Executions.count += 1
        yield


def _per_principal(_cache: ResultCache, principal: Principal, _body: bytes) -> Any:
    return principal


def run(mode: str, seconds: float = 20.0, clients: int = 50) -> dict[str, Any]:
    keyed_by_view = ResultCache.who
    if mode == "per-principal":
        ResultCache.who = _per_principal
    try:
        with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), extra_extensions=[Executions]) as s:
            store = TokenStore(s.store)
            tokens = [store.create(role="admin", scopes=[], subject=f"c{i}", created_by="probe")[0]
                      for i in range(clients)]
            stop = time.monotonic() + seconds

            def move() -> None:
                k = 0
                while time.monotonic() < stop:
                    k += 1
                    record(s.store, [SubmitJob(f"m-{mode}-{k}", "a1", 1, 600, ["true"])], actor="alice")
                    time.sleep(0.25)

            mover = threading.Thread(target=move)
            mover.start()
            Executions.count = 0
            latencies: list[float] = []

            async def client(token: str, rng: random.Random) -> None:
                async with httpx.AsyncClient(timeout=30) as c:
                    while time.monotonic() < stop:
                        _, query = rng.choice(READS)
                        t0 = time.perf_counter()
                        r = await c.post(s.url, json={"query": query}, headers={"Authorization": f"Bearer {token}"})
                        latencies.append(time.perf_counter() - t0)
                        assert r.status_code == 200, r.text
                        await asyncio.sleep(rng.uniform(0.1, 0.3))

            async def everyone() -> None:
                await asyncio.gather(*(client(t, random.Random(i)) for i, t in enumerate(tokens)))

            cpu0 = time.process_time()
            asyncio.run(everyone())
            cpu = time.process_time() - cpu0
            mover.join()
            n = len(latencies)
            return {"mode": mode, "requests": n, "executions": Executions.count,
                    "executions_per_request": round(Executions.count / n, 3),
                    "process_cpu_s_per_1k_requests": round(cpu / n * 1000, 2)}
    finally:
        ResultCache.who = keyed_by_view


if __name__ == "__main__":
    for m in sys.argv[1:]:
        print(json.dumps(run(m)), flush=True)
