"""Time travel of the budget report (issue 19): `budgetReport(position:)` and `budgetReport(at:)` answer the
figures of the log up to a position, to the time it was recorded (or to the asked time), the same whenever
they are asked and equal to the budget module's own arithmetic over those events; a position past the head
or a time before the log starts is refused with a reason, never answered with a wrong state. The live answer
says the time it runs to (`asOf`), so two reads of it at different clocks can be told apart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.api.figures import OVERVIEW_TYPES
from steward.domain import budget
from steward.domain.commands import ReportJobExited
from tests.unit.api.harness import Server, serve

REPORT = """query($p: BigInt, $at: Float) { budgetReport(periodS: 3600, periods: 3, position: $p, at: $at) {
  position asOf pinned head periods { periodId start end current recorded
  allocations { name owed delivered demand entitled } } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("budget-tt"))) as s:
        time.sleep(0.05)  # the jobs run a little; then one ends, so a later position has different figures
        s.record([ReportJobExited("a1-run", 1, 0)], actor="executor")
        yield s


def ask(server: Server, **kw: Any) -> dict[str, Any]:
    return server.gql(REPORT, kw, server.tokens["admin"])


def log_upto(server: Server, position: int) -> tuple[list[tuple[str, dict[str, Any], float]], float]:
    recs = [r for r in server.store.read(to=position)]
    hist = [(r.type, dict(r.payload), r.recorded_at) for r in recs if r.type in OVERVIEW_TYPES]
    return hist, recs[-1].recorded_at


def test_a_pinned_report_is_the_budget_modules_figures_of_the_log_up_to_that_position(server: Server) -> None:
    head = server.store.head()
    for position in (head - 3, head - 1, head):
        body = ask(server, p=position)
        assert not body.get("errors"), body
        rep = body["data"]["budgetReport"]
        hist, recorded = log_upto(server, position)
        assert (rep["position"], rep["pinned"], rep["head"], rep["asOf"]) == (position, True, head, recorded)
        current = rep["periods"][0]
        assert current["current"] and current["end"] == recorded
        expected, _capacity = budget.period_figures(hist, current["start"], current["end"])
        rows = {a["name"]: a for a in current["allocations"]}
        assert rows and set(rows) <= set(expected) | {"cluster"}
        for name, a in rows.items():
            e = expected.get(name, dict.fromkeys(budget.FIGURES, 0.0))
            assert (a["owed"], a["delivered"], a["demand"], a["entitled"]) == pytest.approx(
                (e["owed_gpu_s"], e["delivered_gpu_s"], e["demand_gpu_s"], e["entitled_gpu_s"]), abs=1e-6), name
        time.sleep(0.02)
        assert ask(server, p=position) == body  # the same answer later: a function of the log alone


def test_a_date_pins_the_events_recorded_by_then_and_runs_the_figures_to_that_time(server: Server) -> None:
    recs = server.store.read()
    at = recs[-2].recorded_at + 0.001  # before the last event (the job ended 50 ms later)
    target = max(r.position for r in recs if r.recorded_at <= at)
    rep = ask(server, at=at)["data"]["budgetReport"]
    assert (rep["position"], rep["asOf"], rep["pinned"]) == (target, at, True)
    assert rep["periods"][0]["end"] == at


def test_the_live_report_says_the_time_it_runs_to(server: Server) -> None:
    rep = ask(server)["data"]["budgetReport"]
    assert not rep["pinned"] and rep["position"] == rep["head"] == server.store.head()
    # as of the head (ADR 0075): to the time it was recorded, not the clock (which may be past an event recorded
    # before it and not committed yet), and the same figures as the report pinned to that position
    (last,) = server.store.read(after=rep["head"] - 1, to=rep["head"])
    assert rep["asOf"] == last.recorded_at and rep["periods"][0]["end"] == rep["asOf"]
    pinned = ask(server, p=rep["head"])["data"]["budgetReport"]
    assert pinned["periods"] == rep["periods"] and pinned["asOf"] == rep["asOf"]


@pytest.mark.parametrize(("kw", "message"), [
    ({"p": 0}, "'position' must be 1 or more, got 0"),
    ({"p": 10**9}, "position 1000000000 is past the log's head"),
    ({"at": 1.0}, "nothing was recorded at or before 1970-01-01T00:00:01Z: the log starts later"),
    ({"p": 1, "at": 1.0}, "give 'position' or 'at', not both"),
    ({"at": 4e9}, "'at' is in the future"),
])
def test_a_position_or_time_outside_the_log_is_refused_with_the_reason(server: Server, kw: dict[str, Any],
                                                                       message: str) -> None:
    body = ask(server, **kw)
    assert body["data"] is None or body["data"].get("budgetReport") is None
    assert message in body["errors"][0]["message"], body


def test_the_cli_prints_the_pinned_report_and_refuses_a_moment_outside_the_log(server: Server) -> None:
    import json
    import os
    import subprocess
    import sys

    def steward(*args: str) -> subprocess.CompletedProcess[str]:
        env = os.environ | {"STEWARD_TOKEN": server.tokens["admin"], "STEWARD_API_URL": server.url,
                            "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
        proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "report", "budget", "--period-hours", "1",
                               "--periods", "3", *args], capture_output=True, text=True, timeout=120, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    position = server.store.head() - 1
    done = steward("--position", str(position), "--output", "json")
    assert done.returncode == 0, done.stderr
    api = ask(server, p=position)["data"]["budgetReport"]
    cli = json.loads(done.stdout)
    assert (cli["position"], cli["asOf"], cli["pinned"]) == (position, api["asOf"], True)
    assert [[(a["name"], a["owed"], a["delivered"]) for a in p["allocations"]] for p in cli["periods"]] == \
        [[(a["name"], a["owed"], a["delivered"]) for a in p["allocations"]] for p in api["periods"]]
    past = steward("--position", str(10**9))
    assert past.returncode != 0 and "past the log's head" in past.stderr and len(past.stderr.splitlines()) == 1
    both = steward("--position", "1", "--at", "2026-12-01T00:00:00Z")
    assert both.returncode == 2 and "give --position or --at, not both" in both.stderr
    zero = steward("--position", "0")
    assert zero.returncode == 2 and "--position must be 1 or more, got 0" in zero.stderr
