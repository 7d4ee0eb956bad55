"""A real client (httpx for queries and mutations, the `websockets` library for graphql-transport-ws) runs
the researcher and manager flows against the whole stack started as `steward up` starts it: API ->
Kafka -> ledger -> PostgreSQL -> scheduler -> Temporal -> executor."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.integration.conftest import steward

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"
PAYLOAD = "__typename ... on NotAuthorised { message } ... on Rejected { code reason } " \
          "... on InvalidInput { field message }"


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        resp = self.http.post(self.url, json={"query": query, "variables": variables})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert not body.get("errors"), body
        data: dict[str, Any] = body["data"]
        return data

    def subscribe(self, query: str, until: Any, timeout: float = 90, **variables: Any) -> list[dict[str, Any]]:
        ws_url = self.url.replace("http://", "ws://")
        seen: list[dict[str, Any]] = []
        with connect(ws_url, subprotocols=["graphql-transport-ws"], open_timeout=10,  # type: ignore[list-item]
                     max_queue=None) as ws:
            ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {self.token}"}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
            ws.send(json.dumps({"id": "s", "type": "subscribe", "payload": {"query": query, "variables": variables}}))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = json.loads(ws.recv(timeout=max(1.0, deadline - time.monotonic())))
                if msg["type"] == "ping":
                    ws.send(json.dumps({"type": "pong"}))
                    continue
                assert msg["type"] in ("next", "complete"), msg
                if msg["type"] == "complete":
                    break
                assert not msg["payload"].get("errors"), msg
                seen.append(msg["payload"]["data"])
                if until(msg["payload"]["data"]):
                    ws.send(json.dumps({"id": "s", "type": "complete"}))
                    break
        return seen


def mint(role: str, *scopes: str) -> str:
    args = ["token", "create", "--role", role, "--output", "json"]
    for s in scopes:
        args += ["--scope", s]
    out = json.loads(steward(*args).stdout)
    assert out["via"] == "api"  # the run folder's admin token was used
    token: str = out["token"]
    return token


@pytest.fixture(scope="module")
def clients(stack: dict[str, object]) -> dict[str, Client]:
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    url = str(stack["api"])
    return {"researcher": Client(url, mint("researcher", "ee9e8c")),
            "other": Client(url, mint("researcher", "b436b2")),
            "manager": Client(url, mint("manager", "research")),
            "auditor": Client(url, mint("auditor"))}


JOB = "id project state gpus attempt assignments"


def test_researcher_flow(clients: dict[str, Client]) -> None:
    me = clients["researcher"]
    assert me("{ me { role scopes } }")["me"] == {"role": "researcher", "scopes": ["ee9e8c"]}
    res = me(f"""mutation {{ submitJob(input: {{project: "ee9e8c", gpus: 2, minRuntimeS: 60,
        command: ["bash", "-c", "sleep 1"]}}) {{ {PAYLOAD} ... on JobAccepted {{ job {{ {JOB} }} }} }} }}""")
    job = res["submitJob"]["job"]
    states = me.subscribe(f"subscription($id: ID!) {{ jobProgress(id: $id) {{ {JOB} }} }}",
                          until=lambda d: d["jobProgress"]["state"] in ("COMPLETED", "FAILED"), id=job["id"])
    seen = [s["jobProgress"]["state"] for s in states]
    assert seen[-1] == "COMPLETED", seen
    detail = me("""query($id: ID!) { job(id: $id) { state events { type } decisions { type evidence } } }""",
                id=job["id"])["job"]
    assert [e["type"] for e in detail["events"]][:2] == ["JobSubmitted", "JobPlaced"]
    assert any(d["type"] == "JobPlaced" and d["evidence"] for d in detail["decisions"])

    # a job larger than the cluster could ever place is refused at submit, naming the largest placement
    huge = me(f"""mutation {{ submitJob(input: {{project: "ee9e8c", gpus: 1000, minRuntimeS: 0,
        command: ["true"]}}) {{ {PAYLOAD} }} }}""")["submitJob"]
    assert huge["__typename"] == "InvalidInput"
    assert "the largest placement this cluster could ever give is 320 GPUs (all 40 registered nodes)" in huge["message"]
    # one the registered nodes could hold, but not those taking work now (one drains), waits and says why
    steward("node", "drain", "node039", "--reason", "api flows: a job too large for the nodes taking work")
    try:
        big = me(f"""mutation {{ submitJob(input: {{project: "ee9e8c", gpus: 320, minRuntimeS: 0,
            command: ["true"]}}) {{ {PAYLOAD} ... on JobAccepted {{ job {{ id }} }} }} }}""")["submitJob"]["job"]["id"]
        researcher_waits_for(me, big, clients)
    finally:
        steward("node", "resume", "node039", "--reason", "api flows: done")
    mine_only = me("{ jobs(first: 500) { edges { node { project } } } }")["jobs"]["edges"]
    assert mine_only and {e["node"]["project"] for e in mine_only} == {"ee9e8c"}


def researcher_waits_for(me: Client, big: str, clients: dict[str, Client]) -> None:
    """A job that cannot fit the nodes taking work says why; another tenant sees its position only."""
    why = me("query($id: ID!) { whyPending(job: $id) { reason text blockingGpus position evidence } }",
             id=big)["whyPending"]
    assert why["reason"] == "too_large" and why["blockingGpus"] == 320 - 312 and "never fit" in why["text"]
    queue = me("{ queue { waiting entries { position mine job { id } reason } } }")["queue"]
    assert any(e["mine"] and e["job"]["id"] == big and e["reason"] == "too_large" for e in queue["entries"])
    # another tenant sees the position, not the job
    theirs = clients["other"]("{ queue { entries { position mine job { id } } } }")["queue"]["entries"]
    mine = next(e for e in queue["entries"] if e["job"] and e["job"]["id"] == big)
    assert {"position": mine["position"], "mine": False, "job": None} in theirs
    assert clients["other"]("query($id: ID!) { job(id: $id) { id } }", id=big)["job"] is None
    refused = clients["other"](f'mutation($id: ID!) {{ cancelJob(id: $id) {{ {PAYLOAD} }} }}', id=big)
    assert refused["cancelJob"]["__typename"] == "NotAuthorised"
    done = me(f'mutation($id: ID!) {{ cancelJob(id: $id, reason: "too big") {{ {PAYLOAD} '
              f'... on JobCancelled {{ job {{ state }} }} }} }}', id=big)
    assert done["cancelJob"]["job"]["state"] == "CANCELLED"


def test_manager_flow(clients: dict[str, Client]) -> None:
    m = clients["manager"]
    tree = m("{ allocations { name parent depth entitlement owed delivered burn } }")["allocations"]
    assert {a["name"] for a in tree} == {"research", "ee9e8c", "7f04ca", "103959", "e13805"}
    assert next(a for a in tree if a["name"] == "ee9e8c")["entitlement"] == pytest.approx(0.5 * 0.45)
    shares = [{"child": "ee9e8c", "share": 0.45}, {"child": "7f04ca", "share": 0.30}]
    ok = m(f"""mutation($s: [ShareInput!]!) {{ setAllocations(parent: "research", shares: $s,
        reason: "quarterly review") {{ {PAYLOAD} ... on AllocationsChanged {{ position }} }} }}""", s=shares)
    assert ok["setAllocations"]["__typename"] == "AllocationsChanged"
    no = m(f"""mutation {{ setAllocations(parent: "product", shares: [{{child: "b436b2", share: 0.4}}],
        reason: "not mine") {{ {PAYLOAD} }} }}""")
    assert no["setAllocations"]["__typename"] == "NotAuthorised"
    over = m(f"""mutation {{ setAllocations(parent: "research", shares: [{{child: "ee9e8c", share: 0.9}}],
        reason: "too much") {{ {PAYLOAD} }} }}""")
    assert over["setAllocations"]["__typename"] == "Rejected" and "would sum to" in over["setAllocations"]["reason"]
    occupancy = m.subscribe("subscription { occupancy { totalGpus usedGpus nodes { id } } }", until=lambda d: True)
    assert occupancy[0]["occupancy"]["totalGpus"] >= 320

    # the auditor finds the manager's change in the stream, and the refusal in the denials
    a = clients["auditor"]
    events = a("""{ auditEvents(first: 50, filter: {types: ["AllocationsSet"], streamId: "allocation-research"})
        { edges { node { payload metadata } } } }""")["auditEvents"]["edges"]
    assert any(e["node"]["payload"]["reason"] == "quarterly review" and e["node"]["metadata"]["role"] == "manager"
               for e in events)
    # the denial went API -> Kafka -> ledger like any command: an AccessDenied event in the hash chain
    wanted = {"operation": "setAllocations", "target": "allocation:product", "role": "manager"}
    deadline = time.monotonic() + 30
    while True:
        denied = a("{ accessDenials(first: 500) { edges { operation target role } } }")["accessDenials"]["edges"]
        if wanted in denied or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert wanted in denied
    in_stream = a("""{ auditEvents(first: 500, filter: {types: ["AccessDenied"]}) { edges { node { streamId
        payload } } } }""")["auditEvents"]["edges"]
    assert any(e["node"]["payload"]["operation"] == "setAllocations" for e in in_stream)
    assert a("{ verify { ok checked } }")["verify"]["ok"] is True
