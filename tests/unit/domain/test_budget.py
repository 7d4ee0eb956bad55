"""The budget arithmetic (DESIGN.md "Owed vs delivered", "Usage window"; issue 19 "One home for each rule"):
the rules, and a check that no other module computes owed a second time."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain import budget

SERVICES = Path(__file__).resolve().parents[3] / "services" / "steward"


@pytest.mark.parametrize(("entitled", "demand", "owed"), [
    (4.0, 2.0, 2.0),  # demand below the entitlement: owed what it asked for
    (4.0, 16.0, 4.0),  # demand above: owed its entitlement
    (4.0, 0.0, 0.0),  # no demand, nothing owed
])
def test_owed_is_the_smaller_of_entitlement_and_demand(entitled: float, demand: float, owed: float) -> None:
    assert budget.owed_gpu_s(entitled, demand) == owed


@pytest.mark.parametrize(("delivered", "owed", "ratio", "over"), [
    (2.0, 4.0, 0.5, False), (4.0, 4.0, 1.0, False), (8.0, 4.0, 2.0, True), (3.0, 0.0, None, False),
])
def test_the_ratio_is_shown_as_it_is(delivered: float, owed: float, ratio: float | None, over: bool) -> None:
    assert budget.ratio(delivered, owed) == ratio
    assert budget.over_delivered(budget.ratio(delivered, owed)) is over


def test_the_cluster_figure_credits_each_allocation_at_most_what_it_was_owed() -> None:
    # a got twice what it was owed, b half: the surplus of a does not hide b's shortfall
    assert budget.delivered_of_owed([(4.0, 8.0), (4.0, 2.0)]) == pytest.approx((4 + 2) / 8)
    assert budget.delivered_of_owed([]) is None
    assert budget.credited_fraction(8.0, 4.0) == 1.0


@given(st.lists(st.floats(0, 1e6), max_size=48), st.floats(0, 1e6))
def test_owed_over_hours_never_exceeds_demand_nor_entitlement(demand: list[float], entitled: float) -> None:
    owed = budget.owed_over_hours(entitled, demand)
    assert owed <= sum(demand) + 1e-6 and owed <= entitled * len(demand) + 1e-6


def test_window_and_period_bounds() -> None:
    assert budget.window_bounds(1000.0, 100.0) == (900.0, 1000.0)
    assert budget.current_period(90_000.0, 86_400.0) == (86_400.0, 90_000.0)
    assert budget.period_bounds(90_000.0, 86_400.0) == (0.0, 86_400.0)
    assert budget.describe_interval(0.0, 7 * 86_400.0, now=7 * 86_400.0) == "last 7 days"
    assert budget.describe_interval(1_764_547_200.0, 1_764_633_600.0) == "1 Dec 00:00 – 2 Dec 00:00 UTC"


# -- one home: a second copy of the owed rule fails here ----------------------------------------------------

_NAMES = ("entitl", "demand", "owed", "cap_h")
# min() over these names that is not the owed rule, with why
_OTHER_RULES = {
    "policy/ordering.py": "ADR 0016's usable entitlement (min(entitlement, demand ÷ capacity)), an ordering rule",
    "sim/metrics.py": "occupancy's min(capacity, demand) per hour (the cluster's, not an allocation's owed)",
}


def test_only_the_budget_module_takes_the_smaller_of_entitlement_and_demand() -> None:
    found: list[str] = []
    for path in sorted(SERVICES.rglob("*.py")):
        rel = path.relative_to(SERVICES).as_posix()
        if rel == "domain/budget.py":
            continue
        src = path.read_text()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min":
                text = ast.get_source_segment(src, node) or ""
                if any(n in text.lower() for n in _NAMES):
                    found.append(f"{rel}:{node.lineno}: {text}")
    allowed = [f for f in found if f.split(":")[0] in _OTHER_RULES and "owed" not in f.split(": ", 1)[1]]
    assert [f for f in found if f not in allowed] == []
    assert len(allowed) == len(_OTHER_RULES)  # each exception still exists (else drop it from the list)


def test_the_readers_call_the_budget_module() -> None:
    """The API's figures, the what-if, the simulator's metrics, report and scenario tree, the scheduler's
    tree, the period close and the period-close workflow import their arithmetic from `steward.domain.budget`."""
    readers = ["api/figures.py", "api/whatif.py", "sim/metrics.py", "sim/report.py", "sim/scenario.py",
               "domain/periods.py", "policy/tree.py"]
    for rel in readers:
        tree = ast.parse((SERVICES / rel).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                     for a in n.names}
        assert any(m and m.startswith("steward.domain.budget") for m in imported), rel
    workflow = (SERVICES.parents[1] / "workflows" / "steward_workflows" / "facts.py").read_text()
    assert "from steward.domain.budget import period_figures" in workflow


RUN_SPANS = [
    # JobStarted payload, end kind, end payload, started recorded at, ended recorded at -> delivered span
    ({}, "JobCompleted", {}, 100.0, 160.0, (100.0, 160.0)),  # no times of their own: the record times
    ({"started_at": 98.5}, "JobCompleted", {"ended_at": 157.0}, 100.0, 160.0, (98.5, 157.0)),  # Slurm's times
    ({"started_at": 98.5}, "JobFailed", {"ended_at": 159.0}, 100.0, 160.0, (98.5, 159.0)),
    ({"started_at": 98.5}, "JobPreempted", {"evidence": {"ended_at": 150.0, "stopped_at": 160.0}}, 100.0, 160.0,
     (98.5, 150.0)),  # the executor's end, not the ledger's stopped_at
    ({"started_at": 98.5}, "JobLost", {}, 100.0, 160.0, (98.5, 160.0)),  # a loss has no end time: its record
    ({"started_at": 105.0}, "JobCompleted", {"ended_at": 170.0}, 100.0, 160.0, (100.0, 160.0)),  # a clock ahead
    ({"started_at": 98.5}, "JobCompleted", {"ended_at": 90.0}, 100.0, 160.0, (98.5, 160.0)),  # before its start
    ({"started_at": True}, "JobCompleted", {"ended_at": "157"}, 100.0, 160.0, (100.0, 160.0)),  # no times
]


@pytest.mark.parametrize(("started", "kind", "ended", "start_at", "end_at", "span"), RUN_SPANS)
def test_a_run_is_delivered_from_the_executor_s_start_to_its_end_within_their_records(
        started: dict[str, Any], kind: str, ended: dict[str, Any], start_at: float, end_at: float,
        span: tuple[float, float]) -> None:
    start = budget.run_start(started, start_at)
    assert (start, budget.run_end(kind, ended, end_at, start)) == span
    history: list[tuple[str, dict[str, Any], float]] = [
        ("AllocationsSet", {"parent": "cluster", "shares": {"p": 1.0}}, 0.0),
        ("NodeRegistered", {"node_id": "n", "gpus": 8}, 0.0),
        ("JobSubmitted", {"job_id": "j", "project": "p", "gpus": 2}, 50.0),
        ("JobStarted", {"job_id": "j"} | started, start_at), (kind, {"job_id": "j"} | ended, end_at)]
    figures, _ = budget.period_figures(history, 0.0, 3600.0)
    assert figures["p"]["delivered_gpu_s"] == pytest.approx(2 * (span[1] - span[0]))
