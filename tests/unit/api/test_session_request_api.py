"""A session asks for GPU models and clusters as a job does (issue 25): `openSession`'s `gpuModels` and
`clusters` (none: any) are checked by the same rules as `submitJob`'s (steward.domain.clusters
`require_known_request`: an unknown one is refused with the same words), `steward session open --gpu-model
--cluster` sends them, and a restored session keeps what the session accepted (rules version 4, ADR 0086).

The seeded log (tests/unit/api/harness.py): nodes n1 and n2, 8 "h100" GPUs each, in the default cluster; here
a node j1 of 4 "a100" GPUs in cluster "jupiter" joins them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.domain import rules_version
from steward.domain.commands import CancelJob, RegisterNode, RestoreSession, SubmitJob
from steward.domain.decide import decide
from steward.domain.state import LedgerState
from tests.unit.api.harness import Server, record, serve
from tests.unit.api.test_cli_on_api import steward
from tests.unit.domain.test_clusters import BASE, fold

OPEN = """mutation($input: OpenSessionInput!) { openSession(input: $input) { __typename
  ... on SessionOpened { job { id jobClass gpuModels clusters } }
  ... on InvalidInput { field message } } }"""
SUBMIT = """mutation($input: SubmitJobInput!) { submitJob(input: $input) { __typename
  ... on JobAccepted { job { id } }
  ... on InvalidInput { field message } } }"""
RESTORE = """mutation($id: ID!) { restoreSession(id: $id) { __typename
  ... on SessionRestored { job { id jobClass gpuModels clusters } }
  ... on Rejected { code reason } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("session-request"))) as s:
        record(s.store, [RegisterNode("j1", 4, "a100", ["jupiter", "j1"], cluster="jupiter")])
        yield s


def open_session(server: Server, **accepts: Any) -> dict[str, Any]:
    got = server.gql(OPEN, {"input": {"project": "a1", "gpus": 1, "command": ["jupyter"], "capS": 600, **accepts}},
                     token=server.tokens["researcher"])
    assert "errors" not in got, got
    out: dict[str, Any] = got["data"]["openSession"]
    return out


@pytest.mark.parametrize(("accepts", "models", "clusters"), [
    ({}, [], []),
    ({"gpuModels": ["a100"]}, ["a100"], []),
    ({"clusters": ["jupiter"]}, [], ["jupiter"]),
    ({"gpuModels": ["a100", "h100"], "clusters": ["jupiter", "default"]}, ["a100", "h100"], ["jupiter", "default"]),
])
def test_a_session_is_opened_with_the_models_and_clusters_it_accepts(server: Server, accepts: dict[str, Any],
                                                                     models: list[str], clusters: list[str]) -> None:
    res = open_session(server, **accepts)
    assert res["__typename"] == "SessionOpened", res
    assert (res["job"]["jobClass"], res["job"]["gpuModels"], res["job"]["clusters"]) == ("interactive", models,
                                                                                          clusters)


@pytest.mark.parametrize("accepts", [
    {"gpuModels": ["b200"]},
    {"clusters": ["saturn"]},
    {"gpuModels": ["a100", "a100"]},
    {"gpuModels": [" "]},
    {"gpuModels": ["h100"], "clusters": ["jupiter"]},  # jupiter has no h100: no placement could ever hold it
])
def test_a_session_s_request_is_refused_as_a_job_s_is_in_the_same_words(server: Server,
                                                                        accepts: dict[str, Any]) -> None:
    session = open_session(server, **accepts)
    job = server.gql(SUBMIT, {"input": {"project": "a1", "gpus": 1, "minRuntimeS": 600, "command": ["x"],
                                        "jobClass": "interactive", "resumable": True, **accepts}},
                     token=server.tokens["researcher"])["data"]["submitJob"]
    assert session["__typename"] == job["__typename"] == "InvalidInput", (session, job)
    assert session["message"] == job["message"]
    if accepts == {"gpuModels": ["b200"]}:
        assert session["message"] == "unknown GPU model 'b200': the registered GPU models are a100, h100"


def test_a_restored_session_keeps_what_the_session_accepted(server: Server) -> None:
    opened = open_session(server, gpuModels=["a100"], clusters=["jupiter"])
    sid = opened["job"]["id"]
    record(server.store, [CancelJob(sid, "lunch")], actor="alice")
    res = server.gql(RESTORE, {"id": sid}, token=server.tokens["researcher"])["data"]["restoreSession"]
    assert res["__typename"] == "SessionRestored", res
    assert (res["job"]["gpuModels"], res["job"]["clusters"]) == (["a100"], ["jupiter"])


def test_session_open_on_the_cli_sends_gpu_models_and_clusters(server: Server) -> None:
    done = steward(server, "researcher", "session", "open", "-p", "a1", "--cap", "600", "--gpu-model", "a100,h100",
                   "--cluster", "jupiter", "-o", "json", "--", "jupyter", "lab")
    assert done.returncode == 0, done.stderr
    sid = json.loads(done.stdout)["id"]
    job = server.gql("query($id: ID!) { job(id: $id) { jobClass gpuModels clusters command } }", {"id": sid},
                     token=server.tokens["researcher"])["data"]["job"]
    assert job == {"jobClass": "interactive", "gpuModels": ["a100", "h100"], "clusters": ["jupiter"],
                   "command": ["jupyter", "lab"]}
    bad = steward(server, "researcher", "session", "open", "-p", "a1", "--cap", "600", "--gpu-model", "b200",
                  "--", "jupyter")
    assert bad.returncode == 2
    assert "unknown GPU model 'b200': the registered GPU models are a100, h100" in bad.stderr


def _stopped_session(models: list[str], clusters: list[str]) -> LedgerState:
    return fold([SubmitJob("s1", "p", 1, 600, ["jupyter"], resumable=True, job_class="interactive",
                           gpu_models=models, clusters=clusters), CancelJob("s1", "done")], BASE)


@pytest.mark.parametrize(("rules", "models", "clusters"), [
    (rules_version.CURRENT, ["A100"], ["jupiter"]),
    (3, [], []),  # decided before the change: the restored session accepted any (an old log replays as it was)
])
def test_restore_keeps_the_request_from_rules_version_4_on(rules: int, models: list[str],
                                                           clusters: list[str]) -> None:
    state = _stopped_session(["A100"], ["jupiter"])
    _, submitted = decide(state, RestoreSession("s1", "s2"), 2.0, rules)
    assert submitted.type == "JobSubmitted"
    assert (submitted.payload["gpu_models"], submitted.payload["clusters"]) == (models, clusters)
