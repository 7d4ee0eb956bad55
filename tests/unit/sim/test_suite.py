"""The scenario suite (issue 18): the table (mean and spread of every numeric figure), the checks for
steward against the baselines, Philly's seeds, and a CI slice of the suite itself (two small generated
scenarios, two policies, one seed) with broad fixed ranges: the policy is being reworked, so no exact
policy figure is pinned here."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from steward.sim import policies
from steward.sim.cli import main
from steward.sim.scenario import load_scenario
from steward.sim.suite import (
    FAIL,
    NA,
    PASS,
    SuiteResult,
    SuiteScenario,
    aggregate,
    check_scenario,
    flatten,
    jitter,
    markdown,
    plan,
    resolve_policies,
    run_suite,
)
from tests.unit.sim.builders import job, write_scenario

SLICE = (
    SuiteScenario("bursty-n4-l1.5", "bursty", 4, 1.5, jobs=150),
    SuiteScenario("unfunded-many-n4-l2", "unfunded-many", 4, 2.0, jobs=150),
)
CRITERIA = 7


def figures(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "policy": "x", "scenario": "s", "jobs": 10, "occupancy": 0.95, "owed_delivered_mean": 0.99,
        "owed_delivered_min": 0.9, "wait_p90_s": {"debug": 40.0, "batch": 100.0, "large": None},
        "preemptions": 100, "lost_gpu_hours_fraction": 0.005, "protection_violations": 0, "wall_s": 1.0,
    }
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), Mapping):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return base


def table(runs: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return aggregate([("s", policy, seed, figs) for policy, seeds in runs.items() for seed, figs in enumerate(seeds)])


def status(check: Mapping[str, Any], prefix: str) -> str:
    [c] = [c for c in check["criteria"] if c["criterion"].startswith(prefix)]
    return str(c["status"])


def test_flatten_keeps_numbers_under_dotted_names() -> None:
    flat = flatten(figures(extra={"rho": {"p50": 1.2, "p99": None}}, flag=True, name="n"))
    assert flat["wait_p90_s.debug"] == 40.0 and flat["extra.rho.p50"] == 1.2
    assert "wait_p90_s.large" not in flat and "extra.rho.p99" not in flat
    assert "flag" not in flat and "name" not in flat and "policy" not in flat


def test_the_table_has_mean_min_max_of_every_figure_and_new_figures_appear_by_themselves() -> None:
    rows = table({"steward": [figures(occupancy=0.9), figures(occupancy=1.0, flaps=4)]})
    [row] = rows
    assert row["seeds"] == [0, 1]
    assert row["figures"]["occupancy"] == {"mean": 0.95, "min": 0.9, "max": 1.0, "n": 2}
    assert row["figures"]["flaps"] == {"mean": 4.0, "min": 4.0, "max": 4.0, "n": 1}


@pytest.mark.parametrize(("mine", "theirs", "expected"), [
    ([0.95, 0.95], [0.90, 0.92], PASS),  # above
    ([0.90, 0.94], [0.92, 0.93], PASS),  # below in the mean, but within the seeds' spread
    ([0.88, 0.90], [0.92, 0.93], FAIL),  # below every seed of the baseline
    ([0.91], [0.92], FAIL),  # one seed: no spread, strict
])
def test_owed_min_fails_only_outside_the_seeds_spread(mine: list[float], theirs: list[float], expected: str) -> None:
    rows = table({"steward": [figures(owed_delivered_min=v) for v in mine],
                  "ai2": [figures(owed_delivered_min=v) for v in theirs]})
    check = check_scenario("s", rows, 1.5)
    assert status(check, "owed_delivered_min") == expected
    in_spread = "pass (in spread)" in markdown(SuiteResult({}, rows, [check]))
    assert in_spread == (mine == [0.90, 0.94])


@pytest.mark.parametrize(("mine", "best", "expected"), [(0.95, 0.954, PASS), (0.95, 0.956, FAIL)])
def test_occupancy_is_against_the_best_baseline_less_half_a_point(mine: float, best: float, expected: str) -> None:
    rows = table({"steward": [figures(occupancy=mine)], "ai2": [figures(occupancy=0.9)],
                  "fifo-priority": [figures(occupancy=best)]})
    assert status(check_scenario("s", rows, 1.5), "occupancy") == expected


@pytest.mark.parametrize(("mine", "ai2", "expected"), [
    (0.009, 0.001, PASS),  # under the 1 % floor
    (0.012, 0.001, FAIL),
    (0.029, 0.02, PASS),  # under 1.5x ai2's
    (0.031, 0.02, FAIL),
])
def test_lost_work_is_against_max_of_one_percent_and_one_and_a_half_ai2(mine: float, ai2: float, expected: str) -> None:
    rows = table({"steward": [figures(lost_gpu_hours_fraction=mine)], "ai2": [figures(lost_gpu_hours_fraction=ai2)]})
    assert status(check_scenario("s", rows, 1.5), "lost_gpu_hours_fraction") == expected


@pytest.mark.parametrize(("mine", "ai2", "expected"), [(200, 100, PASS), (201, 100, FAIL), (1, 0, FAIL)])
def test_preemptions_are_against_twice_ai2s(mine: int, ai2: int, expected: str) -> None:
    rows = table({"steward": [figures(preemptions=mine)], "ai2": [figures(preemptions=ai2)]})
    assert status(check_scenario("s", rows, 1.5), "preemptions") == expected


def test_criteria_against_ai2_are_na_without_ai2() -> None:
    rows = table({"steward": [figures()], "fair-tree": [figures()]})
    check = check_scenario("s", rows, 1.5)
    assert status(check, "lost_gpu") == NA and status(check, "preemptions") == NA
    assert status(check, "occupancy") == PASS


@pytest.mark.parametrize(("qualified", "load", "expected"), [
    (None, 1.5, NA),  # the figure is not reported
    (25.0, 1.5, PASS),
    (31.0, 1.5, FAIL),
    (31.0, 0.8, NA),  # the cluster is not full
])
def test_the_debug_slo_needs_the_figure_and_a_full_cluster(qualified: float | None, load: float, expected: str) -> None:
    wait = {} if qualified is None else {"debug_qualified": qualified}
    rows = table({"steward": [figures(wait_p90_s=wait)], "ai2": [figures()]})
    assert status(check_scenario("s", rows, load), "wait_p90_s.debug_qualified") == expected


def test_one_protection_violation_on_any_seed_fails() -> None:
    rows = table({"steward": [figures(), figures(protection_violations=1)], "ai2": [figures()]})
    assert status(check_scenario("s", rows, 1.5), "protection_violations") == FAIL


def test_a_baseline_cut_off_on_any_seed_is_left_out_of_the_checks() -> None:
    storm = {"at_cycle": 22000, "at_s": 1e6, "unfinished_jobs": 40}
    rows = table({"steward": [figures(occupancy=0.96)] * 2,
                  "tiresias": [figures(occupancy=0.99), figures(occupancy=0.99, cut_off=storm)],
                  "fair-tree": [figures(occupancy=0.95)] * 2, "ai2": [figures()] * 2})
    check = check_scenario("s", rows, 1.5)
    assert check["left_out"] == ["tiresias"]
    assert status(check, "occupancy") == PASS  # against fair-tree and ai2 only
    assert status(check, "runs to the end") == PASS
    assert "tiresias" in markdown(SuiteResult({}, rows, [check]))


def test_a_cut_off_reference_makes_its_criteria_na() -> None:
    rows = table({"steward": [figures()], "ai2": [figures(cut_off={"at_cycle": 5000})]})
    check = check_scenario("s", rows, 1.5)
    assert status(check, "lost_gpu") == NA and status(check, "preemptions") == NA


def test_steward_cut_off_on_a_seed_fails_running_to_the_end() -> None:
    rows = table({"steward": [figures(), figures(cut_off={"at_cycle": 4000})], "ai2": [figures()]})
    check = check_scenario("s", rows, 1.5)
    assert status(check, "runs to the end") == FAIL and check["left_out"] == []
    [c] = [c for c in check["criteria"] if c["criterion"].startswith("runs to the end")]
    assert c["detail"] == "1 seed(s) stopped at cycle 4000"


def test_without_steward_every_criterion_is_na() -> None:
    check = check_scenario("s", table({"ai2": [figures()]}), 1.5)
    assert len(check["criteria"]) == CRITERIA and {c["status"] for c in check["criteria"]} == {NA}


def test_philly_seed_zero_is_the_trace_and_other_seeds_jitter_a_few_seconds(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, [job(f"j{i}", submit=10 * i) for i in range(50)])
    scenario = load_scenario(path)
    assert jitter(scenario, 0) is scenario
    one, again, two = jitter(scenario, 1), jitter(scenario, 1), jitter(scenario, 2)
    assert one.jobs == again.jobs and one.jobs != two.jobs
    deltas = [b.submit_s - a.submit_s for a, b in zip(scenario.jobs, one.jobs, strict=True)]
    assert all(0 <= d < 5 for d in deltas) and len(set(deltas)) > 40
    assert [j.submit_s for j in one.jobs] == sorted(j.submit_s for j in one.jobs)


def test_a_missing_philly_is_said_and_the_rest_runs(tmp_path: Path) -> None:
    tasks, info, notes = plan(tmp_path, ("steward",), 1, False, [*SLICE, SuiteScenario("philly", None)],
                              philly=tmp_path / "absent.yaml")
    assert notes and "not found" in notes[0]
    assert [e["scenario"] for e in info] == [s.name for s in SLICE]
    assert len(tasks) == 2


def test_two_entries_of_one_family_size_and_load_run_their_own_files(tmp_path: Path) -> None:
    """The heavy unfunded-debug variant has the family, size and load of the suite's unfunded-debug,
    so the generator names its files alike: each entry runs its own (in a folder of its name), not
    the one written last (before ADR 0044 both rows of the table were the heavy variant's)."""
    light = SuiteScenario("ud-light", "unfunded-debug", 4, 2.0, jobs=60)
    heavy = SuiteScenario("ud-heavy", "unfunded-debug", 4, 2.0, jobs=90, params=(("guest_weight", 0.3),))
    tasks, _info, _notes = plan(tmp_path, ("steward",), 1, False, [light, heavy], philly=None)
    by_entry = {t.scenario: t.path for t in tasks}
    assert by_entry["ud-light"] != by_entry["ud-heavy"]
    assert len(load_scenario(by_entry["ud-light"]).jobs) == 60
    assert len(load_scenario(by_entry["ud-heavy"]).jobs) == 90


def test_the_policies_are_read_from_the_simulator_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policies, "POLICIES", ("steward", "ai2", "tiresias"))
    assert resolve_policies(None) == ("steward", "ai2", "tiresias")
    assert resolve_policies("AI2,steward,ai2") == ("ai2", "steward")


