"""The scheduling cycle end to end: funded vs unfunded, presets, determinism, evidence."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from steward.bench.cycle import build_snapshot, run
from steward.domain.policy_settings import PRESETS, PolicySettings
from steward.policy.cycle import schedule
from steward.policy.errors import InvalidNode
from tests.unit.policy.builders import NOW, nested, node, nodes, pending, placed, running, snapshot, tree


def test_funded_work_first_then_unfunded_on_idle_capacity():
    jobs = [running("ra", "a", 2, on="n0"), running("rb", "b", 4, on="n0")]
    waiting = [pending("a1", "a", 2, submitted_at=0), pending("b1", "b", 2, submitted_at=5)]
    # a ranks first (least served) but has no entitlement left (2 of 0.25 × 8 = 2 GPUs funded)
    result = schedule(snapshot(tree=tree(a=0.25, b=0.75), usage={"a": 0, "b": 1e6}, running=jobs, pending=waiting))
    assert placed(result) == {"b1": (("n0", 2),)}
    assert result.placements[0].funded and result.placements[0].protected_until == NOW + 3600
    assert result.explanations["a1"].reason == "entitlement_used"


@pytest.mark.parametrize(("preset", "funded"), [("steward", True), ("ai2", False)])
def test_a_siblings_overshoot_leaves_the_project_funded(preset, funded):
    """ADR 0017: x2 (4 GPUs of x's 8) runs 12, so x is past its quota of 8 only through x2's
    overshoot; x1 has used nothing of its own 4 GPUs. `steward` funds x1's job; ADR 0002's every-level
    check (the baselines) does not."""
    t = nested({"x": {"share": 0.5, "children": {"x1": 0.5, "x2": 0.5}}, "y": {"share": 0.5, "children": {"y1": 1.0}}})
    jobs = [running("r", "x2", 8, on="n0"), running("r2", "x2", 4, on="n1")]
    s = PolicySettings.preset(preset)
    result = schedule(snapshot(nodes=nodes(2), tree=t, running=jobs, pending=[pending("w", "x1", 2)], settings=s))
    assert [p.funded for p in result.placements] == [funded]
    if not funded:
        assert result.placements[0].evidence["funded"] is False


def test_unfunded_placement_is_not_protected():
    result = schedule(snapshot(pending=[pending("u", "a", 2, min_runtime_s=0)]))
    p = result.placements[0]
    assert (p.funded, p.protected_until) == (False, NOW)
    assert p.evidence["funded"] is False


def test_priority_orders_inside_a_project_only():
    waiting = [pending("lo", "a", 8, submitted_at=0), pending("hi", "a", 8, submitted_at=9, priority=2)]
    result = schedule(snapshot(pending=waiting))
    assert placed(result) == {"hi": (("n0", 8),)}
    assert result.order == ("hi", "lo")


def test_fifo_priority_baseline_is_strict_priority_then_fifo_and_all_funded():
    waiting = [
        pending("b-old", "b", 8, submitted_at=0),
        pending("a-new", "a", 8, submitted_at=9, min_runtime_s=0),
        pending("a-hi", "a", 8, submitted_at=20, priority=1),
    ]
    result = schedule(
        snapshot(nodes=nodes(2), pending=waiting, usage={"b": 0, "a": 1e9}, settings=PolicySettings.fifo_priority())
    )
    assert set(placed(result)) == {"a-hi", "b-old"}
    assert all(p.funded for p in result.placements)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_runs_the_same_cycle(preset):
    snap = build_snapshot(24, 300, 120, 10, settings=PolicySettings.preset(preset))
    result = schedule(snap)
    assert len(result.explanations) == len(snap.pending) - len(result.placements)
    json.dumps(result.to_dict())


def test_same_input_same_output_whatever_the_order_of_its_tuples():
    snap = build_snapshot(32, 400, 150, 12)
    first = schedule(snap).to_dict()
    rng = random.Random(1)
    shuffled = replace(
        snap,
        nodes=tuple(rng.sample(snap.nodes, len(snap.nodes))),
        running=tuple(rng.sample(snap.running, len(snap.running))),
        pending=tuple(rng.sample(snap.pending, len(snap.pending))),
        usage=dict(reversed(list(snap.usage.items()))),
    )
    assert schedule(shuffled).to_dict() == first
    assert schedule(snap).to_dict() == first


def test_capacity_is_respected_on_a_busy_synthetic_cluster():
    snap = build_snapshot(40, 600, 200, 16)
    result = schedule(snap)
    used: dict[str, int] = {}
    for r in snap.running:
        for n, g in r.placement:
            used[n] = used.get(n, 0) + g
    for p in result.placements:
        for n, g in p.assignments:
            used[n] = used.get(n, 0) + g
    caps = {n.id: n.gpus for n in snap.nodes}
    assert all(used[n] <= caps[n] for n in used)


def test_cycle_evidence_summarises_the_cycle():
    result = schedule(snapshot(pending=[pending("p", gpus=1)]))
    ev = result.evidence
    assert ev["capacity_gpus"] == 8 and ev["placed"] == 1 and ev["waiting"] == 0
    assert ev["settings"]["window_s"] == 7 * 86400.0


def test_duplicate_nodes_are_refused():
    with pytest.raises(InvalidNode):
        schedule(snapshot(nodes=(node("n0"), node("n0"))))


def test_an_empty_cluster_and_an_empty_queue():
    result = schedule(snapshot(nodes=(), pending=[]))
    assert result.placements == () and len(result.explanations) == 0 and result.fragmentation == 0.0


def test_bench_runs_small():
    figures = run(nodes=16, pending=200, running=60, projects=8, repeat=2)
    for key in ("cycle_ms_p50", "cycle_ms_p95", "peak_rss_mb", "placements", "waiting"):
        assert key in figures
