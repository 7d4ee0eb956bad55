"""The authorisation matrix: every role × every query, mutation and subscription × own and foreign ids.

Each case runs against a real server (uvicorn, loopback) with a real HTTP or websocket client; the
decision must be the expected one, a denial must look exactly like "no such object" (or a plain
NotAuthorised / FORBIDDEN), and every denial must be recorded as an `AccessDenied` event in the log's
hash chain (the per-token denial limit is lifted here, so each one is its own event).

Scopes: the manager manages team-a (a1, a2); the researcher works in a1. "own" ids are a1's; "foreign"
ids are b1's (team-b). Admins and auditors see everything, so for them both are "own".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from steward.api.settings import ApiSettings
from tests.unit.api.harness import Server, serve, ws_messages

ROLES = ("admin", "auditor", "manager", "researcher")
ALLOWED, DENIED = "allowed", "denied"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("matrix"))
    api = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, api_denial_burst=100_000)
    with serve(tmp, api) as s:
        yield s


def denials(server: Server) -> int:
    """Denials recorded in the hash-chained log: the AccessDenied events (each stands for `count`)."""
    return sum(int(e.payload["count"]) for e in server.store.read() if e.type == "AccessDenied")


def data(server: Server, token: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = server.gql(query, variables, token)
    return body


def forbidden_or(body: dict[str, Any], ok: Callable[[dict[str, Any]], bool]) -> str:
    errors = body.get("errors") or []
    if errors:
        assert all(e["extensions"]["code"] == "FORBIDDEN" for e in errors), errors
        assert body["data"] is None
        return DENIED
    assert ok(body["data"]), body
    return ALLOWED


def payload(body: dict[str, Any], field: str, success: set[str]) -> str:
    assert not body.get("errors"), body
    kind = body["data"][field]["__typename"]
    if kind == "NotAuthorised":
        return DENIED
    assert kind in success | {"Rejected", "InvalidInput"}, body
    return ALLOWED


def project(own: bool) -> str:
    return "a1" if own else "b1"


def running_job(own: bool) -> str:
    return "a1-run" if own else "b1-run"


# -- the operations --------------------------------------------------------------------------------

PAYLOAD = "__typename ... on NotAuthorised { message } ... on Rejected { code reason } " \
          "... on InvalidInput { field message }"


def q_me(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ me { subject role } }"), lambda d: d["me"]["subject"] != "")


def q_job(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "query($id: ID!) { job(id: $id) { id project } }", {"id": running_job(own)})["data"]
    return ALLOWED if d["job"] is not None else DENIED


def q_why_pending(s: Server, t: str, own: bool) -> str:
    job = "a1-wait" if own else "b1-wait"
    d = data(s, t, "query($id: ID!) { whyPending(job: $id) { reason text } }", {"id": job})["data"]
    return ALLOWED if d["whyPending"] is not None else DENIED


def q_why_preempted(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "query($id: ID!) { whyPreempted(job: $id) { reason } }", {"id": running_job(own)})["data"]
    return ALLOWED if d["whyPreempted"] is not None else DENIED


def q_jobs(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "query($p: String) { jobs(filter: {project: $p}) { edges { node { project } } } }",
             {"p": project(own)})["data"]
    edges = d["jobs"]["edges"]
    assert all(e["node"]["project"] == project(own) for e in edges)
    return ALLOWED if edges else DENIED


def q_sessions(s: Server, t: str, own: bool) -> str:
    # b1-wait is b1's session; a1 has none, so "own" lists a1's (empty) sessions without a denial
    d = data(s, t, "query($p: String) { sessions(filter: {project: $p}) { edges { node { id jobClass } } } }",
             {"p": "a1" if own else "b1"})["data"]
    edges = d["sessions"]["edges"]
    assert all(e["node"]["jobClass"] == "interactive" for e in edges)
    if own:
        return ALLOWED
    return ALLOWED if edges else DENIED


def q_queue(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "query($p: String) { queue(project: $p) { waiting entries { mine job { project } } } }",
             {"p": project(own)})["data"]["queue"]
    return ALLOWED if d["waiting"] > 0 else DENIED


def q_queue_all(s: Server, t: str, own: bool) -> str:
    """Everyone sees the whole queue's positions; others' jobs only as positions."""
    d = data(s, t, "{ me { role scopes } queue { waiting entries { position mine job { project } } } }")["data"]
    entries = d["queue"]["entries"]
    assert len(entries) == d["queue"]["waiting"] >= 3
    for e in entries:
        assert (e["job"] is None) == (not e["mine"])
    if d["me"]["role"] in ("admin", "auditor"):
        assert all(e["mine"] for e in entries)
    else:
        assert not any(e["job"] and e["job"]["project"].startswith("b") for e in entries)
    return ALLOWED


def q_allocations(s: Server, t: str, own: bool) -> str:
    root = "team-a" if own else "team-b"
    d = data(s, t, "query($r: String) { allocations(under: $r) { name } }", {"r": root})["data"]
    return ALLOWED if d["allocations"] else DENIED


def q_allocation_history(s: Server, t: str, own: bool) -> str:
    root = "team-a" if own else "team-b"
    d = data(s, t, "query($r: String) { allocationHistory(under: $r) { allocation } }", {"r": root})["data"]
    return ALLOWED if d["allocationHistory"] else DENIED


def q_projects(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "{ me { role } projects { name isProject } }")["data"]
    names = {p["name"] for p in d["projects"]}
    expected = {"admin": {"a1", "a2", "b1", "o1"}, "auditor": {"a1", "a2", "b1", "o1"}, "manager": {"a1", "a2"},
                "researcher": {"a1"}}[d["me"]["role"]]
    assert names == expected, names
    return ALLOWED


def q_nodes(s: Server, t: str, own: bool) -> str:
    d = data(s, t, "{ me { role } nodes { id usedGpus jobs otherJobs } }")["data"]
    by_id = {n["id"]: n for n in d["nodes"]}
    assert by_id["n2"]["usedGpus"] == 8
    if d["me"]["role"] in ("admin", "auditor"):
        assert by_id["n2"]["jobs"] == ["b1-run"]
    else:
        assert by_id["n2"]["jobs"] == [] and by_id["n2"]["otherJobs"] == 1
    return ALLOWED


def q_topology(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ topology { path gpus } }"), lambda d: len(d["topology"]) > 1)


def q_job_counts(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ jobCounts { state count } }"), lambda d: len(d["jobCounts"]) > 0)


def q_audit_events(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ auditEvents(first: 5) { edges { node { position } } } }"),
                        lambda d: len(d["auditEvents"]["edges"]) == 5)


def q_access_denials(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ accessDenials { edges { id } } }"), lambda d: "edges" in d["accessDenials"])


def q_state_at(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ stateAt(position: 5) { position allocations { name } } }"),
                        lambda d: d["stateAt"]["position"] == 5)


def q_verify(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ verify { ok checked } }"), lambda d: d["verify"]["ok"])


def q_tokens(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, "{ tokens { id role } }"), lambda d: len(d["tokens"]) >= 5)


def m_submit(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation($p: String!) {{ submitJob(input: {{project: $p, gpus: 1, minRuntimeS: 0,
        command: ["true"]}}) {{ {PAYLOAD} ... on JobAccepted {{ job {{ id }} }} }} }}""", {"p": project(own)})
    return payload(body, "submitJob", {"JobAccepted"})


