"""`verify` never vouches for what it did not check (issue 19: `verify(toPosition: 99999999)` stopped at the
request limit and answered ok): past its limit it says `truncated`, the last position it checked and how to go
on, and is not ok; a range past the head checks up to the head and says so; the CLI's `--api` walks the whole
range request by request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.api import audit
from tests.unit.api.harness import Server, serve

QUERY = """query($from: BigInt!, $to: BigInt) { verify(fromPosition: $from, toPosition: $to) {
  fromPosition toPosition checked ok firstBadPosition problem truncated askedToPosition head } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("verify"))) as s:
        yield s


def verify(server: Server, start: int, to: int | None) -> dict[str, object]:
    body = server.gql(QUERY, {"from": start, "to": to}, token=server.tokens["auditor"])
    assert not body.get("errors"), body
    result: dict[str, object] = body["data"]["verify"]
    return result


def test_a_range_past_the_limit_is_truncated_and_not_ok(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "VERIFY_LIMIT", 5)
    head = server.store.head()
    assert head > 12
    v = verify(server, 1, 99_999_999)
    assert v == {"fromPosition": 1, "toPosition": 5, "checked": 5, "ok": False, "firstBadPosition": None,
                 "problem": "not checked past position 5: a request checks at most 5 positions; ask again from "
                            "position 6", "truncated": True, "askedToPosition": 99_999_999, "head": head}
    # the head by default is a range too
    assert verify(server, 3, None)["toPosition"] == 7
    # the last piece is whole
    last = verify(server, head - 2, None)
    assert (last["ok"], last["truncated"], last["toPosition"], last["checked"]) == (True, False, head, 3)


def test_a_range_past_the_head_checks_up_to_the_head(server: Server) -> None:
    head = server.store.head()
    # not the first test's range: the API caches an answer per query and head, and that one was answered under
    # a limit of 5
    v = verify(server, 1, 99_999_998)
    assert (v["ok"], v["truncated"], v["toPosition"], v["checked"], v["head"]) == (True, False, head, head, head)


def test_the_cli_walks_the_whole_range_through_the_api(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "VERIFY_LIMIT", 4)
    head = server.store.head()
    env = os.environ | {"STEWARD_TOKEN": server.tokens["auditor"], "STEWARD_API_URL": server.url,
                        "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "audit", "verify", "--api", "--to", "99999999",
                           "--output", "json"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["ok"], report["events"], report["head"]) == (True, head, head)
    assert report["requests"] == -(-head // 4)


@pytest.mark.parametrize(("case", "start", "to", "problem"), [
    ("toPosition before fromPosition", 10, 3, "toPosition 3 is before fromPosition 10: no position to check"),
    ("fromPosition 0", 0, None, "fromPosition must be 1 or more (the first position), got 0"),
    ("fromPosition past the head", 10_000, None, "fromPosition 10000 is past the log's head ({head}): no position"),
])
def test_a_range_that_names_no_position_is_refused_by_the_rule_the_cli_asks(server: Server, case: str, start: int,
                                                                             to: int | None, problem: str) -> None:
    """One rule for the API and the CLI (`steward.audit.verify.range_problem`): before it, the API took
    `toPosition = fromPosition - 1` and the CLI refused it, and a `--from` past the head answered ok."""
    body = server.gql(QUERY, {"from": start, "to": to}, token=server.tokens["auditor"])
    (error,) = body["errors"]
    assert problem.format(head=server.store.head()) in error["message"], body


def test_a_range_starting_just_past_the_head_is_checked_empty(server: Server) -> None:
    """An auditor asking what is new since its last check, with nothing new: checked, empty, ok."""
    head = server.store.head()
    v = verify(server, head + 1, None)
    assert (v["ok"], v["checked"], v["toPosition"], v["head"]) == (True, 0, head, head)
