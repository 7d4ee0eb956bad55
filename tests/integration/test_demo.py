"""`make demo` on the real stack (Kafka, PostgreSQL, Temporal, ledger, scheduler, API, worker, executors):
the demo's set-up and replay driver run for a short slice of the Philly trace (2 trace hours at 120x, a
warm start that fills the cluster, two sessions capped at 30 trace minutes), and the log shows

- jobs placed on the simulated nodes and on the local node (real processes of the sample job), two clusters
  (the simulated one, V100, and `local`, A100) with each placement's routing reason, the local node agent
  serving the local node only;
- a preemption, with the evidence that justified it, answered by `whyPreempted`;
- a session that reached its cap, was stopped with a checkpoint, restored by the driver and started again.

Run with STEWARD_TEST_SLOT=<n>. The driver and the simulated executor are stopped afterwards, the demo's
jobs cancelled, the policy put back (the worker follows it) and the node agent serving every node placed with
it again, so later tests see the stack as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from steward.demo.__main__ import LOCAL_NODE, local_agent_serves, ready_local_node
from tests.integration.conftest import REPO, TEST_RUN_DIR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DEMO_ARGS = ["--hours", "2", "--speed", "120", "--sessions", "2", "--session-cap-hours", "0.5",
             "--restore-after-minutes", "10", "--wait", "180"]
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "RESTORED")


def _demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "steward.demo", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy(), cwd=REPO)
    assert proc.returncode == 0, f"demo {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


class Api:
    def __init__(self) -> None:
        from steward.cli.client import default_token
        from steward.config import Settings

        self.url = Settings().resolved_api_url
        self.headers = {"Authorization": f"Bearer {default_token()}"}

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        resp = httpx.post(self.url, json={"query": query, "variables": variables}, headers=self.headers, timeout=60)
        body = resp.json()
        assert not body.get("errors"), body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    def events(self, prefix: str, types: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        after = None
        while True:
            page = self("""query($after: String, $f: EventFilter!) { auditEvents(first: 500, after: $after, filter: $f)
                { edges { node { streamId type payload } } pageInfo { hasNextPage endCursor } } }""",
                        after=after, f={"streamPrefix": prefix, "types": types})["auditEvents"]
            out += [e["node"] for e in page["edges"]]
            if not page["pageInfo"]["hasNextPage"] or not page["edges"]:
                return out
            after = page["pageInfo"]["endCursor"]


@pytest.fixture(scope="module")
def demo(stack: dict[str, object]) -> Iterator[dict[str, Any]]:
    from steward.domain.policy_settings import PolicySettings
    from steward.infra.processes import Paths, stop_own

    for name in ("demo-driver", "sim-executor"):  # left by an earlier session on this slot
        stop_own(name, Paths(TEST_RUN_DIR))
    started = _demo(*DEMO_ARGS)
    config = json.loads((TEST_RUN_DIR / "demo" / "config.json").read_text())
    yield {"config": config, "stdout": started.stdout}
    paths = Paths(TEST_RUN_DIR)
    for name in ("demo-driver", "sim-executor"):
        stop_own(name, paths)
    api = Api()
    jobs = api("""{ jobs(first: 500, filter: {states: ["QUEUED", "PLACED", "RUNNING", "SUSPENDED"]})
        { edges { node { id } } } }""")["jobs"]["edges"]
    for edge in jobs:
        if edge["node"]["id"].startswith(config["tag"]):
            api("mutation($id: ID!) { cancelJob(id: $id, reason: \"demo test over\") { __typename } }",
                id=edge["node"]["id"])
    local_agent_serves(paths, "")  # later modules place on nodes of their own with this agent
    defaults = {k: v for k, v in PolicySettings().to_dict().items() if k in json.loads(
        (TEST_RUN_DIR / "demo" / "policy.json").read_text())}
    # the worker follows the recorded policy: putting it back puts its timings back (no restart)
    api("mutation($i: PolicyInput!) { setPolicy(input: $i) { __typename } }",
        i={"settings": defaults, "reason": "demo test over"})


def _wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_the_demo_prints_addresses_a_token_per_role_and_the_summary(demo: dict[str, Any]) -> None:
    out = demo["stdout"]
    assert "first useful screen" in out, out
    for line in ("UI:", "API (GraphQL):", "admin token:", "manager token:", "researcher token:", "auditor token:",
                 "owed GPU-h", "owed vs delivered over the", "occupancy:"):
        assert line in out, f"{line!r} missing from:\n{out}"
    tokens = json.loads((TEST_RUN_DIR / "demo" / "tokens.json").read_text())
    api = Api()
    for role, token in tokens.items():
        api.headers = {"Authorization": f"Bearer {token}"}
        assert api("{ me { role } }")["me"]["role"] == role


def test_jobs_are_placed_on_the_simulated_nodes_and_on_the_local_node(demo: dict[str, Any]) -> None:
    placed = Api().events(f"job-{demo['config']['tag']}-", ["JobPlaced"])
    nodes = {n for e in placed for n in e["payload"]["assignments"]}
    assert any(n.startswith("node0") for n in nodes), nodes
    assert "local-0" in nodes, nodes
    # the local node ran the sample job as a real process, with a log
    local = next(e["payload"]["job_id"] for e in placed if "local-0" in e["payload"]["assignments"])
    log = _wait_for(lambda: list((TEST_RUN_DIR / "executor" / "local" / "jobs" / local).glob("attempt-*.log")),
                    60, f"the log of {local} on the local node")
    assert log


def test_two_clusters_each_placement_with_its_routing_reason(demo: dict[str, Any]) -> None:
    """Issue 25: the simulated cluster (the default one, V100) and the local node's (`local`, A100); every
    placement says where it could run and why it went where it did; the local agent serves its node only."""
    from steward.demo.__main__ import DEMO_WEIGHTS, LOCAL_CLUSTER, LOCAL_MODEL, LOCAL_NODE
    from steward.infra.processes import Paths

    api = Api()
    nodes = {n["id"]: n for n in api("{ nodes { id cluster gpuModel executor } }")["nodes"]}
    assert (nodes[LOCAL_NODE]["cluster"], nodes[LOCAL_NODE]["gpuModel"]) == (LOCAL_CLUSTER, LOCAL_MODEL)
    weights = {m["model"]: m["weight"] for m in api("{ gpuModels { model weight } }")["gpuModels"]}
    assert weights == DEMO_WEIGHTS  # the two models' hours cost what the demo set (ADR 0057)
    assert {n["cluster"] for i, n in nodes.items() if i.startswith("node0")} == {"default"}
    spec = json.loads(Paths(TEST_RUN_DIR).spec_file("executor").read_text())
    assert spec["env"]["STEWARD_EXECUTOR_NODES"] == LOCAL_NODE
    placed = Api().events(f"job-{demo['config']['tag']}-", ["JobPlaced"])
    for e in placed:
        routing = e["payload"]["evidence"]["routing"]
        (node,) = e["payload"]["assignments"] if len(e["payload"]["assignments"]) == 1 else (None,)
        assert {c["cluster"] for c in routing["candidates"]} == {"default", LOCAL_CLUSTER}, routing
        if node is not None:
            assert routing["cluster"] == nodes[node]["cluster"], (node, routing)
        verb = f"moved from {routing['moved_from']} to" if "moved_from" in routing else "placed on"  # ADR 0068
        assert routing["reason"].startswith(f"{verb} {routing['cluster']} ("), routing  # ... would wait 0 s there
    assert {e["payload"]["evidence"]["routing"]["cluster"] for e in placed} == {"default", LOCAL_CLUSTER}


def test_a_preemption_happens_with_its_evidence(demo: dict[str, Any]) -> None:
    api = Api()
    prefix = f"job-{demo['config']['tag']}-"
    preempted = _wait_for(lambda: [e for e in api.events(prefix, ["JobPreempted"])
                                   if e["payload"]["reason"] != "session_cap"], 240, "a preemption")
    job = preempted[0]["payload"]["job_id"]
    why = api("""query($j: ID!) { whyPreempted(job: $j) { reason text evidence } }""", j=job)["whyPreempted"]
    assert why is not None and why["reason"] == preempted[0]["payload"]["reason"], why
    assert why["text"] and why["evidence"], why


def test_a_session_reaches_its_cap_and_is_restored_by_the_driver(demo: dict[str, Any]) -> None:
    api = Api()
    tag = demo["config"]["tag"]
    first = f"{tag}-session-1"
    restored = _wait_for(lambda: api.events(f"job-{first}", ["SessionRestored"]), 240, f"{first} restored")
    types = [e["type"] for e in api.events(f"job-{first}", ["SessionCapReached", "JobPreempted", "SessionWarned"])]
    assert "SessionCapReached" in types and "JobPreempted" in types, types
    # the session was timed with the demo's recorded policy (warnings 1800 and 300 trace s / 120: the 15 s
    # one falls on the start of a 15 s session, the 2.5 s one remains), not the worker's default
    # environment (30 and 5 minutes: none inside the cap), though the demo no longer restarts the worker
    opened = api.events(f"job-{first}", ["SessionOpened"])[0]["payload"]
    before_cap = [round(opened["cap_at"] - w, 3) for w in opened["warnings_at"]]
    assert 2.5 in before_cap and max(before_cap) <= 15.0, opened
    # and the warning fires (for some session: on a loaded machine a 15 s session's timer may start late)
    _wait_for(lambda: api.events(f"job-{tag}-session", ["SessionWarned"]), 120, "a session warned before its cap")
    new = restored[0]["payload"]["new_job_id"]
    started = _wait_for(lambda: api.events(f"job-{new}", ["JobStarted"]), 120, f"{new} started")
    assert started
    submitted = api.events(f"job-{new}", ["JobSubmitted"])
    assert submitted[0]["payload"]["restored_from"] == first
    _wait_for(lambda: json.loads((TEST_RUN_DIR / "demo" / "status.json").read_text())["chains"][first]["restores"],
              30, "the driver's status to count the restore")  # written every 2 s


def test_the_next_demo_resumes_the_local_node_its_last_stop_drained(demo: dict[str, Any]) -> None:
    """`make down` drains the local node to cancel its jobs; registering it again keeps the drain (ADR 0082), so
    a second `make demo` found its A100 cluster draining and never placed there (seen on this machine's demo)."""
    api = Api()
    state = """query { nodes { id state } }"""
    api("mutation($id: String!) { drainNode(id: $id, reason: \"demo stopped\") { __typename } }", id=LOCAL_NODE)
    assert {n["id"]: n["state"] for n in api(state)["nodes"]}[LOCAL_NODE] == "draining"
    said: list[str] = []
    ready_local_node(said.append)
    assert {n["id"]: n["state"] for n in api(state)["nodes"]}[LOCAL_NODE] == "ready" and said
    ready_local_node(said.append)  # ready already: nothing to do
    assert len(said) == 1
