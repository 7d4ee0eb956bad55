"""API replicas on the real stack (issue 22, ADR 0047): two more API processes beside the stack's, on the same
PostgreSQL store and Kafka, share one rate limit per token; a caller reads their own write on another replica
when they send the position their mutation answered with; replicas started as `steward up --api-replicas`
starts them share one address (SO_REUSEPORT)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import REPO, TEST_ENV, steward

pytestmark = pytest.mark.integration

BASE_PORT = int(TEST_ENV["STEWARD_API_PORT"])
SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"


@contextmanager
def api_process(port: int, name: str, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """`steward run <name>` (the API) on `port`, with the stack's store and Kafka, until the block ends."""
    from steward.config import Settings

    app_url, _owner = Settings().postgres_urls()
    log = Path(TEST_ENV["STEWARD_RUN_DIR"]) / "logs" / f"test-{name}-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    full = os.environ | {"STEWARD_API_PORT": str(port), "STEWARD_STORE_URL": app_url, "STEWARD_COMPONENT": "api",
                         "STEWARD_METRICS_PORT": "off"} | env
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "steward.cli.main", "run", name], env=full, stdout=out,
                                stderr=out, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the API on {port} exited; see {log}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the API on {port} did not start; see {log}"
            time.sleep(0.3)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def mint(role: str, *scopes: str) -> str:
    from steward.auth.tokens import TokenStore
    from steward.config import Settings
    from steward.store.eventstore import EventStore

    store = EventStore.from_url(Settings().postgres_urls()[0])
    try:
        return TokenStore(store).create(role=role, scopes=list(scopes), subject=f"replicas-{role}",
                                        created_by="test")[0]
    finally:
        store.engine.dispose()


def post(port: int, token: str, query: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/graphql", json={"query": query},
                      headers={"Authorization": f"Bearer {token}"} | (headers or {}), timeout=60)


def test_two_replicas_share_one_rate_limit(stack: dict[str, object]) -> None:
    """A token limited to a burst of 10 and 0.2/s is served about 10 times in all, not 10 by each replica;
    with limits per replica (`STEWARD_API_RATE_SHARED=0`) the same requests are served 20 times."""
    limits = {"STEWARD_API_RATE_PER_S": "0.2", "STEWARD_API_RATE_BURST": "10", "STEWARD_API_RATE_LEASE": "2"}
    served = {True: 0, False: 0}
    for shared in (True, False):
        ports = (BASE_PORT + 1, BASE_PORT + 2)
        env = limits | {"STEWARD_API_RATE_SHARED": "1" if shared else "0"}
        with api_process(ports[0], "api", **env), api_process(ports[1], "api", **env):
            token = mint("admin")  # a bucket of its own
            started = time.monotonic()
            codes = [post(ports[i % 2], token, "{ me { subject } }").status_code for i in range(30)]
            elapsed = time.monotonic() - started
        assert set(codes) <= {200, 429}, codes
        served[shared] = codes.count(200)
        if shared:
            # never more than the shared bucket holds, whichever replica answers; leases lost on one
            # replica make it stricter by at most one lease per replica
            assert 10 - 2 * 2 <= served[shared] <= 10 + elapsed * 0.2, (codes, elapsed)
    assert served[False] >= 20 > served[True]


def test_a_caller_reads_their_write_on_another_replica(stack: dict[str, object]) -> None:
    """Replica B follows the log only every 30 s here, so without the position it still answers from before
    the submission; with `X-Steward-Position` from the mutation's answer it reads the job."""
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    token = mint("researcher", "ee9e8c")
    slow = {"STEWARD_API_FEED_POLL_S": "30"}
    a, b = BASE_PORT + 3, BASE_PORT + 4
    with api_process(a, "api"), api_process(b, "api", **slow):
        resp = post(a, token, """mutation { submitJob(input: {project: "ee9e8c", gpus: 1, minRuntimeS: 0,
            command: ["true"]}) { __typename ... on JobAccepted { job { id } } ... on Rejected { code reason } } }""")
        body = resp.json()
        assert body["data"]["submitJob"]["__typename"] == "JobAccepted", body
        job = body["data"]["submitJob"]["job"]["id"]
        position = resp.headers["X-Steward-Position"]
        assert int(position) > 0
        query = f'{{ job(id: "{job}") {{ id }} }}'
        # the replica that took the write reads it at once (its read model waited for the position)
        assert post(a, token, query).json()["data"]["job"] == {"id": job}
        # the other replica, without the position: its feed has not moved yet
        assert post(b, token, query).json()["data"]["job"] is None
        # with it: caught up before answering
        assert post(b, token, query, {"X-Steward-Position": position}).json()["data"]["job"] == {"id": job}


def test_replicas_share_one_address(stack: dict[str, object]) -> None:
    """Two API processes started as `steward up --api-replicas 2` starts them (STEWARD_API_REPLICAS=2) bind
    the same port; new connections reach both."""
    port = BASE_PORT + 5
    with api_process(port, "api", STEWARD_API_REPLICAS="2") as one, \
            api_process(port, "api-2", STEWARD_API_REPLICAS="2") as two:
        # the second may still be starting when the first answers its health check: new connections until
        # both have answered (each request is a new connection), for a minute at most
        pids: set[int] = set()
        deadline = time.monotonic() + 60
        while pids != {one.pid, two.pid} and time.monotonic() < deadline:
            pids.add(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["pid"])
            assert one.poll() is None and two.poll() is None
    assert pids == {one.pid, two.pid}