def m_open_session(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation($p: String!) {{ openSession(input: {{project: $p, gpus: 1, command: ["bash"],
        capS: 600}}) {{ {PAYLOAD} ... on SessionOpened {{ job {{ id jobClass }} }} }} }}""", {"p": project(own)})
    return payload(body, "openSession", {"SessionOpened"})


def m_cancel(s: Server, t: str, own: bool) -> str:
    from steward.domain.commands import SubmitJob

    job_id = f"c-{uuid.uuid4().hex[:8]}"
    s.record([SubmitJob(job_id, project(own), 1, 0, ["true"])])
    body = data(s, t, f"""mutation($id: ID!) {{ cancelJob(id: $id, reason: "matrix") {{ {PAYLOAD}
        ... on JobCancelled {{ job {{ state }} }} }} }}""", {"id": job_id})
    outcome = payload(body, "cancelJob", {"JobCancelled"})
    assert outcome == DENIED or body["data"]["cancelJob"]["__typename"] == "JobCancelled", body
    return outcome


def m_restore_session(s: Server, t: str, own: bool) -> str:
    from steward.domain.commands import SubmitJob

    job_id = f"s-{uuid.uuid4().hex[:8]}"
    s.record([SubmitJob(job_id, project(own), 1, 600, ["bash"], job_class="interactive")])
    body = data(s, t, f"""mutation($id: ID!) {{ restoreSession(id: $id) {{ {PAYLOAD}
        ... on SessionRestored {{ job {{ id }} }} }} }}""", {"id": job_id})
    return payload(body, "restoreSession", {"SessionRestored"})


def m_request_preemption(s: Server, t: str, own: bool) -> str:
    # the running jobs are inside their protection: an allowed request is Rejected ('protected') by the ledger
    body = data(s, t, f"""mutation($id: ID!) {{ requestPreemption(job: $id, reason: "matrix") {{ {PAYLOAD}
        ... on PreemptionRequested {{ position }} }} }}""", {"id": running_job(own)})
    outcome = payload(body, "requestPreemption", {"PreemptionRequested"})
    if outcome == ALLOWED:
        assert body["data"]["requestPreemption"] == {"__typename": "Rejected", "code": "protected",
                                                     "reason": body["data"]["requestPreemption"]["reason"]}
    return outcome


def m_set_allocations(s: Server, t: str, own: bool) -> str:
    parent, shares = ("team-a", [{"child": "a1", "share": 0.6}, {"child": "a2", "share": 0.4}]) if own else \
        ("team-b", [{"child": "b1", "share": 1.0}])
    body = data(s, t, f"""mutation($p: String!, $s: [ShareInput!]!) {{ setAllocations(parent: $p, shares: $s,
        reason: "matrix") {{ {PAYLOAD} ... on AllocationsChanged {{ position }} }} }}""", {"p": parent, "s": shares})
    return payload(body, "setAllocations", {"AllocationsChanged"})


def m_register_node(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation($id: String!) {{ registerNode(input: {{id: $id, gpus: 4, gpuModel: "a100",
        path: ["zone-b", "block-9"]}}) {{ {PAYLOAD} ... on NodeRegistered {{ id }} }} }}""",
                {"id": f"n-{uuid.uuid4().hex[:6]}"})
    return payload(body, "registerNode", {"NodeRegistered"})


