"""Scenario loading: good files load, bad ones are refused with a message naming the line or node."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steward.domain.commands import ROOT, SetAllocations
from steward.domain.decide import decide_or_reject
from steward.domain.state import LedgerState
from steward.policy.errors import TreeError
from steward.policy.tree import AllocationTree
from steward.sim.errors import OverrideError, ScenarioError
from steward.sim.policies import settings_for, tree_for
from steward.sim.run import simulate
from steward.sim.scenario import load_scenario, parse_set_args, parse_tree
from tests.unit.sim.builders import HEADER, job, write_scenario

PHILLY = Path("/work/shared/data/scenarios/philly.yaml")


def test_small_scenario_loads_with_entitlements_and_topology(tmp_path: Path) -> None:
    tree = {"r": {"share": 0.6, "children": {"a": 0.5, "b": 0.5}}, "c": 0.4}
    path = write_scenario(tmp_path, [job("j2", submit=5), job("j1", submit=1, tenant="c")], tree=tree, nodes=3)
    s = load_scenario(path)
    assert [j.job_id for j in s.jobs] == ["j1", "j2"]  # sorted by submit time
    assert s.capacity == 12
    assert s.allocations["a"].entitlement == pytest.approx(0.3)
    assert s.allocations["r"].children == ("a", "b")
    assert s.projects == ("a", "b", "c")
    assert s.nodes[0].path == ("block0", "node000")


@pytest.mark.skipif(not PHILLY.exists(), reason="reference data not present")
def test_philly_loads() -> None:
    s = load_scenario(PHILLY, {"max_jobs": "100"})
    assert len(s.jobs) == 100
    assert s.capacity == 320
    assert "103959" in s.allocations  # a numeric-looking YAML key stays the tenant's name
    assert {n.path[0] for n in s.nodes} == {f"block{i}" for i in range(5)}


Mutate = Callable[[Path], Path]


def rows(*extra: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [job("j1"), *extra]


BAD_TRACES: list[tuple[str, list[tuple[Any, ...]], tuple[str, ...], str]] = [
    ("negative duration", rows(job("j2", duration=-5)), HEADER, "line 3: duration_s is negative"),
    ("negative submit", rows(job("j2", submit=-1)), HEADER, "line 3: submit_s is negative"),
    ("non-numeric gpus", rows(("j2", 0, 10, "two", "a", "batch", 10, 1)), HEADER, "line 3: gpus is not a number"),
    ("zero gpus", rows(job("j2", gpus=0)), HEADER, "line 3: gpus must be a whole number >= 1"),
    ("too many gpus", rows(job("j2", gpus=9)), HEADER, "line 3: job j2 needs 9 GPUs, the cluster has 4"),
    ("unknown class", rows(job("j2", klass="train")), HEADER, "line 3: class 'train'"),
    ("bad resumable", rows(job("j2", resumable=2)), HEADER, "line 3: resumable must be 0 or 1"),
    ("duplicate id", rows(job("j1")), HEADER, "line 3: duplicate job_id 'j1'"),
    ("inner tenant", rows(job("j2", tenant="r")), HEADER, "line 3: tenant 'r' is an inner node"),
    ("short row", [job("j1"), ("j2", 0, 10)], HEADER, "line 3: 3 fields, the header has 8"),
    ("missing column", [job("j1")[:4] + job("j1")[5:]], tuple(c for c in HEADER if c != "tenant"),
     "line 1: missing column(s) tenant"),
    ("unknown column", [(*job("j1"), "x")], (*HEADER, "colour"), "line 1: unknown column 'colour'"),
    ("no jobs", [], HEADER, "the trace has no jobs"),
]


@pytest.mark.parametrize(("case", "jobs", "header", "message"), BAD_TRACES, ids=[c[0] for c in BAD_TRACES])
def test_bad_trace_is_refused_naming_the_line(
    tmp_path: Path, case: str, jobs: list[tuple[Any, ...]], header: tuple[str, ...], message: str
) -> None:
    tree = {"r": {"share": 1.0, "children": {"a": 1.0}}}
    path = write_scenario(tmp_path, jobs, header=header, tree=tree)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert message in str(err.value)
    assert "small.csv" in str(err.value)
    assert "\n" not in str(err.value)


BAD_YAML: list[tuple[str, dict[str, Any], str]] = [
    ("share above one", {"tree": {"a": 1.5}}, "tree.a: share 1.5 is not in [0, 1]"),
    ("negative share", {"tree": {"a": -0.1}}, "tree.a: share -0.1 is not in [0, 1]"),
    ("children over one", {"tree": {"r": {"share": 1.0, "children": {"a": 0.7, "b": 0.5}}}},
     "tree.r.children: the shares of 'r''s children sum to 1.2 > 1"),
    ("top over one", {"tree": {"a": 0.7, "b": 0.5}}, "the shares of the cluster's children sum to 1.2 > 1"),
    ("unknown tree field", {"tree": {"r": {"shares": 1.0}}}, "tree.r: unknown field 'shares'"),
    ("missing share", {"tree": {"r": {"children": {"a": 1.0}}}}, "tree.r: missing share"),
    ("share not a number", {"tree": {"a": "half"}}, "tree.a: share: expected a number"),
    ("duplicate node", {"tree": {"r": {"share": 0.5, "children": {"a": 1.0}}, "a": 0.5}},
     "node 'a' appears twice"),
    ("unknown top-level", {"clusterz": {}}, "unknown field 'clusterz'"),
    ("unknown policy key", {"policy": {"window_weeks": 1}}, "policy: unknown field 'window_weeks'"),
    ("negative policy value", {"policy": {"preemption_grace_s": -1}}, "policy.preemption_grace_s: must be >= 0"),
    ("no nodes", {"cluster": {"nodes": 0, "gpus_per_node": 4}}, "cluster.nodes: must be >= 1"),
    ("missing trace", {"trace": "nope.csv"}, "cannot read trace"),
]


@pytest.mark.parametrize(("case", "change", "message"), BAD_YAML, ids=[c[0] for c in BAD_YAML])
def test_bad_yaml_is_refused_naming_the_node(
    tmp_path: Path, case: str, change: dict[str, Any], message: str
) -> None:
    import yaml

    path = write_scenario(tmp_path, [job("j1")])
    doc = yaml.safe_load(path.read_text())
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict) and key != "tree":
            doc[key].update(value)
        else:
            doc[key] = value
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert message in str(err.value)


def test_deep_tree_is_refused(tmp_path: Path) -> None:
    tree: dict[str, Any] = {"a": 1.0}
    for depth in range(9):
        tree = {f"n{depth}": {"share": 1.0, "children": tree}}
    path = write_scenario(tmp_path, [job("j1")], tree=tree)
    with pytest.raises(ScenarioError, match="deeper than 8 levels"):
        load_scenario(path)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, [job("j1")])
    path.write_text(path.read_text() + "tree: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"small.yaml line \d+: not valid YAML"):
        load_scenario(path)


def test_overrides_change_shares_and_settings(tmp_path: Path) -> None:
    tree = {"r": {"share": 0.6, "children": {"a": 0.5, "b": 0.5}}, "c": 0.4}
    path = write_scenario(tmp_path, [job("j1")], tree=tree)
    s = load_scenario(path, parse_set_args(["share.a=0.8", "share.b=0.2", "window_days=14",
                                            "reservations=false", "settings.placement=first_fit"]))
    assert s.allocations["a"].entitlement == pytest.approx(0.48)
    assert s.policy.window_days == 14
    assert s.settings_overrides == {"reservations": False, "placement": "first_fit"}


@pytest.mark.parametrize(("item", "message"), [
    ("share.zz=0.5", "no allocation named 'zz'"),
    ("noequals", "expected KEY=VALUE"),
    ("foo.bar=1", "unknown key"),
])
def test_bad_overrides_are_refused(tmp_path: Path, item: str, message: str) -> None:
    path = write_scenario(tmp_path, [job("j1")])
    with pytest.raises(OverrideError, match=message):
        load_scenario(path, parse_set_args([item]))


def test_override_that_breaks_the_tree_is_refused_like_a_bad_file(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, [job("j1")], tree={"a": 0.5, "b": 0.5})
    with pytest.raises(ScenarioError, match=r"sum to 1\.3 > 1"):
        load_scenario(path, {"share.a": "0.8"})


# ------------------------------------------------------- --set on policy settings, typed by declaration


@pytest.mark.parametrize(("item", "field", "expected"), [
    ("cheap_victim_s=null", "cheap_victim_s", None),        # an optional setting switched off
    ("cheap_victim_s=300", "cheap_victim_s", 300.0),        # a whole number typed as the float it is
    ("lane_trade_max_lost_s=30", "lane_trade_max_lost_s", 30.0),  # default None: typed by its declaration
    ("lane_trade_max_lost_s=null", "lane_trade_max_lost_s", None),
    ("unfunded_grace_s=~", "unfunded_grace_s", None),       # YAML's other spelling of null
    ("debug_quota_floor_gpus=64", "debug_quota_floor_gpus", 64),
    ("reservations=false", "reservations", False),
    ("session_warnings_s=[600, 60]", "session_warnings_s", (600.0, 60.0)),
])
def test_set_types_a_policy_setting_by_its_declaration(tmp_path: Path, item: str, field: str,
                                                       expected: object) -> None:
    scenario = load_scenario(write_scenario(tmp_path, [job("j1")]), parse_set_args([item]))
    value = getattr(settings_for("steward", scenario), field)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(("item", "message"), [
    ("debug_quota_floor_gpus=null", r"--set debug_quota_floor_gpus: null is not allowed"),
    ("debug_quota_floor_gpus=1.5", r"--set debug_quota_floor_gpus: expected a whole number, got 1\.5"),
    ("cheap_victim_s=soon", r"--set cheap_victim_s: expected a number or null, got 'soon'"),
    ("lane=maybe", r"--set lane: expected true or false, got 'maybe'"),
    ("no_such_knob=1", r"--set no_such_knob: not a scenario key nor a policy setting"),
    ("lane_hold_s=30", r"--set lane_hold_s: a retired setting \(folded into claim_hold_s"),
    ("cheap_victim_s=-1", r"cheap_victim_s"),
])
def test_set_refuses_a_value_its_setting_cannot_take(tmp_path: Path, item: str, message: str) -> None:
    scenario = load_scenario(write_scenario(tmp_path, [job("j1")]), parse_set_args([item]))
    with pytest.raises(OverrideError, match=message):
        settings_for("steward", scenario)


def test_a_tree_node_may_carry_a_debug_quota_that_reaches_the_policy_tree(tmp_path: Path) -> None:
    """DESIGN.md "Debug quota": a scenario sets an allocation's quota as its manager would (`debug_quota:`);
    a node without one keeps the default (None in the scenario, inherited or default in the policy)."""
    tree = {"r": {"share": 0.6, "debug_quota": 3, "children": {"a": {"share": 0.5, "debug_quota": 1}, "b": 0.5}},
            "c": 0.4}
    s = load_scenario(write_scenario(tmp_path, [job("j1", tenant="a")], tree=tree))
    assert (s.allocations["r"].debug_quota, s.allocations["a"].debug_quota, s.allocations["b"].debug_quota) == (
        3, 1, None)
    t = tree_for(s)
    assert (t.debug_quota("a"), t.debug_quota("b"), t.debug_quota("c")) == (1, 3, None)


TREE_READERS: list[tuple[str, dict[str, float], dict[str, int | None], bool]] = [
    ("fits", {"a": 0.6, "b": 0.4}, {"a": 2}, True),
    ("float slack", {"a": 0.1, "b": 0.2, "c": 0.7}, {}, True),
    ("over one", {"a": 0.7, "b": 0.5}, {}, False),
    ("share above one", {"a": 1.5}, {}, False),
    ("negative share", {"a": -0.1, "b": 0.5}, {}, False),
    ("negative quota", {"a": 0.5}, {"a": -2}, False),
]


@pytest.mark.parametrize(("name", "shares", "quotas", "ok"), TREE_READERS, ids=[t[0] for t in TREE_READERS])
def test_the_ledger_the_policy_tree_and_the_file_parser_agree_on_a_tree(
        tmp_path: Path, name: str, shares: dict[str, float], quotas: dict[str, int | None], ok: bool) -> None:
    """One home for the tree's shape rules (steward.domain.org_tree): a tree the ledger refuses is refused by the
    scenario parser (so by `steward tree apply` before anything is sent) and by the policy's tree, and the other
    way round."""
    ledger_ok = decide_or_reject(LedgerState(), SetAllocations(ROOT, shares, "t", quotas), 0.0)[0].type != (
        "CommandRejected")
    try:
        parse_tree("t.yaml", {n: ({"share": s, "debug_quota": quotas[n]} if n in quotas else s)
                              for n, s in shares.items()})
        parser_ok = True
    except ScenarioError:
        parser_ok = False
    try:
        AllocationTree.build(((n, None, s) for n, s in shares.items()), debug_quotas=quotas)
        policy_ok = True
    except TreeError:
        policy_ok = False
    assert (ledger_ok, parser_ok, policy_ok) == (ok, ok, ok)


def test_a_trace_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """A CSV exported by a spreadsheet begins with a UTF-8 BOM: it was refused as "missing column(s) job_id"."""
    path = write_scenario(tmp_path, [job("j1", duration=60), job("j2", submit=5, duration=60)])
    trace = tmp_path / "small.csv"
    trace.write_bytes(b"\xef\xbb\xbf" + trace.read_bytes())
    assert [j.job_id for j in load_scenario(path).jobs] == ["j1", "j2"]


@pytest.mark.parametrize(("written", "value"), [("1e-6", 1e-6), ("1E4", 1e4), ("-0.5e+1", None), ("2.5e3", 2500.0),
                                                ("1_000e0", 1000.0), ("1800", 1800.0), ("1.5", 1.5)])
def test_a_number_in_exponent_form_is_a_number(tmp_path: Path, written: str, value: float | None) -> None:
    """YAML 1.1 wants a dot in a float: `1e-6` was the text '1e-6', refused as "expected a number, got '1e-6'"."""
    path = write_scenario(tmp_path, [job("j1", duration=60)], policy={"checkpoint_interval_s": 12345})
    path.write_text(path.read_text().replace("checkpoint_interval_s: 12345", f"checkpoint_interval_s: {written}"))
    if value is None:  # a negative interval: the rule's own message, not "expected a number"
        with pytest.raises(ScenarioError, match=r"checkpoint_interval_s: must be >= 0, got -5\.0"):
            load_scenario(path)
        return
    assert load_scenario(path).policy.checkpoint_interval_s == value
    assert load_scenario(write_scenario(tmp_path, [job("j1", duration=60)]),
                         parse_set_args([f"window_days={written}"])).policy.window_days == value


@pytest.mark.parametrize("policy", ["steward", "fair-tree", "ai2"])
def test_a_trace_in_epoch_seconds_runs_and_reports_what_it_reports_at_time_zero(tmp_path: Path, policy: str) -> None:
    """An outside trace keeps its epoch (submit times ~1.7e9 s). The bound on trace times is on durations and on the
    span from the first submit to the last (ten years), not on the epoch: shifted by a whole number of owed periods
    (30 days here), the same trace reports the same figures."""
    shift = 656 * 30 * 86_400  # 1.70e9 s: the trace's own epoch, a whole number of owed periods
    rows = [job("j1", submit=0, duration=7200, gpus=2), job("j2", submit=60, tenant="b", duration=3600, gpus=4),
            job("j3", submit=600, tenant="a", duration=1800, gpus=1, klass="debug", min_runtime=600),
            job("j4", submit=4000, tenant="b", duration=9000, gpus=3, min_runtime=0)]
    here, there = tmp_path / "zero", tmp_path / "epoch"
    here.mkdir(), there.mkdir()
    at_zero = simulate(load_scenario(write_scenario(here, rows, nodes=2)), policy).figures
    late = [(r[0], r[1] + shift, *r[2:]) for r in rows]
    at_epoch = simulate(load_scenario(write_scenario(there, late, nodes=2)), policy).figures
    keep = ("occupancy", "owed_delivered_min", "owed_delivered_mean", "preemptions", "lost_gpu_hours_fraction",
            "wait_p90_s")
    assert {k: at_epoch.get(k) for k in keep} == {k: at_zero.get(k) for k in keep}
    assert at_zero.get("occupancy") is not None