def test_scenarios_are_selected_by_their_table_names() -> None:
    from steward.sim.suite import select

    assert select(None) is None
    picked = select("philly,bursty-n8-l0.8,philly")
    assert picked is not None and [e.name for e in picked] == ["philly", "bursty-n8-l0.8"]
    assert picked[0].family is None and picked[1].family == "bursty"


def test_the_default_suite_has_philly_and_sixteen_generated_scenarios(tmp_path: Path) -> None:
    from steward.sim.generate import FAMILIES, MULTI_CLUSTER_FAMILIES
    from steward.sim.suite import GENERATED

    assert len(GENERATED) >= 16
    # every family, unfunded-debug and two-clusters included (tiresias routes, ADR 0066)
    assert {s.family for s in GENERATED} == set(FAMILIES)
    assert {s.family for s in GENERATED} >= MULTI_CLUSTER_FAMILIES
    assert min(s.nodes for s in GENERATED) == 4 and max(s.nodes for s in GENERATED) == 64
    assert min(s.load for s in GENERATED) == 0.8 and max(s.load for s in GENERATED) == 3.0


def _slice() -> dict[str, Any]:
    return run_suite(("steward", "ai2"), seeds=1, workers=1, scenarios=SLICE, philly=None).to_json()


def _without_wall(out: dict[str, Any]) -> dict[str, Any]:
    for row in out["table"]:
        row["figures"].pop("wall_s", None)
    out["suite"].pop("wall_s")
    return out


