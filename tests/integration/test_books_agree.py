"""One set of books through the whole stack (issue 19): for the same log and window, the GraphQL answers
(`allocations`, `budgetReport`), the CLI's JSON (`steward tree show`, `steward report budget`) and the
budget module's own computation over the recorded events (`steward.domain.budget.period_figures`, what the
period close records) give the same owed, delivered, demand and entitled figures, allocation by allocation;
each surface states the window or period it is over, and a ratio is the ratio as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from steward.api.figures import OVERVIEW_TYPES
from steward.domain import budget
from tests.integration.conftest import steward
from tests.integration.test_api_flows import JOB, PAYLOAD, SCENARIO, Client, mint

pytestmark = pytest.mark.integration

EVENTS = """query($after: String, $filter: EventFilter!) { auditEvents(first: 500, after: $after, filter: $filter) {
  edges { cursor node { position type payload recordedAt } } pageInfo { hasNextPage endCursor } } }"""
ALLOCATIONS = """query($w: Float!) { allocations(windowS: $w) { name owed delivered demandInWindow entitledInWindow
  usageInWindow deliveredOverOwed overDelivered windowStart windowEnd window } }"""
REPORT = """query { budgetReport(periodS: 3600, periods: 3) { position csv periods { periodId start end current
  recorded label allocations { name owed delivered demand entitled ratio overDelivered } } } }"""


@pytest.fixture(scope="module")
def clients(stack: dict[str, object]) -> dict[str, Client]:
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    url = str(stack["api"])
    return {"researcher": Client(url, mint("researcher", "ee9e8c", "b436b2")), "auditor": Client(url, mint("auditor")),
            "admin": Client(url, mint("admin"))}


def history(auditor: Client) -> list[tuple[str, dict[str, Any], float]]:
    """The recorded events the budget arithmetic reads, in log order (read through the audit API)."""
    out: list[tuple[int, str, dict[str, Any], float]] = []
    after: str | None = None
    types = [t for t in OVERVIEW_TYPES if t != "PeriodClosed"]
    while True:
        page = auditor(EVENTS, after=after, filter={"types": types})["auditEvents"]
        out += [(e["node"]["position"], e["node"]["type"], e["node"]["payload"], e["node"]["recordedAt"])
                for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"] or not page["edges"]:
            break
        after = page["pageInfo"]["endCursor"]
    return [(t, p, at) for _pos, t, p, at in sorted(out, key=lambda r: int(r[0]))]


def run_work(me: Client) -> None:
    """A few jobs in two projects that run to completion (the log then holds their whole lives)."""
    ids = []
    for project, gpus in (("ee9e8c", 2), ("ee9e8c", 1), ("b436b2", 1)):
        res = me(f"""mutation {{ submitJob(input: {{project: "{project}", gpus: {gpus}, minRuntimeS: 60,
            command: ["bash", "-c", "sleep 2"]}}) {{ {PAYLOAD} ... on JobAccepted {{ job {{ {JOB} }} }} }} }}""")
        ids.append(res["submitJob"]["job"]["id"])
    for job_id in ids:
        states = me.subscribe(f"subscription($id: ID!) {{ jobProgress(id: $id) {{ {JOB} }} }}",
                              until=lambda d: d["jobProgress"]["state"] in ("COMPLETED", "FAILED"), id=job_id)
        assert states[-1]["jobProgress"]["state"] == "COMPLETED", states


def assert_books(rows: list[dict[str, Any]], expected: dict[str, dict[str, float]], surface: str,
                 keys: tuple[str, str, str, str]) -> None:
    """Every allocation of a surface has the budget module's figures (owed, delivered, demand, entitled)."""
    zero = dict.fromkeys(budget.FIGURES, 0.0)
    assert rows, surface
    for a in rows:
        e = expected.get(a["name"], zero)
        got = tuple(float(a[k]) for k in keys)
        want = (e["owed_gpu_s"], e["delivered_gpu_s"], e["demand_gpu_s"], e["entitled_gpu_s"])
        assert got == pytest.approx(want, rel=1e-9, abs=1e-6), (surface, a["name"])


def test_graphql_the_cli_and_the_budget_module_agree_allocation_by_allocation(clients: dict[str, Client]) -> None:
    run_work(clients["researcher"])
    admin = clients["admin"]
    window_s = 24 * 3600.0
    answers = {"graphql": admin(ALLOCATIONS, w=window_s)["allocations"],
               "cli": json.loads(steward("tree", "show", "--window-hours", "24", "--output", "json").stdout)}
    reports = {"graphql": admin(REPORT)["budgetReport"],
               "cli": json.loads(steward("report", "budget", "--period-hours", "1", "--periods", "3",
                                         "--output", "json").stdout)}
    log = history(clients["auditor"])

    for surface, rows in answers.items():
        w0, w1 = rows[0]["windowStart"], rows[0]["windowEnd"]
        assert w1 - w0 == window_s and rows[0]["window"] == "last day", surface
        expected, _capacity = budget.period_figures(log, w0, w1)
        assert_books(rows, expected, surface, ("owed", "delivered", "demandInWindow", "entitledInWindow"))
        for a in rows:
            assert a["usageInWindow"] == a["delivered"]
            assert a["deliveredOverOwed"] == budget.ratio(a["delivered"], a["owed"])  # as it is, never capped
            assert a["overDelivered"] == budget.over_delivered(a["deliveredOverOwed"])
    # the work is done and inside both windows: the two surfaces give the same delivered figures
    delivered = {s: {a["name"]: a["delivered"] for a in rows} for s, rows in answers.items()}
    assert delivered["graphql"] == pytest.approx(delivered["cli"])
    assert delivered["graphql"]["ee9e8c"] > 0 and delivered["graphql"]["b436b2"] > 0

    for surface, rep in reports.items():
        assert rep["periods"][0]["current"] and rep["periods"][0]["label"], surface
        for p in rep["periods"]:
            if p["recorded"]:
                continue  # a closed period is what its PeriodClosed event recorded
            expected, _capacity = budget.period_figures(log, p["start"], p["end"])
            assert_books(p["allocations"], expected, f"{surface} {p['periodId']}", ("owed", "delivered", "demand",
                                                                                   "entitled"))
        assert rep["csv"].splitlines()[0].startswith("period_id,period,start,end,current,recorded,allocation")
    csv_out = steward("report", "budget", "--period-hours", "1", "--periods", "3", "--csv").stdout
    assert csv_out.splitlines()[0] == reports["graphql"]["csv"].splitlines()[0]
    assert any(line.split(",")[6] == "ee9e8c" for line in csv_out.splitlines()[1:])