def m_drain_node(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ drainNode(id: "no-such-node", reason: "matrix") {{ {PAYLOAD}
        ... on NodeDraining {{ id }} }} }}""")
    return payload(body, "drainNode", {"NodeDraining"})


def m_resume_node(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ resumeNode(id: "no-such-node", reason: "matrix") {{ {PAYLOAD}
        ... on NodeResumed {{ id }} }} }}""")
    return payload(body, "resumeNode", {"NodeResumed"})


def m_retire_node(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ retireNode(id: "no-such-node", reason: "matrix") {{ {PAYLOAD}
        ... on NodeRetired {{ id }} }} }}""")
    return payload(body, "retireNode", {"NodeRetired"})


def m_set_policy(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ setPolicy(input: {{settings: {{window_s: 3600}}, reason: "matrix"}}) {{
        {PAYLOAD} ... on PolicySet {{ position }} }} }}""")
    return payload(body, "setPolicy", {"PolicySet"})


def q_namespace_mappings(s: Server, t: str, own: bool) -> str:
    return forbidden_or(data(s, t, '{ namespaceMappings(executor: "k8s") { namespace project } }'),
                        lambda d: isinstance(d["namespaceMappings"], list))


def m_map_namespace(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ mapNamespace(executor: "k8s", namespace: "team-a", project: "a1",
        reason: "matrix") {{ {PAYLOAD} ... on NamespaceMappingChanged {{ position }} }} }}""")
    return payload(body, "mapNamespace", {"NamespaceMappingChanged"})


def m_create_token(s: Server, t: str, own: bool) -> str:
    body = data(s, t, f"""mutation {{ createToken(role: "researcher", subject: "new", scopes: ["a1"]) {{
        {PAYLOAD} ... on TokenCreated {{ token }} }} }}""")
    return payload(body, "createToken", {"TokenCreated"})


def m_revoke_token(s: Server, t: str, own: bool) -> str:
    from steward.auth.tokens import TokenStore

    _, info = TokenStore(s.store).create(role="auditor", scopes=[], subject="victim", created_by="matrix")
    body = data(s, t, f"""mutation($id: String!) {{ revokeToken(id: $id) {{ {PAYLOAD}
        ... on TokenRevoked {{ id }} }} }}""", {"id": info.token_id})
    return payload(body, "revokeToken", {"TokenRevoked"})


def _sub(s: Server, t: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    msgs = ws_messages(s.ws_url, {"query": query, "variables": variables or {}}, t)
    assert msgs, "no message"
    return msgs[0]


def s_events(s: Server, t: str, own: bool) -> str:
    msg = _sub(s, t, "subscription { events(afterPosition: 0) { position type } }")
    if msg["type"] == "next" and msg["payload"].get("errors"):
        assert msg["payload"]["errors"][0]["extensions"]["code"] == "FORBIDDEN"
        return DENIED
    assert msg["type"] == "next" and msg["payload"]["data"]["events"]["position"] == 1, msg
    return ALLOWED


def s_job_progress(s: Server, t: str, own: bool) -> str:
    msg = _sub(s, t, "subscription($id: ID!) { jobProgress(id: $id) { id state } }", {"id": running_job(own)})
    assert msg["type"] == "next" and not msg["payload"].get("errors"), msg
    return ALLOWED if msg["payload"]["data"]["jobProgress"] is not None else DENIED


def s_occupancy(s: Server, t: str, own: bool) -> str:
    msg = _sub(s, t, "subscription { occupancy { totalGpus usedGpus } }")
    assert msg["type"] == "next" and msg["payload"]["data"]["occupancy"]["totalGpus"] >= 16, msg
    return ALLOWED


@dataclass(frozen=True)
class Op:
    name: str
    run: Callable[[Server, str, bool], str]
    # who may, for own ids and for foreign ids
    own: frozenset[str]
    foreign: frozenset[str]
    has_ids: bool = True


EVERYONE = frozenset(ROLES)
SEE_ALL = frozenset({"admin", "auditor"})
ADMIN = frozenset({"admin"})
WORKERS = frozenset({"admin", "researcher"})

OPS = [
    Op("me", q_me, EVERYONE, EVERYONE, False),
    Op("job", q_job, EVERYONE, SEE_ALL),
    Op("whyPending", q_why_pending, EVERYONE, SEE_ALL),
    Op("whyPreempted", q_why_preempted, EVERYONE, SEE_ALL),
    Op("jobs", q_jobs, EVERYONE, SEE_ALL),
    Op("sessions", q_sessions, EVERYONE, SEE_ALL),
    Op("queue(project)", q_queue, EVERYONE, SEE_ALL),
    Op("queue", q_queue_all, EVERYONE, EVERYONE, False),
    Op("allocations(under)", q_allocations, SEE_ALL | {"manager"}, SEE_ALL),
    Op("allocationHistory(under)", q_allocation_history, SEE_ALL | {"manager"}, SEE_ALL),
    Op("projects", q_projects, EVERYONE, EVERYONE, False),
    Op("nodes", q_nodes, EVERYONE, EVERYONE, False),
    Op("topology", q_topology, EVERYONE, EVERYONE, False),
    Op("jobCounts", q_job_counts, EVERYONE, EVERYONE, False),
    Op("auditEvents", q_audit_events, SEE_ALL, SEE_ALL, False),
    Op("accessDenials", q_access_denials, SEE_ALL, SEE_ALL, False),
    Op("stateAt", q_state_at, SEE_ALL, SEE_ALL, False),
    Op("verify", q_verify, SEE_ALL, SEE_ALL, False),
    Op("tokens", q_tokens, ADMIN, ADMIN, False),
    Op("submitJob", m_submit, WORKERS, ADMIN),
    Op("openSession", m_open_session, WORKERS, ADMIN),
    Op("cancelJob", m_cancel, WORKERS, ADMIN),
    Op("restoreSession", m_restore_session, WORKERS, ADMIN),
    Op("setAllocations", m_set_allocations, frozenset({"admin", "manager"}), ADMIN),
    Op("requestPreemption", m_request_preemption, frozenset({"admin", "manager"}), ADMIN),
    Op("registerNode", m_register_node, ADMIN, ADMIN, False),
    Op("drainNode", m_drain_node, ADMIN, ADMIN, False),
    Op("resumeNode", m_resume_node, ADMIN, ADMIN, False),
    Op("retireNode", m_retire_node, ADMIN, ADMIN, False),
    Op("setPolicy", m_set_policy, ADMIN, ADMIN, False),
    Op("namespaceMappings", q_namespace_mappings, SEE_ALL, SEE_ALL, False),
    Op("mapNamespace", m_map_namespace, ADMIN, ADMIN, False),
    Op("createToken", m_create_token, ADMIN, ADMIN, False),
    Op("revokeToken", m_revoke_token, ADMIN, ADMIN, False),
    Op("subscription events", s_events, SEE_ALL, SEE_ALL, False),
    Op("subscription jobProgress", s_job_progress, EVERYONE, SEE_ALL),
    Op("subscription occupancy", s_occupancy, EVERYONE, EVERYONE, False),
]

CASES = [
    pytest.param(op, role, own, id=f"{op.name}-{role}-{'own' if own else 'foreign'}")
    for op in OPS for role in ROLES for own in ((True, False) if op.has_ids else (True,))
]


@pytest.mark.parametrize(("op", "role", "own"), CASES)
def test_matrix(server: Server, op: Op, role: str, own: bool) -> None:
    before = denials(server)
    outcome = op.run(server, server.tokens[role], own)
    expected = ALLOWED if role in (op.own if own else op.foreign) else DENIED
    assert outcome == expected, f"{op.name} as {role} on {'own' if own else 'foreign'} ids"
    recorded = denials(server) - before
    if expected == DENIED:
        assert recorded >= 1, "a denial must be recorded"
    else:
        assert recorded == 0, "an allowed request must not be recorded as a denial"


def test_denials_say_nothing_about_existence(server: Server) -> None:
    """A foreign job and a job that does not exist get the same answer."""
    t = server.tokens["researcher"]
    q = "query($id: ID!) { job(id: $id) { id } whyPending(job: $id) { reason } }"
    assert data(server, t, q, {"id": "b1-run"}) == data(server, t, q, {"id": "no-such-job"})
    cancel = f'mutation($id: ID!) {{ cancelJob(id: $id) {{ {PAYLOAD} }} }}'
    foreign = data(server, t, cancel, {"id": "b1-run"})["data"]["cancelJob"]
    missing = data(server, t, cancel, {"id": "no-such-job"})["data"]["cancelJob"]
    assert foreign["__typename"] == missing["__typename"] == "NotAuthorised"
    assert foreign["message"].replace("b1-run", "X") == missing["message"].replace("no-such-job", "X")


def test_every_denial_is_readable_by_auditors_with_who_and_what(server: Server) -> None:
    data(server, server.tokens["other"], "query { job(id: \"a1-run\") { id } }")
    rows = data(server, server.tokens["auditor"], "{ accessDenials(first: 500) { edges { subject role operation "
                                                   "target reason } } }")["data"]["accessDenials"]["edges"]
    assert {"subject": "bob", "role": "researcher", "operation": "job", "target": "job:a1-run",
            "reason": "outside the principal's scopes"} in rows


def test_revoked_and_unknown_tokens_are_refused_and_recorded(server: Server) -> None:
    from steward.auth.tokens import TokenStore

    token, info = TokenStore(server.store).create(role="admin", scopes=[], subject="temp", created_by="t")
    assert server.post("{ me { subject } }", token=token).status_code == 200
    body = data(server, server.tokens["admin"], f'mutation {{ revokeToken(id: "{info.token_id}") {{ __typename }} }}')
    assert body["data"]["revokeToken"]["__typename"] == "TokenRevoked"
    before = denials(server)
    for bad in (token, "stw_0000_nope", "not-a-token", ""):
        resp = server.post("{ me { subject } }", token=bad or None)
        assert resp.status_code == 401 and resp.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert denials(server) - before == 4
