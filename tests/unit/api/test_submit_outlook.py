"""The submit preview and the debug quota through a real API server (DESIGN.md "The time-slicing contract":
the researcher is told at submit when a job will run unfunded and why; "Debug quota": managers set it in the
tree, and whether a job is qualified is shown at submit).

The seeded log (tests/unit/api/harness.py): 16 ready GPUs; a1 is entitled to 0.6 × 0.5 × 0.6 = 0.18 of them
(2.88 GPUs) and runs a funded 4-GPU job, so its entitlement is used; a2 (0.12, 1.92 GPUs) runs nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from steward.store import schema
from tests.unit.api.harness import Server, serve

OUTLOOK_FIELDS = """funded reason fundedByLane protectionS askedProtectionS project allocation inUseGpus entitledGpus
  message
  qualification { qualified reason quotaGpus inUseGpus aheadGpus }"""
SUBMIT = f"""mutation($input: SubmitJobInput!) {{ submitJob(input: $input) {{ __typename
  ... on JobAccepted {{ job {{ id state }} outlook {{ {OUTLOOK_FIELDS} }} }}
  ... on InvalidInput {{ message }} ... on NotAuthorised {{ message }} ... on Rejected {{ reason }} }} }}"""
PREVIEW = f"""query($input: SubmitJobInput!) {{ submitOutlook(input: $input) {{ __typename
  ... on SubmitOutlook {{ {OUTLOOK_FIELDS} }} ... on InvalidInput {{ message }}
  ... on NotAuthorised {{ message }} }} }}"""
SET_QUOTA = """mutation($a: String!, $g: Int, $r: String!) { setDebugQuota(allocation: $a, gpus: $g, reason: $r) {
  __typename ... on DebugQuotaChanged { allocation gpus position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""
QUOTAS = "{ allocations { name debugQuotaGpus { gpus setGpus isDefault setOn } } }"


def job(project: str = "a1", gpus: int = 1, min_runtime_s: float = 600, job_class: str = "batch",
        **kw: Any) -> dict[str, Any]:
    return {"input": {"project": project, "gpus": gpus, "minRuntimeS": min_runtime_s, "command": ["true"],
                      "jobClass": job_class, **kw}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve(tmp_path_factory.mktemp("outlook")) as s:
        yield s


def events(s: Server) -> int:
    with s.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(schema.events)).scalar_one())


def quotas(s: Server, token: str) -> dict[str, dict[str, Any]]:
    return {a["name"]: a["debugQuotaGpus"] for a in s.gql(QUOTAS, token=token)["data"]["allocations"]}


def test_submit_says_the_job_will_run_unfunded_because_its_allocation_is_used(server: Server) -> None:
    res = server.gql(SUBMIT, job(), server.tokens["researcher"])["data"]["submitJob"]
    assert res["__typename"] == "JobAccepted", res
    o = res["outlook"]
    assert (o["funded"], o["reason"], o["allocation"], o["inUseGpus"]) == (False, "entitlement_used", "a1", 4.0)
    assert o["entitledGpus"] == pytest.approx(2.88)
    assert (o["protectionS"], o["askedProtectionS"]) == (0.0, 600.0)
    assert "no allocation left: 'a1' has 4 of its 2.88 entitled GPUs in use" in o["message"]
    assert o["qualification"] is None


def test_submit_without_protection_says_unfunded_by_request(server: Server) -> None:
    token = server.tokens["admin"]
    o = server.gql(SUBMIT, job("a2", min_runtime_s=0), token)["data"]["submitJob"]["outlook"]
    assert (o["funded"], o["reason"]) == (False, "unfunded_by_request")
    o = server.gql(SUBMIT, job("a2", min_runtime_s=600), token)["data"]["submitJob"]["outlook"]
    assert (o["funded"], o["reason"], o["protectionS"], o["allocation"]) == (True, "funded", 600.0, "a2")


def test_the_preview_records_nothing_and_refuses_what_submit_refuses(server: Server) -> None:
    before = events(server)
    res = server.gql(PREVIEW, job("a1", job_class="debug", min_runtime_s=300), server.tokens["researcher"])
    o = res["data"]["submitOutlook"]
    assert o["__typename"] == "SubmitOutlook" and o["qualification"]["reason"] in ("within_quota", "over_quota")
    assert events(server) == before
    refused = server.gql(PREVIEW, job("b1"), server.tokens["researcher"])["data"]["submitOutlook"]
    assert refused["__typename"] == "NotAuthorised"
    bad = server.gql(PREVIEW, job("a1", gpus=0), server.tokens["researcher"])["data"]["submitOutlook"]
    assert bad["__typename"] == "InvalidInput" and "gpus" in bad["message"]


def test_a_manager_sets_a_quota_of_their_own_child_and_the_preview_follows(tmp_path: Path) -> None:
    with serve(tmp_path) as s:
        manager, researcher = s.tokens["manager"], s.tokens["researcher"]
        q = quotas(s, manager)["a1"]
        assert (q["gpus"], q["setGpus"], q["isDefault"], q["setOn"]) == (4, None, True, None)  # the floor
        debug = job("a1", gpus=2, job_class="debug", min_runtime_s=300)
        assert s.gql(PREVIEW, debug, researcher)["data"]["submitOutlook"]["qualification"]["qualified"] is True

        res = s.gql(SET_QUOTA, {"a": "a1", "g": 1, "r": "a1 debugs on one GPU"}, manager)["data"]["setDebugQuota"]
        assert res["__typename"] == "DebugQuotaChanged" and (res["allocation"], res["gpus"]) == ("a1", 1)
        q = quotas(s, manager)["a1"]
        assert (q["gpus"], q["setGpus"], q["isDefault"], q["setOn"]) == (1, 1, False, "a1")
        o = s.gql(PREVIEW, debug, researcher)["data"]["submitOutlook"]
        assert (o["qualification"]["qualified"], o["qualification"]["reason"]) == (False, "over_quota")
        assert "over 'a1' debug quota of 1 GPUs" in o["message"]

        res = s.gql(SET_QUOTA, {"a": "a1", "g": None, "r": "back to the default"}, manager)["data"]["setDebugQuota"]
        assert res["__typename"] == "DebugQuotaChanged"
        assert quotas(s, manager)["a1"]["isDefault"] is True


REFUSED = [
    ("another manager's allocation", "manager", "b1", 2, "NotAuthorised", "no allocation 'b1'"),
    ("the manager's own node (its parent's manager sets it)", "manager", "team-a", 2, "NotAuthorised", "team-a"),
    ("a researcher", "researcher", "a1", 2, "NotAuthorised", "researcher"),
    ("negative", "admin", "a1", -1, "Rejected", "debug quota of 'a1' must be >= 0 GPUs, got -1"),
    ("unknown allocation", "admin", "ghost", 2, "Rejected", "'ghost' is not a child of 'cluster'"),
]


@pytest.mark.parametrize(("name", "who", "allocation", "gpus", "kind", "says"), REFUSED,
                         ids=[c[0] for c in REFUSED])
def test_bad_quota_changes_are_refused_clearly(server: Server, name: str, who: str, allocation: str, gpus: int,
                                               kind: str, says: str) -> None:
    before = events(server)
    res = server.gql(SET_QUOTA, {"a": allocation, "g": gpus, "r": "test"}, server.tokens[who])["data"]
    out = res["setDebugQuota"]
    assert out["__typename"] == kind, out
    assert says in (out.get("reason") or out.get("message") or "")
    assert events(server) == before + 1  # a rejection or a denial is an event in the chain


def test_a_fractional_quota_is_refused_by_the_schema(server: Server) -> None:
    body = server.gql(SET_QUOTA, {"a": "a1", "g": 1.5, "r": "x"}, server.tokens["admin"])
    assert body.get("errors") and "Int" in body["errors"][0]["message"]


def test_set_allocations_may_carry_debug_quotas(tmp_path: Path) -> None:
    mutation = """mutation($s: [ShareInput!]!) { setAllocations(parent: "team-a", shares: $s, reason: "r") {
      __typename } }"""
    with serve(tmp_path) as s:
        shares = [{"child": "a1", "share": 0.6, "debugQuotaGpus": 3}, {"child": "a2", "share": 0.4}]
        assert s.gql(mutation, {"s": shares}, s.tokens["manager"])["data"]["setAllocations"]["__typename"] == \
            "AllocationsChanged"
        got = quotas(s, s.tokens["manager"])
        assert (got["a1"]["setGpus"], got["a2"]["setGpus"]) == (3, None)
