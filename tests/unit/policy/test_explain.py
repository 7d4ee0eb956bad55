"""Explanations for every waiting job (issue 3 "Explanations")."""

from __future__ import annotations

import json

import pytest

from steward.policy.cycle import schedule
from steward.policy.reasons import (
    ENTITLEMENT_USED,
    NO_ALLOCATION,
    REASONS,
    TOO_LARGE,
    UNFUNDED_BY_REQUEST,
    WAITING_FOR_PROTECTION,
)
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree


def full_cluster():
    jobs = [
        running("ra", "a", 8, on="n0", started_at=NOW, protected_for=3 * HOUR),
        running("rb", "b", 8, on="n1", started_at=NOW, protected_for=HOUR),
    ]
    waiting = [
        pending("orphan", "zzz", 2, submitted_at=1),
        pending("free-ride", "a", 2, submitted_at=2, min_runtime_s=0),
        pending("a-more", "a", 2, submitted_at=3),
        pending("c-small", "c", 4, submitted_at=4),
        pending("c-huge", "c", 64, submitted_at=5),
        pending("c-block", "c", 16, submitted_at=6, topology_depth=1),
    ]
    return schedule(
        snapshot(
            nodes=nodes(2, per_block=2),
            tree=tree(a=0.4, b=0.4, c=0.2),
            usage={"a": 0, "b": 0, "c": 0},
            running=jobs,
            pending=waiting,
            levels=("block",),
        )
    )


@pytest.mark.parametrize(
    ("job", "reason", "blocking", "scope", "until", "words"),
    [
        ("orphan", NO_ALLOCATION, 2, "one node", None, "has no allocation"),
        ("free-ride", UNFUNDED_BY_REQUEST, 2, "one node", None, "min_runtime 0"),
        ("a-more", ENTITLEMENT_USED, 2, "one node", None, "no entitlement left (8 of 6.4 GPUs funded)"),
        ("c-small", WAITING_FOR_PROTECTION, 4, "one node", NOW + HOUR, "needs 4 more GPUs in one node"),
        ("c-huge", TOO_LARGE, 48, "the cluster (whole nodes)", None, "the largest has 16 schedulable GPUs"),
        (
            "c-block",
            WAITING_FOR_PROTECTION,
            16,
            "one block (whole nodes)",
            NOW + 3 * HOUR,
            "needs 16 more GPUs in one block",
        ),
    ],
)
def test_reason_codes_and_amounts(job, reason, blocking, scope, until, words):
    e = full_cluster().explanations[job]
    assert (e.reason, e.blocking_gpus, e.blocking_scope, e.blocking_until) == (reason, blocking, scope, until)
    assert words in e.text
    assert e.reason in REASONS


def test_every_waiting_job_has_a_position_overall_and_in_its_project():
    result = full_cluster()
    assert len(result.explanations) == 6
    positions = {k: (e.position, e.position_in_project) for k, e in result.explanations.items()}
    # every ratio is 0: projects by id (a, then c; b has nothing waiting), then names with no allocation
    assert [k for k, _ in sorted(positions.items(), key=lambda kv: kv[1][0])] == [
        "free-ride",
        "a-more",
        "c-small",
        "c-huge",
        "c-block",
        "orphan",
    ]
    assert positions["c-small"][1] == 1 and positions["c-huge"][1] == 2 and positions["c-block"][1] == 3
    assert positions["free-ride"][1] == 1 and positions["a-more"][1] == 2


def test_explanations_are_json_serialisable_and_carry_ranks():
    result = full_cluster()
    data = json.loads(json.dumps(result.to_dict()))
    e = next(x for x in data["explanations"] if x["job_id"] == "c-small")
    assert e["evidence"]["rank"]["levels"][0]["allocation"] == "c"
    assert "text" in e


def test_rank_words_when_outranked():
    jobs = [running("rb", "b", 8, on="n0")]
    result = schedule(
        snapshot(
            nodes=nodes(1),
            tree=tree(a=0.5, b=0.5),
            usage={"a": 0, "b": 0},
            running=jobs,
            pending=[pending("pa", "a", 8)],
        )
    )
    e = result.explanations["pa"]
    assert e.reason == "outranked" and "allocation a ranked 1 of 2 at its level" in e.text


def test_a_job_whose_models_or_clusters_no_node_offers_any_more_can_never_fit():
    """ADR 0078's leftover: jobs queued before the nodes they accept were retired waited for ever behind the
    others ("outranked", "needs N more GPUs"); the most the cluster could ever give a job is no more than the
    registered nodes it accepts hold in one cluster (`clusters.largest_in`, the rule a submission is refused by)."""
    from steward.policy.model import Node

    fleet = (
        Node("j0", 8, "A100", ("b0",), "ready", "jupiter"), Node("j1", 8, "A100", ("b0",), "ready", "jupiter"),
        Node("c0", 4, "H100", ("b1",), "ready", "ceres"),
    )
    busy = [running("r0", "a", 8, on="j0"), running("r1", "a", 8, on="j1"), running("r2", "a", 4, on="c0")]
    waiting = [
        pending("b200", "c", 2, submitted_at=1, gpu_models=("B200",)),
        pending("ceres-8", "c", 8, submitted_at=2, clusters=("ceres",)),
        pending("a100-8", "c", 8, submitted_at=3, gpu_models=("A100",)),
        pending("any-8", "c", 8, submitted_at=4),
    ]
    result = schedule(snapshot(nodes=fleet, tree=tree(a=0.5, c=0.5), usage={"a": 0, "c": 0}, running=busy,
                               pending=waiting))
    gone = result.explanations["b200"]
    assert (gone.reason, gone.blocking_gpus) == (TOO_LARGE, 2)
    assert "no registered node offers what it accepts (GPU models B200)" in gone.text, gone.text
    small = result.explanations["ceres-8"]
    assert (small.reason, small.blocking_gpus, small.evidence["largest_gpus"]) == (TOO_LARGE, 4, 4)
    assert "the largest has 4 schedulable GPUs" in small.text
    assert result.explanations["a100-8"].reason != TOO_LARGE and result.explanations["any-8"].reason != TOO_LARGE
