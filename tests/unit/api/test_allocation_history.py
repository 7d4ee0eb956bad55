"""`allocationHistory`: who changed which share and debug quota, when, why, before -> after, newest
first; a manager sees their subtree and nothing outside it (issue 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.domain.commands import SetAllocations
from tests.unit.api.harness import Server, serve

QUERY = """query($under: String, $first: Int! = 100) { allocationHistory(under: $under, first: $first) {
  position recordedAt actor reason parent allocation shareBefore shareAfter debugQuotaBefore debugQuotaAfter
  debugQuotaSet } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("history"))) as s:
        s.record([SetAllocations("team-a", {"a1": 0.7, "a2": 0.3}, "a1 has a deadline")], actor="maria")
        s.record([SetAllocations("team-a", {}, "debug for a2", {"a2": 4})], actor="maria")
        s.record([SetAllocations("ops", {"o1": 0.9, "o2": 0.1}, "new ops project")], actor="root")
        yield s


def history(server: Server, role: str, under: str | None = None, first: int = 100) -> list[dict[str, Any]]:
    body = server.gql(QUERY, {"under": under, "first": first}, server.tokens[role])
    assert "errors" not in body, body
    rows: list[dict[str, Any]] = body["data"]["allocationHistory"]
    return rows


def test_admin_sees_every_change_newest_first_with_before_and_after(server: Server) -> None:
    rows = history(server, "admin")
    assert [r["position"] for r in rows] == sorted((r["position"] for r in rows), reverse=True)
    o2, o1 = rows[0], rows[1]
    assert (o2["allocation"], o2["shareBefore"], o2["shareAfter"], o2["actor"]) == ("o2", None, 0.1, "root")
    assert (o1["allocation"], o1["shareBefore"], o1["shareAfter"], o1["reason"]) == ("o1", 1.0, 0.9,
                                                                                      "new ops project")
    quota = rows[2]
    assert (quota["allocation"], quota["shareBefore"], quota["shareAfter"]) == ("a2", 0.3, 0.3)
    assert (quota["debugQuotaBefore"], quota["debugQuotaAfter"], quota["debugQuotaSet"]) == (None, 4, True)
    a1 = next(r for r in rows if r["allocation"] == "a1" and r["actor"] == "maria")
    assert (a1["shareBefore"], a1["shareAfter"], a1["reason"], a1["parent"]) == (0.6, 0.7, "a1 has a deadline",
                                                                                "team-a")
    assert isinstance(a1["recordedAt"], float)
    assert {r["allocation"] for r in rows} >= {"research", "ops", "team-a", "team-b", "a1", "a2", "b1", "o1", "o2"}


@pytest.mark.parametrize(("role", "under", "allocations"), [
    ("manager", None, {"team-a", "a1", "a2"}),
    ("manager", "a2", {"a2"}),
    ("manager", "ops", set()),
    ("manager", "research", set()),
    ("researcher", None, {"a1"}),
    ("other", None, {"b1"}),
    ("auditor", "ops", {"ops", "o1", "o2"}),
])
def test_a_principal_sees_only_changes_inside_its_scopes(server: Server, role: str, under: str | None,
                                                         allocations: set[str]) -> None:
    assert {r["allocation"] for r in history(server, role, under)} == allocations


def test_a_manager_outside_the_subtree_is_recorded_as_denied(server: Server) -> None:
    assert history(server, "manager", "ops") == []
    denials = server.gql("{ accessDenials { edges { operation target } } }", token=server.tokens["admin"])
    assert {"operation": "allocationHistory", "target": "allocation:ops"} in \
        denials["data"]["accessDenials"]["edges"]


def test_first_limits_and_bad_first_is_a_clear_error(server: Server) -> None:
    assert len(history(server, "admin", first=2)) == 2
    body = server.gql(QUERY, {"first": 0}, server.tokens["admin"])
    assert "'first' must be between 1" in body["errors"][0]["message"]


def steward(server: Server, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_TOKEN": server.tokens[role], "STEWARD_API_URL": server.url, "TZ": "Asia/Tokyo",
                        "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_tree_history_is_the_query_in_local_time(server: Server) -> None:
    table = steward(server, "manager", "tree", "history")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["WHEN", "ALLOCATION", "NAME", "PARENT"]  # the display name since ADR 0055
    assert "JST" in lines[1] and "default -> 4" in lines[1] and "debug for a2" in lines[1]
    assert any("0.600 -> 0.700" in line and "a1 has a deadline" in line for line in lines)
    assert not any(" o1 " in line or " ops " in line for line in lines)
    as_json = json.loads(steward(server, "manager", "tree", "history", "a1", "--json").stdout)
    assert {r["allocation"] for r in as_json} == {"a1"}
    outside = steward(server, "manager", "tree", "history", "ops")
    assert (outside.returncode, outside.stdout.strip()) == (0, "no allocation changes under 'ops' that you may see")
    bad = steward(server, "manager", "tree", "history", "--limit", "0")
    assert bad.returncode == 2 and "--limit must be between 1 and 500" in bad.stderr
