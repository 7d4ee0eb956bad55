"""Kubernetes namespace mappings through the API and the CLI (issue 26, ADR 0054), against a real server
(uvicorn, loopback) with the ledger in process: admins map and unmap, the answer is read back with who and why,
what the domain refuses comes back in one line, and the read the Kubernetes executor makes (an auditor's)
gives the mappings and the queue in one request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.api.settings import ApiSettings
from steward.domain.commands import RegisterNode, SubmitJob
from steward.executor.kubernetes_steward import QUERY, Standing, standing_of
from tests.unit.api.harness import Server, serve

MAP = """mutation($n: String!, $p: String!, $r: String!) {
  mapNamespace(executor: "k8s", namespace: $n, project: $p, reason: $r) {
    __typename
    ... on NamespaceMappingChanged { position namespace project }
    ... on NotAuthorised { message }
    ... on InvalidInput { field message }
    ... on Rejected { code reason }
  }
}"""
READ = '{ namespaceMappings(executor: "k8s") { namespace project position recordedAt setBy reason } }'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("namespaces-api"))
    api = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, api_denial_burst=100_000)
    with serve(tmp, api) as s:
        yield s


def map_namespace(s: Server, role: str, namespace: str, project: str, reason: str = "a team") -> dict[str, Any]:
    body = s.gql(MAP, {"n": namespace, "p": project, "r": reason}, s.tokens[role])
    assert not body.get("errors"), body
    result: dict[str, Any] = body["data"]["mapNamespace"]
    return result


# (case, role, namespace, project, reason, the answer's type, what it says)
CASES: list[tuple[str, str, str, str, str, str, str]] = [
    ("an admin maps", "admin", "team-x", "a1", "the a1 team", "NamespaceMappingChanged", ""),
    ("a manager may not", "manager", "team-y", "a1", "mine", "NotAuthorised", "may not use 'mapNamespace'"),
    ("an auditor may not", "auditor", "team-y", "a1", "mine", "NotAuthorised", "may not use 'mapNamespace'"),
    ("no reason", "admin", "team-y", "a1", " ", "InvalidInput", "needs a reason"),
    ("an inner node", "admin", "team-y", "team-a", "x", "Rejected", "unknown project 'team-a'"),
    ("no namespace name", "admin", "Team_Y", "a1", "x", "Rejected", "no Kubernetes namespace name"),
]


@pytest.mark.parametrize(("case", "role", "namespace", "project", "reason", "answer", "says"), CASES,
                         ids=[c[0] for c in CASES])
def test_mapping_a_namespace(server: Server, case: str, role: str, namespace: str, project: str, reason: str,
                             answer: str, says: str) -> None:
    result = map_namespace(server, role, namespace, project, reason)
    assert result["__typename"] == answer, result
    assert says in json.dumps(result)


def test_the_mapping_in_force_is_read_back_and_an_unmap_removes_it(server: Server) -> None:
    assert map_namespace(server, "admin", "team-b1", "b1", "bob's team")["__typename"] == "NamespaceMappingChanged"
    assert map_namespace(server, "admin", "team-b1", "a2", "moved")["project"] == "a2"
    assert map_namespace(server, "admin", "team-gone", "a2", "soon gone")["project"] == "a2"
    assert map_namespace(server, "admin", "team-gone", "", "gone")["project"] == ""
    body = server.gql(READ, token=server.tokens["auditor"])
    rows = {r["namespace"]: r for r in body["data"]["namespaceMappings"]}
    assert "team-gone" not in rows
    assert (rows["team-b1"]["project"], rows["team-b1"]["reason"]) == ("a2", "moved")
    assert rows["team-b1"]["setBy"] and rows["team-b1"]["position"] > 0
    refused = server.gql(READ, token=server.tokens["researcher"])
    assert refused["errors"][0]["extensions"]["code"] == "FORBIDDEN"


def read_as_executor(server: Server, after: str | None = None) -> Standing:
    body = server.gql(QUERY, {"e": "k8s", "n": 500, "r": 200, "after": after, "jobs": "job-k8s."},
                      server.tokens["auditor"])
    assert not body.get("errors"), body
    return standing_of(body["data"], "executor:k8s")


def test_the_executors_read_gives_the_mappings_the_queue_and_its_rejected_submissions(server: Server) -> None:
    """The one request the Kubernetes executor makes (steward.executor.kubernetes_steward), as an auditor: with
    the mappings and the queue, the ledger's rejections of its submissions (ADR 0056), read on from a cursor."""
    assert map_namespace(server, "admin", "team-x", "a1", "the a1 team")["__typename"] == "NamespaceMappingChanged"
    first = read_as_executor(server)
    assert first.mappings.get("team-x") == "a1"
    assert all(w.position >= 1 and w.of >= w.position for w in first.waiting.values())
    pods = [SubmitJob("k8s.team-x.ok", "a1", 1, 0.0, ["train"], from_executor="k8s", from_namespace="team-x"),
            SubmitJob("k8s.team-z.no", "a1", 1, 0.0, ["train"], from_executor="k8s", from_namespace="team-z"),
            SubmitJob("k8s.team-x.other", "a2", 1, 0.0, ["train"], from_executor="k8s", from_namespace="team-x")]
    server.record(pods, actor="executor:k8s")
    second = read_as_executor(server, first.cursor)
    assert set(second.rejected) == {"k8s.team-z.no", "k8s.team-x.other"}
    assert second.rejected["k8s.team-z.no"].code == "namespace_not_mapped"
    assert "namespace team-z of cluster k8s is not mapped" in second.rejected["k8s.team-z.no"].reason
    assert "charges project a1, not a2" in second.rejected["k8s.team-x.other"].reason
    assert "k8s.team-x.ok" not in second.rejected  # accepted: queued
    assert read_as_executor(server, second.cursor).rejected == {}  # each rejection is read once


