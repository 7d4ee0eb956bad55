"""Choosing notifications through the API, and operators' list of deliveries given up (issue 24, ADR 0050),
against a real server (uvicorn, loopback) with the ledger in process. Scopes as in the authorisation matrix:
maria manages team-a (a1, a2), alice works in a1, bob in b1; root is an admin, audrey an auditor."""

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
from steward.domain.commands import RecordDeliveryFailed
from tests.unit.api.harness import Server, serve

SET = """mutation($a: String!, $c: String!, $t: String!, $k: [String!]!, $s: String) {
  setNotifications(allocation: $a, channel: $c, target: $t, kinds: $k, subscriber: $s) {
    __typename
    ... on NotificationsChosen { subscription { subscriber allocation channel target kinds } position }
    ... on NotAuthorised { message }
    ... on InvalidInput { field message }
    ... on Rejected { code reason }
  }
}"""
MINE = "query($s: String) { notificationSubscriptions(subscriber: $s) { subscriber allocation channel target kinds } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("notify-api"))
    api = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, api_denial_burst=100_000)
    with serve(tmp, api) as s:
        yield s


def choose(s: Server, role: str, allocation: str, kinds: list[str], channel: str = "email",
           target: str = "me@lab.example", subscriber: str | None = None) -> dict[str, Any]:
    body = s.gql(SET, {"a": allocation, "c": channel, "t": target, "k": kinds, "s": subscriber}, s.tokens[role])
    assert not body.get("errors"), body
    result: dict[str, Any] = body["data"]["setNotifications"]
    return result


# (case, role, allocation, kinds, channel, target, subscriber, the answer's type)
CASES: list[tuple[str, str, str, list[str], str, str, str | None, str]] = [
    ("a researcher, their project", "researcher", "a1", ["job_failed", "preemption"], "email", "alice@lab.example",
     None, "NotificationsChosen"),
    ("a researcher, another project", "researcher", "b1", ["job_failed"], "email", "alice@lab.example", None,
     "NotAuthorised"),
    ("a researcher, the whole tree", "researcher", "cluster", ["job_failed"], "email", "alice@lab.example", None,
     "NotAuthorised"),
    ("a manager, their subtree", "manager", "team-a", ["share_changed", "burn_forecast"], "webhook",
     "https://hooks.example/T0/B0/x", None, "NotificationsChosen"),
    ("a manager, for someone else", "manager", "a1", ["job_failed"], "email", "x@lab.example", "alice",
     "NotAuthorised"),
    ("an admin, the whole tree for ops", "admin", "cluster", ["job_lost"], "webhook", "http://127.0.0.1:9/ops",
     "ops-team", "NotificationsChosen"),
    ("an unknown kind", "researcher", "a1", ["gossip"], "email", "alice@lab.example", None, "InvalidInput"),
    ("a header in the address", "researcher", "a1", ["job_failed"], "email", "a@x.org\nBcc: b@x.org", None,
     "InvalidInput"),
    ("a webhook that is no URL", "researcher", "a1", ["job_failed"], "webhook", "file:///etc/passwd", None,
     "InvalidInput"),
]


@pytest.mark.parametrize(("case", "role", "allocation", "kinds", "channel", "target", "subscriber", "answer"), CASES,
                         ids=[c[0] for c in CASES])
def test_choosing_notifications(server: Server, case: str, role: str, allocation: str, kinds: list[str],
                                channel: str, target: str, subscriber: str | None, answer: str) -> None:
    before = sum(1 for e in server.store.read() if e.type == "AccessDenied")
    got = choose(server, role, allocation, kinds, channel, target, subscriber)
    assert got["__typename"] == answer, got
    denied = sum(1 for e in server.store.read() if e.type == "AccessDenied") - before
    assert denied == (1 if answer == "NotAuthorised" else 0)
    if answer == "NotificationsChosen":
        sub = got["subscription"]
        assert sub["subscriber"] == (subscriber or {"researcher": "alice", "manager": "maria"}.get(role))
        assert sub["kinds"] == sorted(kinds)
        (ev,) = [e for e in server.store.read(after=got["position"] - 1, limit=1)]
        assert ev.type == "NotificationsSet" and ev.payload["target"] == target


