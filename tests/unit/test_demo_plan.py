"""The demo's replay plan (steward.demo.plan): time compression of a trace slice, the warm start, the
scaled policy and contract timings, the sessions; and the simulated executor reading the sample job's
length, so that a compressed job lasts as long on a simulated node as on the local one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.demo.plan import (
    DemoOptions,
    PlanError,
    plan_sessions,
    plan_slice,
    policy_settings,
    sample_command,
    session_projects,
)
from steward.executor.sim import virtual_duration
from steward.sim.scenario import Scenario, ScenarioPolicy, scenario_from_mapping

HOUR = 3600.0
DAY = 86400.0


def scenario(tmp_path: Path, rows: list[tuple[str, float, float, int, str]]) -> Scenario:
    """A two-node scenario whose trace holds `rows` = (id, submit_s, duration_s, gpus, tenant)."""
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_s,duration_s,gpus,tenant,class,min_runtime_s,resumable\n" + "".join(
        f"{i},{s},{d},{g},{t},batch,3600,1\n" for i, s, d, g, t in rows))
    raw = {"name": "t", "trace": "trace.csv", "cluster": {"nodes": 2, "gpus_per_node": 8},
           "tree": {"a": {"share": 0.6, "children": {"a1": 0.5, "a2": 0.5}}, "b": {"share": 0.4,
                                                                                  "children": {"b1": 1.0}}}}
    return scenario_from_mapping(raw, tmp_path / "s.yaml", trace=trace)


@pytest.mark.parametrize(("row", "expected"), [
    # (id, submit, duration, gpus, tenant) -> (at_s, duration_s, warm) at S=100, slice [1 day, 1 day + 2 h)
    (("before-done", DAY - 2 * HOUR, HOUR, 1, "a1"), None),  # ended before the slice
    (("running", DAY - HOUR, 3 * HOUR, 2, "a1"), (0.0, 2 * HOUR / 100, True)),  # warm: what is left of it
    (("first", DAY, HOUR, 1, "b1"), (0.0, HOUR / 100, False)),
    (("later", DAY + HOUR, 600.0, 1, "a2"), (HOUR / 100, 6.0, False)),
    (("after", DAY + 2 * HOUR, HOUR, 1, "a2"), None),  # past the slice's end
    (("no-allocation", DAY + 60, HOUR, 1, "zz"), None),  # its tenant is not in the tree
])
def test_a_trace_job_is_submitted_at_its_compressed_time(tmp_path: Path, row: tuple[str, float, float, int, str],
                                                         expected: tuple[float, float, bool] | None) -> None:
    sc = scenario(tmp_path, [row])
    subs, _ = plan_slice(sc, DemoOptions(speed=100, start_day=1, hours=2), "t")
    got = [(s.at_s, s.duration_s, s.warm) for s in subs]
    assert got == ([] if expected is None else [pytest.approx(expected)])
    if subs:
        assert subs[0].job_id == f"t-{row[0]}" and subs[0].min_runtime_s == pytest.approx(36.0)


def test_the_warm_start_stops_at_its_share_of_the_cluster(tmp_path: Path) -> None:
    rows = [(f"j{i}", DAY - HOUR + i, 10 * HOUR, 4, "a1") for i in range(10)]  # 40 GPUs running at the start
    sc = scenario(tmp_path, rows)
    subs, _ = plan_slice(sc, DemoOptions(speed=100, start_day=1, hours=1, warm_factor=1.5), "t")
    assert [s.trace_id for s in subs] == [f"j{i}" for i in range(6)]  # 24 of 16 x 1.5 GPUs, oldest first


def test_tenants_without_an_allocation_are_reported(tmp_path: Path) -> None:
    sc = scenario(tmp_path, [("x", DAY + 1, HOUR, 1, "zz"), ("y", DAY + 2, HOUR, 1, "a1")])
    subs, skipped = plan_slice(sc, DemoOptions(speed=100, start_day=1, hours=1), "t")
    assert [s.trace_id for s in subs] == ["y"] and [j.job_id for j in skipped] == ["x"]


@pytest.mark.parametrize(("options", "field"), [
    (DemoOptions(speed=0.5), "--speed"),
    (DemoOptions(hours=0), "--hours"),
    (DemoOptions(start_day=-1), "--start-day"),
    (DemoOptions(session_cap_h=9), "--session-cap-hours"),
    (DemoOptions(sessions=-1), "--sessions"),
    (DemoOptions(warm_factor=float("nan")), "--warm"),
])
def test_bad_options_are_refused_by_name(options: DemoOptions, field: str) -> None:
    with pytest.raises(PlanError, match=field):
        options.check()


def test_policy_timings_are_divided_by_the_speed() -> None:
    policy = ScenarioPolicy()
    settings = policy_settings(policy, DemoOptions(speed=120))
    assert settings == {"window_s": 5040.0, "max_min_runtime_s": 240.0, "session_cap_s": 240.0,
                        "session_warnings_s": [15.0, 2.5], "checkpoint_interval_s": 15.0,
                        "restart_overhead_s": 0.5, "preemption_grace_s": 1.0,
                        "settle_s": 2.5, "claim_hold_s": 0.5, "preemption_gain_horizon_s": 15.0}


def test_sessions_take_turns_across_divisions(tmp_path: Path) -> None:
    sc = scenario(tmp_path, [("y", DAY, HOUR, 1, "a1")])
    assert session_projects(sc, 4) == ["a1", "b1", "a2", "a1"]
    sessions = plan_sessions(sc, DemoOptions(speed=120, sessions=2, session_cap_h=1, restore_after_min=10), "t")
    assert [(s.session_id, s.project, s.cap_s, s.restore_after_s) for s in sessions] == [
        ("t-session-1", "a1", 30.0, 5.0), ("t-session-2", "b1", 30.0, 5.0)]


@given(st.floats(min_value=0.001, max_value=1e7, allow_nan=False))
def test_a_compressed_job_lasts_as_long_on_the_simulated_executor_as_its_steps(duration: float) -> None:
    """The sample job runs --steps x --step-s real seconds; the simulated executor reads the same length."""
    command = sample_command(duration)
    simulated = virtual_duration(command, {}, default_s=-1.0)
    assert simulated == pytest.approx(duration, abs=0.5 + 1e-3)


def test_a_session_runs_until_stopped() -> None:
    assert virtual_duration(sample_command(0.0), {}, default_s=3600.0) == 3600.0