def test_a_slice_of_the_suite_is_deterministic_and_in_broad_ranges() -> None:
    first = _slice()
    assert _without_wall(first) == _without_wall(_slice())
    assert not first["errors"]
    assert {(r["scenario"], r["policy"]) for r in first["table"]} == {
        (s.name, p) for s in SLICE for p in ("steward", "ai2")}
    for row in first["table"]:
        figs = row["figures"]
        assert figs["protection_violations"]["max"] == 0
        assert 0.5 <= figs["occupancy"]["mean"] <= 1.0
        assert figs["jobs"]["mean"] == 150
    assert [c["scenario"] for c in first["checks"]] == [s.name for s in SLICE]
    for block in first["checks"]:
        assert block["load"] == pytest.approx(next(s.load for s in SLICE if s.name == block["scenario"]), rel=0.01)
        assert len(block["criteria"]) == CRITERIA
        for c in block["criteria"]:
            assert c["status"] in (PASS, FAIL, NA) and c["criterion"] and isinstance(c["detail"], str)
        assert status(block, "protection_violations") == PASS
    assert sum(v[PASS] + v[FAIL] + v[NA] for v in first["summary"].values()) == CRITERIA * len(SLICE)


def test_the_gang_heavy_slice_holds_its_gangs_rooms() -> None:
    """Issue 18's regression, the suite's own `gang-heavy-n8-l1.2` (seed 0, 220 jobs, gangs of up to
    the whole cluster): with a gang's held room covering only its victims' nodes, `steward` fell to
    owed_min 0.453 with 428 preemptions and 4.4 % lost (main: 0.905, 130, 0.95 %; `ai2`: 0.797, 162,
    1.8 %); holding the whole free nodes the gang counted on gives 0.901, 103, 1.1 %. The ranges
    are broad (the simulator is chaotic) but exclude the loop."""
    from steward.sim.suite import GENERATED

    [entry] = [s for s in GENERATED if s.name == "gang-heavy-n8-l1.2"]
    out = run_suite(("steward", "ai2"), seeds=1, workers=1, scenarios=(entry,), philly=None).to_json()
    figs = {row["policy"]: row["figures"] for row in out["table"]}
    mine = figs["steward"]
    assert mine["owed_delivered_min"]["mean"] >= 0.8
    assert mine["preemptions"]["mean"] <= 200
    assert mine["lost_gpu_hours_fraction"]["mean"] <= 0.02
    [block] = out["checks"]
    assert status(block, "owed_delivered_min") == PASS and status(block, "preemptions") == PASS


