"""Allocations pinned to a cluster through a real API server (issue 25, ADR 0067): a manager pins their node's
children (`setPin`, or `pin` in `setAllocations`), every reader sees `Allocation.pin` and `pinnedTo` (inherited
down the subtree), an unknown cluster is refused naming the registered ones, and a job asking for another
cluster than its allocation's pin is refused at submit with the reason.

The seeded log (tests/unit/api/harness.py): nodes n1 and n2 in the default cluster; a node j1 is registered in
cluster jupiter here. The manager manages team-a (children a1, a2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from steward.store import schema
from tests.unit.api.harness import Server, serve
from tests.unit.api.test_cli_on_api import steward

SET_PIN = """mutation($a: String!, $c: String, $r: String!) { setPin(allocation: $a, cluster: $c, reason: $r) {
  __typename ... on PinChanged { allocation pin position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""
SET_SHARES = """mutation($p: String!, $s: [ShareInput!]!, $r: String!) { setAllocations(parent: $p, shares: $s,
  reason: $r) { __typename ... on Rejected { reason } ... on InvalidInput { message } } }"""
PINS = "{ allocations { name pin pinnedTo } }"
REGISTER = """mutation($input: RegisterNodeInput!) { registerNode(input: $input) { __typename } }"""
SUBMIT = """mutation($input: SubmitJobInput!) { submitJob(input: $input) { __typename
  ... on JobAccepted { job { id } } ... on InvalidInput { message } ... on Rejected { reason } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve(tmp_path_factory.mktemp("pins")) as s:
        res = s.gql(REGISTER, {"input": {"id": "j1", "gpus": 4, "gpuModel": "a100", "path": ["jupiter", "j1"],
                                         "cluster": "jupiter"}}, s.tokens["admin"])["data"]["registerNode"]
        assert res["__typename"] == "NodeRegistered", res
        yield s


def pins(s: Server, who: str = "admin") -> dict[str, tuple[str | None, str | None]]:
    rows = s.gql(PINS, token=s.tokens[who])["data"]["allocations"]
    return {a["name"]: (a["pin"], a["pinnedTo"]) for a in rows}


def set_pin(s: Server, allocation: str, cluster: str | None, who: str = "manager") -> dict[str, Any]:
    res: dict[str, Any] = s.gql(SET_PIN, {"a": allocation, "c": cluster, "r": "the lab's own GPUs"},
                                s.tokens[who])["data"]["setPin"]
    return res


def submit(s: Server, **kw: Any) -> dict[str, Any]:
    variables = {"input": {"project": "a1", "gpus": 1, "minRuntimeS": 60, "command": ["true"], **kw}}
    res: dict[str, Any] = s.gql(SUBMIT, variables, s.tokens["researcher"])["data"]["submitJob"]
    return res


@pytest.mark.parametrize(("who", "allocation", "cluster", "typename", "words"), [
    ("manager", "a1", "mars", "Rejected", "unknown cluster 'mars'; the registered clusters are default, jupiter"),
    ("manager", "a1", "bad name", "InvalidInput", "the cluster name 'bad name' must be"),
    ("manager", "b1", "jupiter", "NotAuthorised", "pin"),
    ("researcher", "a1", "jupiter", "NotAuthorised", ""),
], ids=["unknown cluster", "bad name", "outside the manager's scope", "a researcher"])
def test_bad_pins_are_refused_with_the_reason(server: Server, who: str, allocation: str, cluster: str,
                                              typename: str, words: str) -> None:
    res = set_pin(server, allocation, cluster, who)
    assert res["__typename"] == typename, res
    assert words in (res.get("reason") or res.get("message") or ""), res


def test_a_manager_pins_a_project_every_reader_sees_it_and_submits_follow_it(server: Server) -> None:
    assert pins(server)["a1"] == (None, None)
    res = set_pin(server, "a1", "jupiter")
    assert res["__typename"] == "PinChanged" and res["pin"] == "jupiter", res
    for who in ("researcher", "manager", "auditor", "admin"):
        assert pins(server, who)["a1"] == ("jupiter", "jupiter")
    with server.store.engine.connect() as conn:
        row = conn.execute(select(schema.proj_allocations.c.pin).where(schema.proj_allocations.c.name == "a1"))
        assert row.scalar_one() == "jupiter"
    refused = submit(server, clusters=["default"])
    assert refused["__typename"] in ("Rejected", "InvalidInput"), refused
    assert "allocation 'a1' is pinned to cluster 'jupiter'" in (refused.get("reason") or refused.get("message") or "")
    assert submit(server)["__typename"] == "JobAccepted"
    too_big = submit(server, gpus=8)  # 8 GPUs fit the default cluster, not jupiter's 4
    assert "largest placement this cluster could ever give is 4 GPUs" in (too_big.get("reason") or "")
    res = set_pin(server, "a1", None)
    assert res["__typename"] == "PinChanged" and res["pin"] is None
    assert pins(server)["a1"] == (None, None)


def test_a_pin_set_with_the_shares_holds_for_the_subtree(server: Server) -> None:
    res = server.gql(SET_SHARES, {"p": "research", "s": [{"child": "team-a", "share": 0.5, "pin": "jupiter"}],
                                  "r": "the lab's own GPUs"}, server.tokens["admin"])["data"]["setAllocations"]
    assert res["__typename"] == "AllocationsChanged", res
    found = pins(server)
    assert found["team-a"] == ("jupiter", "jupiter")
    assert found["a1"] == (None, "jupiter") and found["a2"] == (None, "jupiter")
    assert found["b1"] == (None, None)
    res = server.gql(SET_SHARES, {"p": "research", "s": [{"child": "team-a", "share": 0.5, "pin": None}],
                                  "r": "back to any"}, server.tokens["admin"])["data"]["setAllocations"]
    assert res["__typename"] == "AllocationsChanged", res
    assert pins(server)["a1"] == (None, None)


@pytest.mark.parametrize(("args", "code", "words"), [
    (["tree", "pin", "a2", "mars", "--reason", "own"], 2, "pin of 'a2' "),
    (["tree", "pin", "a2", "--reason", "own"], 2, "give a cluster, or --clear to unpin"),
    (["tree", "pin", "a2", "bad name", "--reason", "own"], 2, "cluster name 'bad name' must be"),
], ids=["unknown cluster", "neither cluster nor --clear", "bad name"])
def test_the_cli_refuses_a_bad_pin_in_one_line(server: Server, args: list[str], code: int, words: str) -> None:
    proc = steward(server, "manager", *args)
    assert proc.returncode == code and words in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_cli_pins_and_tree_show_says_where_each_allocation_runs(server: Server) -> None:
    done = steward(server, "manager", "tree", "pin", "a2", "jupiter", "--reason", "own", "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pin"] == "jupiter"
    shown = steward(server, "manager", "tree", "show", "--output", "json")
    rows = {a["name"]: (a["pin"], a["pinnedTo"]) for a in json.loads(shown.stdout)}
    assert rows["a2"] == ("jupiter", "jupiter")
    table = steward(server, "manager", "tree", "show", columns=250).stdout
    assert "pinned to" in table.lower() and "jupiter" in table
    cleared = steward(server, "manager", "tree", "pin", "a2", "--clear", "--reason", "any", "--output", "json")
    assert cleared.returncode == 0 and json.loads(cleared.stdout)["pin"] is None, cleared.stderr
