"""The CLI's submit preview and debug quotas, as a real client of a real API server (the `steward` entry
point in a subprocess): `submit` says whether the job runs funded or unfunded and why (a line in the table,
a field in --output json), `submit --preview` records nothing, `tree quota` / `tree apply`'s `debug_quota`
set quotas, `tree show` shows them, and `why` shows a debug job's qualification. Bad input: one line on
stderr, exit 2."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.domain.commands import ExplainWaiting, SubmitJob
from tests.unit.api.harness import Server, serve
from tests.unit.api.test_cli_on_api import steward


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("cli-outlook"))) as s:
        yield s


def test_submit_prints_why_the_job_will_run_unfunded(server: Server) -> None:
    table = steward(server, "researcher", "submit", "-p", "a1", "--min-runtime", "600", "--", "train")
    assert table.returncode == 0, table.stderr
    assert "will run unfunded" in table.stdout and "no allocation left: 'a1' has 4 of its 2.88" in table.stdout
    done = steward(server, "researcher", "submit", "-p", "a1", "-o", "json", "--", "train")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["outlook"]["reason"], out["outlook"]["funded"], out["state"]) == ("unfunded_by_request", False,
                                                                                  "QUEUED")


def test_submit_preview_records_nothing(server: Server) -> None:
    head = server.store.head()
    done = steward(server, "admin", "submit", "--preview", "-p", "a2", "--min-runtime", "600", "--class", "debug",
                   "--", "x")
    assert done.returncode == 0, done.stderr
    assert "funded: protected for 10m" in done.stdout
    assert "debug: qualified: inside 'a2' debug quota of 4 GPUs" in done.stdout  # the default's floor
    assert server.store.head() == head


def test_a_manager_sets_and_shows_a_debug_quota(server: Server) -> None:
    done = steward(server, "manager", "tree", "quota", "a2", "3", "--reason", "review week")
    assert done.returncode == 0, done.stderr
    shown = steward(server, "manager", "tree", "show")
    cells = {ln.split()[0]: re.split(r"\s{2,}", ln.strip()) for ln in shown.stdout.splitlines() if ln.strip()}
    assert cells["a2"][-2:] == ["3 (set)", "-"]  # the debug quota, then "pinned to" (none)
    assert cells["a1"][-2].endswith("(default)")
    back = steward(server, "manager", "tree", "quota", "a2", "default", "--reason", "review over")
    assert back.returncode == 0, back.stderr


@pytest.mark.parametrize(("who", "args", "says"), [
    ("manager", ["a2", "1.5"], "'1.5' is not a whole number of GPUs"),
    ("manager", ["a2", "-1"], "a debug quota is 0 or more GPUs, got -1"),
    ("manager", ["b1", "2"], "not authorised"),
    ("admin", ["ghost", "2"], "rejected (invalid_allocation): 'ghost' is not a child of 'cluster'"),
])
def test_bad_quotas_are_one_line_and_exit_2(server: Server, who: str, args: list[str], says: str) -> None:
    done = steward(server, who, "tree", "quota", "--reason", "x", "--", *args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_tree_apply_sets_debug_quotas_and_refuses_bad_ones(server: Server, tmp_path: Path) -> None:
    good = tmp_path / "tree.yaml"
    good.write_text("tree:\n  research:\n    share: 0.6\n    children:\n      team-a:\n        share: 0.5\n"
                    "        children:\n          a1: {share: 0.6, debug_quota: 2}\n          a2: 0.4\n"
                    "      team-b: {share: 0.5, children: {b1: 1.0}}\n  ops: {share: 0.4, children: {o1: 1.0}}\n")
    done = steward(server, "admin", "tree", "apply", str(good), "-o", "json")
    assert done.returncode == 0, done.stderr
    applied = {r["parent"]: r for r in json.loads(done.stdout)["applied"]}
    assert applied["team-a"]["debug_quotas"] == {"a1": 2}
    bad = tmp_path / "bad.yaml"
    bad.write_text("tree:\n  research: {share: 0.6, debug_quota: -2}\n")
    refused = steward(server, "admin", "tree", "apply", str(bad))
    assert refused.returncode == 2
    assert "tree.research: debug_quota must be >= 0 GPUs, got -2" in refused.stderr


def test_why_shows_a_debug_jobs_qualification(server: Server) -> None:
    server.record([SubmitJob("dbg", "a1", 1, 300, ["x"], job_class="debug")], actor="alice")
    quota = {"qualified": False, "reason": "over_quota", "quota_gpus": 1, "in_use_gpus": 1, "ahead_gpus": 0}
    server.record([ExplainWaiting({"dbg": {"reason": "insufficient_capacity", "text": "needs 1 more GPU",
                                           "blocking_gpus": 1, "evidence": {"debug_quota": quota}}})],
                  actor="scheduler")
    done = steward(server, "researcher", "why", "dbg")
    assert done.returncode == 0, done.stderr
    assert "debug quota: not qualified (over_quota): quota 1 GPUs, 1 in use, 0 waiting ahead" in done.stdout
