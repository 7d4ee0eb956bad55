"""The order of waiting jobs per cluster in the simulator (issue 25, ADR 0080): when ceres frees, the allocation
that has had more than its part of ceres yields it to one level with it over the tree that has used none of it,
where the tree's order (level: by name) handed ceres back to the first and kept the second waiting hours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steward.sim.engine import Engine
from steward.sim.policies import settings_for, tree_for
from steward.sim.run import default_scheduler
from steward.sim.scenario import load_scenario
from tests.unit.sim.test_cluster_share_sim import DOC as SHARED
from tests.unit.sim.test_clusters import write

HOUR = 3600

# One 8-GPU node per cluster. From 0 to 4 h v's v0 (accepting any cluster; on ceres, the tightest fit by name) and
# w's w0 (jupiter only) run, protected throughout (no preemption can reorder anything), so v and w have used the
# same over the tree, v all of it on ceres. Waiting when they end at 4 h: v1 (ceres only, since 1 h), w1 (ceres
# only, since 2 h) and v2 (jupiter only, since 3 h): v's demand accepts both clusters, so its part of ceres is half
# its entitlement and it is over it. (Every job funded: the pre-budget switch, as in test_cluster_share_sim.)
DOC: dict[str, Any] = {  # test_cluster_share_sim's two clusters and tree, one node per cluster
    **SHARED,
    "clusters": {c: {**SHARED["clusters"][c], "nodes": 1} for c in SHARED["clusters"]},
}
ROWS = (
    f"v0,0,{4 * HOUR},8,v,batch,{4 * HOUR},1,,\n"
    f"w0,0,{4 * HOUR},8,w,batch,{4 * HOUR},1,,jupiter\n"
    f"v1,{HOUR},{4 * HOUR},8,v,batch,{4 * HOUR},1,,ceres\n"
    f"w1,{2 * HOUR},{4 * HOUR},8,w,batch,{4 * HOUR},1,,ceres\n"
    f"v2,{3 * HOUR},{4 * HOUR},8,v,batch,{4 * HOUR},1,,jupiter\n"
)


def starts(tmp_path: Path, **overrides: Any) -> dict[str, float]:
    sc = load_scenario(write(tmp_path, DOC, ROWS))
    engine = Engine(sc, settings_for("steward", sc, {"funding": False, **overrides}), tree_for(sc), default_scheduler())
    engine.run()
    out = {}
    for j in engine.jobs:
        assert j.first_start is not None
        out[j.spec.job_id] = j.first_start
    return out


def test_ceres_goes_to_the_allocation_that_has_not_had_its_part_of_it(tmp_path: Path) -> None:
    got = starts(tmp_path, cluster_order=True)
    assert got["v0"] == 0 and got["w0"] == 0
    assert got["w1"] == 4 * HOUR  # 2 h of wait: ceres is w's before v's, who has had more than its part of it
    assert got["v2"] == 4 * HOUR  # and jupiter v's, who has used none of it
    assert got["v1"] == 8 * HOUR
    before = starts(tmp_path)  # the setting off (the `steward` preset): the tree's order
    assert before["v1"] == 4 * HOUR  # level over the tree, v before w by name
    assert before["w1"] == 8 * HOUR  # 6 h of wait
