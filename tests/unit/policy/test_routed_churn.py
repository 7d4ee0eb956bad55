"""Bounded churn for a routed job (issue 25, ADR 0028, 0057; `phase7_preempt.churn_check`), hand-computed: the
gain a preemption buys is the beneficiary's earlier start against when it would start *where it may run*
without one. Free GPUs on a cluster or model it excludes are no start for it: counting them (the whole index),
a job pinned to a full cluster was told "would start now" and every preemption for it was refused as costing
more than the 0 it gained (the two-cluster integration test: a job asking for cluster ceres waited for ever
behind work it outranked, with jupiter's 4 A100 free)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.model import Node
from steward.policy.reasons import PREEMPTION_COSTS_MORE
from tests.unit.policy.builders import NOW, pending, placed, preempted, running, snapshot, tree


def two() -> tuple[Node, ...]:
    """ceres: c0 (2 H100); jupiter: j0 (4 A100), free."""
    return (Node("c0", 2, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 4, "A100", ("jupiter",), "ready", "jupiter"))


# a's funded job on ceres, out of its protection, checkpointed a minute ago; a served far beyond b
VICTIM = running("v", "a", 1, on="c0", started_at=NOW - 3600, protected_for=600, resumable=True,
                 last_checkpoint_at=NOW - 60)


def run(**accepts: Any) -> Any:
    return schedule(snapshot(two(), tree=tree(a=0.5, b=0.5), usage={"a": 1e6, "b": 0}, running=[VICTIM],
                             pending=[pending("w", "b", 2, min_runtime_s=60, **accepts)],
                             settings=PolicySettings(), levels=("cluster",)))


@pytest.mark.parametrize(("case", "accepts"), [
    ("pinned to ceres by its clusters", {"clusters": ("ceres",)}),
    ("ceres by its model", {"gpu_models": ("H100",)}),
])
def test_a_job_that_may_run_only_on_a_full_cluster_preempts_there(case: str, accepts: dict[str, Any]) -> None:
    result = run(**accepts)
    assert preempted(result) == {"v": "w"}, (case, result.explanations.get("w"))
    (pre,) = result.preemptions
    assert pre.reason == "fair_share" and pre.evidence["rule"] == "strict_improvement"
    churn = pre.evidence["churn"]
    assert churn["allowed"] and churn["gain_gpu_s"] > churn["cost_gpu_s"], churn
    assert "w" not in placed(result)


def test_a_job_open_to_the_free_cluster_starts_there_and_preempts_nothing() -> None:
    result = run()
    assert preempted(result) == {}
    assert placed(result) == {"w": (("j0", 2),)}


def test_the_gain_counts_the_free_gpus_of_another_cluster_it_accepts() -> None:
    """Open to both, but jupiter's GPUs are taken by a protected job: the gain is measured over both clusters,
    and ceres's victim is still worth it (no free GPUs anywhere it may go)."""
    full = running("r", "c", 4, on="j0", started_at=NOW - 60, protected_for=7200)
    result = schedule(snapshot(two(), tree=tree(a=0.4, b=0.4, c=0.2), usage={"a": 1e6, "b": 0, "c": 1e6},
                               running=[VICTIM, full], pending=[pending("w", "b", 2, min_runtime_s=60)],
                               settings=PolicySettings(), levels=("cluster",)))
    assert preempted(result) == {"v": "w"}, result.explanations.get("w")
    assert result.explanations.get("w") is None or result.explanations["w"].reason != PREEMPTION_COSTS_MORE
