"""The CLI as a real client of a real API server (the `steward` entry point in a subprocess, the token in
STEWARD_TOKEN): `preempt` is the requestPreemption mutation, and an auditor verifies and travels in time
with `audit ... --api` without access to the store. Refusals are one line on stderr, non-zero."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.domain.commands import PlaceJob, ReportJobStarted, SubmitJob
from tests.unit.api.harness import Server, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("cli"))) as s:
        s.record([SubmitJob("a2-free", "a2", 1, 0, ["sleep", "9"]), PlaceJob("a2-free", {"n1": [4]}, False, {}),
                  ReportJobStarted("a2-free", 1, 1, started_at=time.time() - 5)])
        yield s


def steward(server: Server, role: str, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as `role`, against the API only (the store URL leads nowhere); `columns`: the terminal's width."""
    env = os.environ | {"STEWARD_TOKEN": server.tokens[role], "STEWARD_API_URL": server.url,
                        "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_preempt_is_the_mutation_and_says_what_the_ledger_said(server: Server) -> None:
    done = steward(server, "manager", "preempt", "a2-free", "--reason", "room for the review", "--grace", "5",
                   "--output", "json")
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert (res["__typename"], res["job"]["id"], res["graceS"]) == ("PreemptionRequested", "a2-free", 5.0)
    protected = steward(server, "admin", "preempt", "a1-run", "--reason", "x")
    assert protected.returncode == 2 and "preemption rejected (protected)" in protected.stderr
    foreign = steward(server, "manager", "preempt", "b1-run", "--reason", "x")
    assert foreign.returncode == 2 and "not authorised" in foreign.stderr
    researcher = steward(server, "researcher", "preempt", "a1-run", "--reason", "x")
    assert researcher.returncode == 2 and "may not use 'requestPreemption'" in researcher.stderr
    table = steward(server, "admin", "preempt", "no-such-job", "--reason", "x")
    assert table.returncode == 2 and "unknown job 'no-such-job'" in table.stderr


def test_an_auditor_verifies_and_travels_in_time_through_the_api(server: Server) -> None:
    verified = steward(server, "auditor", "audit", "verify", "--api", "--output", "json")
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] is True and report["via"] == "api" and report["events"] == server.store.head()
    state = steward(server, "auditor", "audit", "state", "--api", "--at", str(time.time()), "--output", "json")
    assert state.returncode == 0, state.stderr
    assert {a["name"] for a in json.loads(state.stdout)["allocations"]} >= {"a1", "b1", "team-a"}
    table = steward(server, "auditor", "audit", "state", "--api", "--at", "2020-01-01T00:00:00Z")
    assert table.returncode == 0 and "position" in table.stdout
    no = steward(server, "researcher", "audit", "verify", "--api")
    assert no.returncode == 1 and "may not use 'verify'" in no.stderr


def test_preempt_without_a_reason_records_a_default_one(server: Server) -> None:
    refused = steward(server, "admin", "preempt", "a1-run", "--grace", "20")  # as the contract tests call it
    assert refused.returncode == 2 and "protected" in refused.stderr, refused.stderr


def test_tree_split_prints_owed_and_delivered_by_cluster_and_model(server: Server) -> None:
    """`steward tree split` (ADR 0062): the API's Allocation.split, one row per allocation and place, summing to
    the allocation's figures; an unknown allocation is refused by name."""
    done = steward(server, "admin", "tree", "split", "--output", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert any(r["allocation"] == "a2" and r["delivered"] > 0 and r["gpuModel"] for r in rows)  # a2-free on n1
    query = "{ allocations { name owed delivered split { cluster gpuModel owed delivered } } }"
    for a in server.gql(query, token=server.tokens["admin"])["data"]["allocations"]:  # one answer, one instant
        assert sum(p["delivered"] for p in a["split"]) == pytest.approx(a["delivered"], rel=1e-9, abs=1e-6)
        assert sum(p["owed"] for p in a["split"]) == pytest.approx(a["owed"], rel=1e-9, abs=1e-6)
    one = steward(server, "admin", "tree", "split", "a2")
    assert one.returncode == 0 and "weighted GPU-hours" in one.stdout and "a2" in one.stdout
    unknown = steward(server, "admin", "tree", "split", "no-such")
    assert unknown.returncode == 2 and "unknown allocation 'no-such'" in unknown.stderr