def test_the_unfunded_debug_drain_gathers_scattered_idle_gpus(tmp_path: Path) -> None:
    """Issue 18's occupancy loss (ADR 0034), `unfunded-debug` on 6 x 8 GPUs at load 2 with guests
    submitting 30 % (seed 1, 600 jobs): large unfunded jobs wait while idle GPUs lie scattered over
    nodes that each keep one small unfunded job. Without consolidation `steward`'s occupancy is
    0.866 (ai2-like drains); with it 0.988, for 144 preemptions (120) and 1.5 % lost (1.4 %). The
    ranges are broad (the simulator is chaotic) but exclude the loss."""
    from steward.sim.generate import generate
    from steward.sim.run import simulate

    g = generate("unfunded-debug", 1, {"nodes": 6, "load": 2.0, "jobs": 600, "guest_weight": 0.3})
    scenario = load_scenario(g.write(tmp_path))
    on = simulate(scenario, "steward").figures
    off = simulate(scenario, "steward", {"consolidation_searches_per_cycle": 0}).figures
    assert on["occupancy"] >= 0.95 > 0.9 >= off["occupancy"]
    assert on["protection_violations"] == 0
    assert on["preemptions"] <= 1.5 * off["preemptions"]
    assert on["lost_gpu_hours_fraction"] <= 0.025


