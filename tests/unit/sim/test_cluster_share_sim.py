"""Fair share per cluster in the simulator (issue 25, ADR 0076): the simulator hands the cycle each cluster's usage,
and a gang that can run only on ceres starts there within minutes when the work holding ceres (work that could run
anywhere) belongs to an allocation over its part of ceres, where the tree's standing alone (equal usage over the
tree) keeps it waiting until that work ends, hours later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steward.sim.engine import Engine
from steward.sim.policies import settings_for, tree_for
from steward.sim.run import default_scheduler
from steward.sim.scenario import load_scenario
from tests.unit.sim.test_clusters import write

HOUR = 3600

# v's two 8-GPU jobs (accepting any cluster; routed to ceres, the tightest fit by name) hold ceres and w's two
# (jupiter only) hold jupiter from 0 to 10 h, each protected 1 h and resumable; at 3 h, w asks for a 16-GPU gang on
# ceres only. Over the tree v and w have used the same, and keep using the same; on ceres v has used all its usage
# while its part of ceres is half its entitlement (its work may run on either cluster), w nothing there. (Every
# job funded: the pre-budget switch, so that w's gang is not refused funding by its quota of 16 GPUs in use.)
DOC: dict[str, Any] = {
    "clusters": {
        "ceres": {"nodes": 2, "gpus_per_node": 8, "gpu_model": "H100"},
        "jupiter": {"nodes": 2, "gpus_per_node": 8, "gpu_model": "H100"},
    },
    "gpu_models": {"H100": 1.0},
    "tree": {"v": 0.5, "w": 0.5},
    "policy": {"checkpoint_interval_s": 600, "preemption_grace_s": 120, "restart_overhead_s": 60},
}
ROWS = "".join(
    [f"v{i},0,{10 * HOUR},8,v,batch,{HOUR},1,,\n" for i in range(2)]
    + [f"w{i},1,{10 * HOUR},8,w,batch,{HOUR},1,,jupiter\n" for i in range(2)]
    + [f"gang,{3 * HOUR},{HOUR},16,w,batch,{HOUR},1,,ceres\n"]
)


def gang_wait(tmp_path: Path, **overrides: Any) -> tuple[float, Engine]:
    sc = load_scenario(write(tmp_path, DOC, ROWS))
    engine = Engine(sc, settings_for("steward", sc, {"funding": False, **overrides}), tree_for(sc), default_scheduler())
    engine.run()
    (gang,) = [j for j in engine.jobs if j.spec.job_id == "gang"]
    assert gang.first_start is not None
    return gang.first_start - gang.spec.submit_s, engine


def test_the_gang_starts_on_ceres_within_minutes_with_fair_share_per_cluster(tmp_path: Path) -> None:
    wait, engine = gang_wait(tmp_path)
    assert engine.cluster_usage is not None  # two clusters: each one's usage is kept
    assert wait <= 10 * 60  # v's jobs checkpoint and stop at the end of their grace
    before, _ = gang_wait(tmp_path, cluster_fair_share=False)
    assert before == 7 * HOUR  # the tree's standing alone: it waits for v's jobs to end at 10 h


def test_the_usage_per_cluster_sums_to_the_trees(tmp_path: Path) -> None:
    _, engine = gang_wait(tmp_path)
    assert engine.cluster_usage is not None
    now = engine.now
    tree = engine.usage.usage(now)
    per = {c: u.usage(now) for c, u in engine.cluster_usage.items()}
    for project, total in tree.items():
        assert sum(p.get(project, 0.0) for p in per.values()) == pytest.approx(total)
