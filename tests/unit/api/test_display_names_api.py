"""Display names and session addresses through the API (issue 24; ADR 0055): a manager names their node's
children (`setDisplayName`, or `displayName` in `setAllocations`), every reader sees `Allocation.displayName`
and `Job.projectName`, the history says who renamed what; a session's published address is `Job.sessionAddress`
while its attempt runs and is gone when the attempt ends."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from steward.domain.commands import (
    OpenSession,
    PlaceJob,
    RegisterNode,
    ReportJobLost,
    ReportJobStarted,
    ReportSessionAddress,
    SubmitJob,
)
from steward.store import schema
from tests.unit.api.harness import Server, serve
from tests.unit.api.test_cli_on_api import steward as cli_on_api

SET_NAME = """mutation($a: String!, $n: String, $r: String!) { setDisplayName(allocation: $a, name: $n, reason: $r) {
  __typename ... on DisplayNameChanged { allocation displayName position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""
SET_SHARES = """mutation($p: String!, $s: [ShareInput!]!, $r: String!) { setAllocations(parent: $p, shares: $s,
  reason: $r) { __typename ... on Rejected { reason } ... on InvalidInput { message } } }"""
NAMES = "{ allocations { name displayName } }"
JOB = """query($id: ID!) { job(id: $id) { id project projectName state attempt sessionAddress } }"""
HISTORY = """{ allocationHistory { allocation actor reason displayNameBefore displayNameAfter displayNameSet } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("names"))) as s:
        started = time.time() - 60
        s.record([SubmitJob("a1-nb", "a1", 1, 0, ["jupyter"], job_class="interactive"),
                  PlaceJob("a1-nb", {"n1": [4]}, True, {"policy": "test"}),
                  ReportJobStarted("a1-nb", 1, 5, started_at=started),
                  OpenSession("a1-nb", 1, started + 7200, [])])
        yield s


def names(s: Server, token: str) -> dict[str, str]:
    return {a["name"]: a["displayName"] for a in s.gql(NAMES, token=token)["data"]["allocations"]}


def events(s: Server) -> int:
    with s.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(schema.events)).scalar_one())


def test_a_manager_names_a_project_and_every_reader_sees_it(server: Server) -> None:
    assert names(server, server.tokens["researcher"])["a1"] == "a1"  # no name recorded: the id
    res = server.gql(SET_NAME, {"a": "a1", "n": "Vision Lab", "r": "people read names"},
                     server.tokens["manager"])["data"]["setDisplayName"]
    assert res["__typename"] == "DisplayNameChanged" and res["displayName"] == "Vision Lab", res
    for role in ("researcher", "auditor", "manager", "admin"):
        assert names(server, server.tokens[role])["a1"] == "Vision Lab"
    found = server.gql(JOB, {"id": "a1-run"}, server.tokens["researcher"])["data"]["job"]
    assert (found["project"], found["projectName"]) == ("a1", "Vision Lab")  # the id stays the id
    with server.store.engine.connect() as conn:
        row = conn.execute(select(schema.proj_allocations.c.display_name)
                           .where(schema.proj_allocations.c.name == "a1")).scalar_one()
    assert row == "Vision Lab"
    history = server.gql(HISTORY, token=server.tokens["auditor"])["data"]["allocationHistory"]
    named = next(h for h in history if h["displayNameSet"])
    assert (named["allocation"], named["actor"], named["displayNameBefore"], named["displayNameAfter"]) == (
        "a1", "maria", None, "Vision Lab")


def test_names_set_with_the_shares_and_cleared_back_to_the_id(server: Server) -> None:
    res = server.gql(SET_SHARES, {"p": "team-a", "r": "rebalance and name",
                                  "s": [{"child": "a2", "share": 0.4, "displayName": "Speech"}]},
                     server.tokens["manager"])["data"]["setAllocations"]
    assert res["__typename"] == "AllocationsChanged", res
    assert names(server, server.tokens["manager"])["a2"] == "Speech"
    res = server.gql(SET_NAME, {"a": "a2", "n": None, "r": "back to the id"}, server.tokens["manager"])
    assert res["data"]["setDisplayName"]["displayName"] == "a2"
    assert names(server, server.tokens["manager"])["a2"] == "a2"


REFUSED = [
    ("another manager's project", "manager", "b1", "Robots", "NotAuthorised", "b1"),
    ("the manager's own node (its parent's manager names it)", "manager", "team-a", "Team A", "NotAuthorised",
     "team-a"),
    ("a researcher", "researcher", "a1", "Mine", "NotAuthorised", "researcher"),
    ("a control character", "admin", "a1", "Vision\nLab", "InvalidInput", "U+000A"),
    ("too long", "admin", "a1", "x" * 65, "InvalidInput", "limit is 64"),
    ("a sibling's name", "admin", "research", "OPS", "Rejected", "the id of another node ('ops')"),
    ("unknown allocation", "admin", "ghost", "Ghost", "Rejected", "'ghost' is not a child of 'cluster'"),
]


@pytest.mark.parametrize(("case", "who", "allocation", "name", "kind", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_names_are_refused_clearly(server: Server, case: str, who: str, allocation: str, name: str, kind: str,
                                       says: str) -> None:
    before = events(server)
    out = server.gql(SET_NAME, {"a": allocation, "n": name, "r": "test"}, server.tokens[who])["data"]["setDisplayName"]
    assert out["__typename"] == kind, out
    assert says in (out.get("reason") or out.get("message") or "")
    if kind != "InvalidInput":
        assert events(server) == before + 1  # a rejection or a denial is an event in the chain


def test_a_session_address_shows_while_its_attempt_runs_and_never_after(server: Server) -> None:
    def read() -> dict[str, Any]:
        found: dict[str, Any] = server.gql(JOB, {"id": "a1-nb"}, server.tokens["researcher"])["data"]["job"]
        return found

    assert read()["sessionAddress"] is None
    server.record([ReportSessionAddress("a1-nb", 1, "http://n1.lab.example:8888/lab", time.time())],
                  actor="executor")
    assert read()["sessionAddress"] == "http://n1.lab.example:8888/lab"
    with server.store.engine.connect() as conn:
        stored = conn.execute(select(schema.proj_jobs.c.session_address)
                              .where(schema.proj_jobs.c.job_id == "a1-nb")).scalar_one()
    assert stored == "http://n1.lab.example:8888/lab"
    server.record([ReportJobLost("a1-nb", 1, "executor silent")], actor="workflows")
    after = read()
    assert after["state"] in ("QUEUED", "PREEMPTED") and after["sessionAddress"] is None
    # a late report of the attempt that ended is refused: the stale address never comes back (a new attempt
    # starts without one: tests/unit/domain/test_session_address.py)
    server.record([ReportSessionAddress("a1-nb", 1, "http://n1.lab.example:8888/lab")], actor="executor")
    again = read()
    assert (again["attempt"], again["state"], again["sessionAddress"]) == (1, "QUEUED", None)


def steward(server: Server, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_on_api(server, role, *args, columns=250)  # wide: names and ids side by side on one line


def test_the_cli_names_shows_and_refuses(server: Server) -> None:
    done = steward(server, "manager", "tree", "name", "a1", "Vision Lab", "--reason", "from the CLI",
                   "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["displayName"] == "Vision Lab"
    shown = steward(server, "manager", "tree", "show")
    assert shown.returncode == 0 and "Vision Lab" in shown.stdout and "DISPLAY NAME" in shown.stdout
    history = steward(server, "manager", "tree", "history", "a1")
    assert "-> Vision Lab" in history.stdout and "from the CLI" in history.stdout
    jobs = steward(server, "researcher", "jobs")
    assert "Vision Lab (a1)" in jobs.stdout  # the name, and the id that commands take
    bad = steward(server, "manager", "tree", "name", "a1", "tab\there", "--reason", "x")
    assert bad.returncode == 2 and "U+0009" in bad.stderr and "Traceback" not in bad.stderr
    both = steward(server, "manager", "tree", "name", "a1", "X", "--clear", "--reason", "x")
    assert both.returncode == 2 and "not both" in both.stderr
    foreign = steward(server, "manager", "tree", "name", "b1", "Robots", "--reason", "x")
    assert foreign.returncode == 2 and "not authorised" in foreign.stderr
    cleared = steward(server, "manager", "tree", "name", "a1", "--clear", "--reason", "back", "--output", "json")
    assert cleared.returncode == 0 and json.loads(cleared.stdout)["displayName"] == "a1"


def test_session_show_says_how_to_reach_the_session(server: Server) -> None:
    server.record([RegisterNode("n3", 8, "h100", ["zone-a", "block-3", "n3"]),  # n1 was lost above
                   SubmitJob("a1-nb2", "a1", 1, 0, ["jupyter"], job_class="interactive"),
                   PlaceJob("a1-nb2", {"n3": [0]}, True, {"policy": "test"}),
                   ReportJobStarted("a1-nb2", 1, 7, started_at=time.time()),
                   OpenSession("a1-nb2", 1, time.time() + 3600, []),
                   ReportSessionAddress("a1-nb2", 1, "n1.lab.example:2222")])
    done = steward(server, "researcher", "session", "show", "a1-nb2")
    assert done.returncode == 0, done.stderr
    assert "n1.lab.example:2222" in done.stdout and "SessionAddressPublished" in done.stdout
    as_json = json.loads(steward(server, "researcher", "session", "show", "a1-nb2", "--output", "json").stdout)
    assert as_json["sessionAddress"] == "n1.lab.example:2222"