def test_processes_give_the_same_table_as_one() -> None:
    one = run_suite(("steward", "ai2"), seeds=1, workers=1, scenarios=SLICE[:1], philly=None).to_json()
    two = run_suite(("steward", "ai2"), seeds=1, workers=2, scenarios=SLICE[:1], philly=None).to_json()
    assert _without_wall(one)["table"] == _without_wall(two)["table"]


def test_the_suite_writes_its_tables(tmp_path: Path) -> None:
    result = run_suite(("steward",), seeds=1, scenarios=SLICE[:1], philly=None, out_dir=tmp_path)
    for name in ("suite.csv", "suite.md", "checks.csv", "suite.json"):
        assert (tmp_path / name).is_file()
    assert (tmp_path / "scenarios" / SLICE[0].name / "bursty-n4-l1.5-s0.yaml").is_file()
    header = (tmp_path / "suite.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["scenario", "policy", "seeds"] and "occupancy_mean" in header and "occupancy_max" in header
    md = markdown(result)
    assert "| bursty-n4-l1.5 | steward |" in md and "Checks for steward" in md
    meta = json.loads((tmp_path / "suite.json").read_text())["suite"]
    assert meta["runs"] == 1 and meta["runs_done"] == 1


def run_cli(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


def test_generate_cli_lists_families_and_writes_a_scenario(tmp_path: Path) -> None:
    code, out = run_cli("generate", "--list", "--json")
    assert code == 0 and len(json.loads(out)) == 9  # eight one-cluster families and two-clusters (ADR 0057)
    code, out = run_cli("generate", "--family", "heavy-tail", "--seed", "2", "--out", str(tmp_path),
                        "--nodes", "4", "--load", "2", "--jobs", "40", "--param", "alpha=1.1", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["jobs"] == 40 and summary["params"]["alpha"] == 1.1
    assert len(load_scenario(summary["yaml"]).jobs) == 40


@pytest.mark.parametrize("argv", [
    ("generate", "--family", "nope", "--out", "x"),
    ("generate", "--family", "bursty"),
    ("generate", "--family", "bursty", "--out", "x", "--param", "nodes"),
    ("generate", "--seed", "x"),
    ("suite", "--policies", "nope"),
    ("suite", "--seeds", "0", "--no-philly"),
    ("suite", "--workers", "0"),
    ("suite", "--scenarios", "nope"),
])
def test_bad_cli_input_exits_2(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli(*argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_the_heavy_unfunded_debug_variant_is_a_named_scenario() -> None:
    """ADR 0034: the heavy variant of issue 18's unfunded-debug family is in the suite by name, with
    its own family parameter (guests submit 30 %) and its size, quick or not."""
    from steward.sim.suite import GENERATED

    [entry] = [s for s in GENERATED if s.name == "unfunded-debug-n6-l2-heavy"]
    assert entry.values(False) == {"nodes": 6, "load": 2.0, "guest_weight": 0.3, "jobs": 2400}
    assert entry.values(True)["jobs"] == 2400


def test_the_routing_baselines_run_on_scenarios_of_several_clusters_only(tmp_path: Path) -> None:
    from steward.sim.suite import SuiteScenario, plan

    entries = (SuiteScenario("short-1gpu-n4-l1.5", "short-1gpu", 4, 1.5, 40),
               SuiteScenario("two-clusters-n4-l1.5", "two-clusters", 4, 1.5, 40))
    tasks, _, notes = plan(tmp_path, ("steward", "random-cluster", "least-loaded"), 1, False, entries, None)
    assert sorted((t.scenario, t.policy) for t in tasks) == [
        ("short-1gpu-n4-l1.5", "steward"), ("two-clusters-n4-l1.5", "least-loaded"),
        ("two-clusters-n4-l1.5", "random-cluster"), ("two-clusters-n4-l1.5", "steward")]
    assert any("several clusters only" in n for n in notes)
