"""Issue 21, at the API: bodies nested past the limit, batching, bad JSON and content types answer
GraphQL-shaped JSON before GraphQL parses anything; failed authentication is rate-limited per address; a
document with several operations needs an `operationName`; hostile ids and jobs no placement could hold
are refused with the problem named; client mistakes are logged in one line at info, faults at error with
their traceback; the request metric tells ok, rejected, unauthorised and error apart."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from steward.api.requests import json_depth
from steward.api.settings import ApiSettings
from tests.unit.api.harness import Server, serve

REFUSAL = "__typename ... on InvalidInput { field message } ... on Rejected { code reason } " \
          "... on NotAuthorised { message }"
PAYLOAD = REFUSAL + " ... on JobAccepted { job { id } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    api = ApiSettings(run_dir=tmp_path_factory.mktemp("run"), api_rate_per_s=10_000, api_rate_burst=10_000)
    with serve(Path(tmp_path_factory.mktemp("hardening")), api) as s:
        yield s


def raw(server: Server, content: bytes, content_type: str | None = "application/json",
        token: str = "admin") -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.tokens[token]}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx.post(server.url, content=content, headers=headers, timeout=30)


def refused(resp: httpx.Response, status: int, code: str, words: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["data"] is None and len(body["errors"]) == 1
    assert body["errors"][0]["extensions"]["code"] == code and words in body["errors"][0]["message"]


def test_a_30_kb_body_nested_5000_deep_is_refused_before_it_is_parsed(server: Server) -> None:
    deep = b'{"query": "{ health }", "variables": {"x": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    assert 9_000 < len(deep) < 64 * 1024
    refused(raw(server, deep), 400, "BAD_REQUEST", "nests deeper than 32 levels")
    objects = b'{"query": "{ health }", "variables": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}"
    refused(raw(server, objects), 400, "BAD_REQUEST", "nests deeper than 32 levels")
    assert server.gql("{ health }", token=server.tokens["admin"]) == {"data": {"health": "ok"}}


def test_nesting_within_the_limit_and_brackets_inside_strings_pass(server: Server) -> None:
    fine = b'{"query": "{ health }", "variables": {"x": ' + b"[" * 30 + b"]" * 30 + b', "s": "' + b"[" * 500 + b'"}}'
    assert raw(server, fine).json() == {"data": {"health": "ok"}}


@pytest.mark.parametrize(("text", "depth"), [
    (b"{}", 1), (b"[[[]]]", 3), (b'{"a": "[[[["}', 1), (b'{"a": "\\"[[["}', 1), (b'"[{"', 0), (b"1", 0),
    (b"[[], [], [], [], []]", 2), (b'[{"a": [1, {"b": []}]}]', 5),
])
def test_json_depth_ignores_strings(text: bytes, depth: int) -> None:
    """A body is refused exactly when it nests deeper than the limit, whatever its strings hold."""
    for limit in range(5):
        assert (json_depth(text, limit) > limit) == (depth > limit), limit


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    return 0


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3), max_leaves=30)


@given(json_values, st.integers(0, 6))
def test_json_depth_refuses_exactly_the_json_nested_past_the_limit(value: Any, limit: int) -> None:
    text = json.dumps(value).encode()
    assert (json_depth(text, limit) > limit) == (nesting(value) > limit)


@pytest.mark.parametrize(("content", "content_type", "status", "code", "words"), [
    (b'[{"query": "{ health }"}]', "application/json", 400, "BAD_REQUEST", "batching is not supported"),
    (b"{nope", "application/json", 400, "BAD_REQUEST", "not valid JSON"),
    (b'"{ health }"', "application/json", 400, "BAD_REQUEST", "must be a JSON object"),
    (b'{"variables": {}}', "application/json", 400, "BAD_REQUEST", "needs a 'query' string"),
    (b'{"query": "{ health }", "variables": [1]}', "application/json", 400, "BAD_REQUEST", "'variables' must be"),
    (b"query { health }", "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE", "send the request as application/json"),
    (b'{"query": "{ health }"}', None, 415, "UNSUPPORTED_MEDIA_TYPE", "content type 'none'"),
])
def test_malformed_requests_answer_graphql_shaped_json(server: Server, content: bytes, content_type: str | None,
                                                       status: int, code: str, words: str) -> None:
    refused(raw(server, content, content_type), status, code, words)


def test_several_operations_need_an_operation_name(server: Server) -> None:
    doc = "query A { health } query B { me { subject } }"
    body = server.gql(doc, token=server.tokens["admin"])
    assert body["data"] is None
    assert body["errors"][0]["message"] == "the document has 2 operations: name the one to run in 'operationName'"
    named = httpx.post(server.url, json={"query": doc, "operationName": "B"}, timeout=30,
                       headers={"Authorization": f"Bearer {server.tokens['admin']}"}).json()
    assert named == {"data": {"me": {"subject": "root"}}}


def test_a_flood_of_bad_tokens_is_rate_limited_per_address(tmp_path: Path) -> None:
    api = ApiSettings(run_dir=tmp_path, api_rate_per_s=0.05, api_rate_burst=5)
    with serve(tmp_path, api, seeded=False) as s:
        codes = [s.post("{ health }", token="stw_not-a-token").status_code for _ in range(8)]
        assert codes == [401] * 5 + [429] * 3
        flood = s.post("{ health }", token="stw_not-a-token")
        refused(flood, 429, "RATE_LIMITED", "failed authentication")
        assert int(flood.headers["Retry-After"]) >= 1
        assert s.post("{ health }").status_code == 429  # no token at all: the same address's budget
        assert s.post("{ health }", token=s.tokens["admin"]).status_code == 200  # a valid token still works


HOSTILE_JOB_IDS = ["../../../../../x", "/etc/passwd", "a\nb", "job\u202egpj", "job\x00", ".."]


@pytest.mark.parametrize("job_id", HOSTILE_JOB_IDS)
def test_hostile_job_and_session_ids_are_refused_at_the_api_naming_the_problem(server: Server, job_id: str) -> None:
    q = f"mutation($id: String!) {{ submitJob(input: {{project: \"a1\", gpus: 1, minRuntimeS: 0, " \
        f"command: [\"true\"], jobId: $id}}) {{ {PAYLOAD} }} }}"
    res = server.gql(q, {"id": job_id}, token=server.tokens["researcher"])["data"]["submitJob"]
    assert res["__typename"] == "InvalidInput" and res["field"] == "jobId"
    assert res["message"].startswith(f"the job id {job_id!a} ")
    assert "\n" not in res["message"] and "\u202e" not in res["message"] and "\x00" not in res["message"]
    q = f"mutation($id: String!) {{ openSession(input: {{project: \"a1\", gpus: 1, capS: 60, command: [\"sleep\"], " \
        f"sessionId: $id}}) {{ {REFUSAL} }} }}"
    res = server.gql(q, {"id": job_id}, token=server.tokens["researcher"])["data"]["openSession"]
    assert res["__typename"] == "InvalidInput" and res["field"] == "sessionId"
    assert server.services.read.job(job_id) is None  # nothing recorded


def test_hostile_node_and_org_tree_names_are_refused_at_the_api(server: Server) -> None:
    q = """mutation($id: String!) { registerNode(input: {id: $id, gpus: 8, gpuModel: "h100", path: ["z", "n"]})
           { __typename } }"""
    body = server.gql(q, {"id": "../../etc"}, token=server.tokens["admin"])
    assert body["data"] is None and body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert body["errors"][0]["message"].startswith("node_id '../../etc' must be 1 to 100 ASCII letters")
    q = f"""mutation($child: String!) {{ setAllocations(parent: "cluster", reason: "r",
            shares: [{{child: $child, share: 0.1}}]) {{ {REFUSAL} }} }}"""
    res = server.gql(q, {"child": "a/b"}, token=server.tokens["admin"])["data"]["setAllocations"]
    assert res == {"__typename": "InvalidInput", "field": "shares",
                   "message": "the child 'a/b' must be 1 to 100 ASCII letters, digits, '.', '_' or '-', starting "
                              "with a letter or digit"}


def test_a_job_no_placement_could_hold_is_refused_at_submit_naming_the_largest(server: Server) -> None:
    q = f"""mutation {{ submitJob(input: {{project: "a1", gpus: 17, minRuntimeS: 0, command: ["true"]}})
            {{ {PAYLOAD} }} }}"""
    res = server.gql(q, token=server.tokens["researcher"])["data"]["submitJob"]
    assert res == {"__typename": "InvalidInput", "field": None,
                   "message": "the job asks for 17 GPUs, but the largest placement this cluster could ever give "
                              "is 16 GPUs (all 2 registered nodes)"}


def outcome_count(operation: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value("steward_api_request_seconds_count",
                                      {"operation_type": "mutation", "operation": operation, "outcome": outcome})
    return value or 0.0


def test_the_request_metric_tells_ok_rejected_unauthorised_and_error_apart(server: Server) -> None:
    before = {o: outcome_count("submitJob", o) for o in ("ok", "rejected", "unauthorised")}
    ok = f'mutation {{ submitJob(input: {{project: "a1", gpus: 1, minRuntimeS: 0, command: ["true"]}}) ' \
         f'{{ {PAYLOAD} }} }}'
    assert server.gql(ok, token=server.tokens["researcher"])["data"]["submitJob"]["__typename"] == "JobAccepted"
    too_big = ok.replace("gpus: 1,", "gpus: 99,").replace(PAYLOAD, "__typename")  # no fields of the refusal asked
    assert server.gql(too_big, token=server.tokens["researcher"])["data"]["submitJob"] == {"__typename": "InvalidInput"}
    foreign = ok.replace('"a1"', '"b1"').replace(PAYLOAD, "... on JobAccepted { job { id } }")
    assert server.gql(foreign, token=server.tokens["researcher"])["data"]["submitJob"] == {}
    after = {o: outcome_count("submitJob", o) for o in ("ok", "rejected", "unauthorised")}
    assert {o: after[o] - before[o] for o in after} == {"ok": 1, "rejected": 1, "unauthorised": 1}


def test_client_mistakes_log_one_line_at_info_and_faults_at_error_with_a_traceback(
        server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger="steward.api")
    server.gql("{ jobs(first: 100000) { edges { cursor } } }", token=server.tokens["admin"])
    raw(server, b"{nope")
    server.gql("query A { health } query B { health }", token=server.tokens["admin"])
    deadline = time.monotonic() + 5
    while len([r for r in caplog.records if r.name == "steward.api"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    mistakes = [r for r in caplog.records if r.name == "steward.api"]
    assert len(mistakes) >= 3 and all(r.levelno == logging.INFO and r.exc_info is None for r in mistakes)
    assert all("\n" not in r.getMessage() for r in mistakes)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # nothing at error, from any logger
    caplog.clear()

    def broken(job_id: str) -> Any:
        raise RuntimeError("the store fell over")

    monkeypatch.setattr(server.services.read, "job", broken)
    server.gql('{ job(id: "a1-run") { id } }', token=server.tokens["admin"])
    faults = [r for r in caplog.records if r.name == "steward.api" and r.levelno >= logging.ERROR]
    assert len(faults) == 1 and faults[0].exc_info is not None and "the store fell over" in str(faults[0].exc_info[1])