def test_each_lists_their_own_and_an_admin_everyones(server: Server) -> None:
    choose(server, "other", "b1", ["job_lost"], target="bob@lab.example")
    mine = server.gql(MINE, {}, server.tokens["other"])["data"]["notificationSubscriptions"]
    assert [(s["subscriber"], s["allocation"], s["kinds"]) for s in mine] == [("bob", "b1", ["job_lost"])]
    assert server.gql(MINE, {"s": "alice"}, server.tokens["other"])["data"]["notificationSubscriptions"] == []
    everyone = server.gql(MINE, {}, server.tokens["admin"])["data"]["notificationSubscriptions"]
    assert {"bob"} <= {s["subscriber"] for s in everyone}
    # empty kinds stop them
    assert choose(server, "other", "b1", [], target="bob@lab.example")["__typename"] == "NotificationsChosen"
    assert server.gql(MINE, {}, server.tokens["other"])["data"]["notificationSubscriptions"] == []


def test_kinds_are_listed_with_their_words(server: Server) -> None:
    kinds = server.gql("{ notificationKinds { name description } }", {}, server.tokens["researcher"])["data"]
    assert "preemption" in {k["name"] for k in kinds["notificationKinds"]}


FAILED = "{ failedDeliveries { deliveryId channel target kind attempts error position } }"


@pytest.mark.parametrize(("role", "allowed"), [("admin", True), ("auditor", True), ("manager", False),
                                               ("researcher", False)])
def test_failed_deliveries_are_listed_for_operators(server: Server, role: str, allowed: bool) -> None:
    if not any(e.type == "NotificationFailed" for e in server.store.read()):
        server.record([RecordDeliveryFailed("n9-abc", "alice", "webhook", "https://h.example/x", "job_failed", 9, 8,
                                            "the webhook answered HTTP 503")], actor="temporal-worker")
    body = server.gql(FAILED, {}, server.tokens[role])
    if allowed:
        (row,) = body["data"]["failedDeliveries"]
        assert row == {"deliveryId": "n9-abc", "channel": "webhook", "target": "https://h.example/x",
                       "kind": "job_failed", "attempts": 8, "error": "the webhook answered HTTP 503", "position": 9}
    else:
        assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"


def steward(server: Server, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_TOKEN": server.tokens[role], "STEWARD_API_URL": server.url,
                        "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "notify", *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_the_cli_sets_lists_and_stops_notifications(server: Server) -> None:
    done = steward(server, "manager", "set", "team-a", "--webhook", "https://hooks.example/m",
                   "--kinds", "share_changed, burn_forecast", "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["subscription"]["kinds"] == ["burn_forecast", "share_changed"]
    listed = json.loads(steward(server, "manager", "list", "--output", "json").stdout)
    assert {(r["allocation"], r["target"]) for r in listed} >= {("team-a", "https://hooks.example/m")}
    assert steward(server, "manager", "off", "team-a", "--webhook", "https://hooks.example/m").returncode == 0
    listed = json.loads(steward(server, "manager", "list", "--output", "json").stdout)
    assert ("team-a", "https://hooks.example/m") not in {(r["allocation"], r["target"]) for r in listed}


# (case, role, arguments, what the one line on stderr says)
REFUSED: list[tuple[str, str, list[str], str]] = [
    ("no channel", "researcher", ["set", "a1", "--kinds", "job_failed"], "give one of --email"),
    ("two channels", "researcher", ["set", "a1", "--kinds", "job_failed", "--email", "a@x.org", "--webhook",
                                    "https://h.example"], "give one of --email"),
    ("an unknown kind", "researcher", ["set", "a1", "--kinds", "gossip", "--email", "a@x.org"],
     "unknown notification kind(s) gossip"),
    ("another's project", "researcher", ["set", "b1", "--kinds", "job_failed", "--email", "a@x.org"],
     "not authorised"),
    ("failed deliveries as a researcher", "researcher", ["failed"], "may not use 'failedDeliveries'"),
]


@pytest.mark.parametrize(("case", "role", "args", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_the_cli_refuses_in_one_line(server: Server, case: str, role: str, args: list[str], says: str) -> None:
    done = steward(server, role, *args)
    assert done.returncode != 0 and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