def steward(server: Server, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_TOKEN": server.tokens[role], "STEWARD_API_URL": server.url,
                        "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "k8s", *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_the_cli_maps_lists_and_unmaps(server: Server) -> None:
    done = steward(server, "admin", "map", "team-cli", "o1", "--executor", "k8s", "--reason", "ops",
                   "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["project"] == "o1"
    listed = json.loads(steward(server, "auditor", "mappings", "--executor", "k8s", "--output", "json").stdout)
    assert ("team-cli", "o1") in {(r["namespace"], r["project"]) for r in listed}
    assert steward(server, "admin", "unmap", "team-cli", "--executor", "k8s", "--reason", "done").returncode == 0
    listed = json.loads(steward(server, "auditor", "mappings", "--executor", "k8s", "--output", "json").stdout)
    assert "team-cli" not in {r["namespace"] for r in listed}
    refused = steward(server, "researcher", "map", "team-cli", "a1", "--executor", "k8s", "--reason", "mine")
    assert refused.returncode != 0 and "may not use 'mapNamespace'" in refused.stderr


def test_the_executors_read_gives_each_node_s_recorded_cluster(server: Server) -> None:
    """ADR 0085: the same request gives the cluster the ledger records for each node (`default` for a node
    registered without one), which a Kubernetes executor without a cluster setting registers its nodes in."""
    server.record([RegisterNode("k8s-g0", 8, "A100", ["k8s-cluster", "k8s-g0"], "k8s", "ceres")], actor="executor:k8s")
    # in `default` beside the seeded nodes of executor `local`: recorded under rules 4, before a cluster had one
    # executor (ADR 0091), as a store of then holds it
    server.record([RegisterNode("k8s-g1", 8, "A100", ["k8s-cluster", "k8s-g1"], "k8s")], actor="executor:k8s",
                  rules=4)
    clusters = read_as_executor(server).clusters
    assert clusters is not None and (clusters["k8s-g0"], clusters["k8s-g1"]) == ("ceres", "default")
