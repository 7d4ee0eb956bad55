"""ADR 0090, by hand: the funding quota and its charge in weighted GPUs (a quota is entitlement × Σ GPUs × weight of
the ready nodes, a funded job is charged its GPUs × its nodes' weights once placed), and routing among the clusters
where a job starts now by its allocation's standing on each (least served, then the tightest fit, then the name)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import funding_capacity, funding_charge
from steward.policy.cycle import schedule
from steward.policy.model import Node, PendingJob, RunningJob, Snapshot
from steward.policy.outlook import outlook
from steward.policy.plan import CyclePlan
from steward.policy.reasons import explanation_text
from steward.policy.routing import choose_cluster, chosen_by
from tests.unit.policy.builders import HOUR, NOW, pending, running, snapshot, tree

WEIGHTS = {"H100": 1.0, "A100": 0.55, "V100": 0.25}


def weighted(**kw: Any) -> PolicySettings:
    return PolicySettings(gpu_model_weights=WEIGHTS, weighted_funding=True, **kw)


@pytest.mark.parametrize(
    ("placement", "weights", "want"),
    [
        ((("h", 4),), {"h": 1.0}, 4.0),
        ((("v", 4),), {"v": 0.25}, 1.0),
        ((("a", 8), ("v", 8)), {"a": 0.55, "v": 0.25}, 8 * 0.55 + 8 * 0.25),  # a gang over two models: per node
        ((("gone", 2),), {}, 2.0),  # a node gone from the snapshot weighs 1 (as the books' unknown run)
        ((), {}, 0.0),
    ],
)
def test_a_funded_jobs_charge_is_its_gpus_times_its_nodes_weights(
    placement: tuple[tuple[str, int], ...], weights: dict[str, float], want: float
) -> None:
    assert funding_charge(placement, weights) == pytest.approx(want)


@pytest.mark.parametrize(
    ("nodes", "want"),
    [
        (((8, "H100"), (8, "V100")), 8 + 2.0),
        (((8, "A100"),), 4.4),
        (((8, "T4"),), 8.0),  # a model with no weight weighs 1
        ((), 0.0),
    ],
)
def test_the_capacity_a_quota_is_a_share_of_is_weighted(nodes: tuple[tuple[int, str], ...], want: float) -> None:
    assert funding_capacity(nodes, weighted()) == pytest.approx(want)
    assert funding_capacity(nodes, PolicySettings()) == sum(g for g, _ in nodes)  # no weights: plain GPUs
    # weights set, `weighted_funding` off (every preset): the quota is a share of the plain GPUs
    assert funding_capacity(nodes, PolicySettings(gpu_model_weights=WEIGHTS)) == sum(g for g, _ in nodes)


class AskedWeights(PolicySettings):
    """Settings that record every model whose funding weight is asked."""

    asked: ClassVar[list[str]] = []

    def funding_weight(self, model: str) -> float:
        AskedWeights.asked.append(model)
        return super().funding_weight(model)


@pytest.mark.parametrize(
    ("case", "settings", "weight_of", "weights_set"),
    [
        ("weights set", {"gpu_model_weights": WEIGHTS, "weighted_funding": True},
         {"h1": 1.0, "h2": 1.0, "v1": 0.25, "v2": 0.25, "v3": 0.25}, True),
        # every weight 1: the map is left empty, every node weighing 1 as one not in it does
        ("weights set, weighted_funding off", {"gpu_model_weights": WEIGHTS}, {}, False),
        ("no weights", {}, {}, False),
    ],
)
def test_the_cycle_asks_each_models_funding_weight_once(
    case: str, settings: dict[str, Any], weight_of: dict[str, float], weights_set: bool
) -> None:
    """The weights are read every cycle, over every node: once per model, not once per node (issue 20's pairs)."""
    nodes = tuple(Node(n, 8, "H100" if n[0] == "h" else "V100", ("b0",), "ready")
                  for n in ("h1", "h2", "v1", "v2", "v3"))
    s = AskedWeights(**settings)
    AskedWeights.asked.clear()
    plan = CyclePlan(snapshot(nodes=nodes, settings=s))
    assert sorted(AskedWeights.asked) == ["H100", "V100"], case
    assert (plan.weight_of, plan.weights_set) == (weight_of, weights_set), case
    AskedWeights.asked.clear()
    assert funding_capacity([(n.gpus, n.model) for n in nodes], s) == (16 + 24 * 0.25 if weights_set else 40), case
    assert sorted(AskedWeights.asked) == ["H100", "V100"], case


def two_models() -> tuple[Node, ...]:
    """One 8-GPU H100 node (weight 1) and one 8-GPU V100 node (weight 0.25): 16 GPUs, 10 weighted GPUs."""
    return (Node("h", 8, "H100", ("b0",), "ready"), Node("v", 8, "V100", ("b1",), "ready"))


@pytest.mark.parametrize(
    ("case", "running_on", "funded_before", "funded_after"),
    [
        # a (share 0.5) runs 6 H100 GPUs: 6 of its 8 plain GPUs, but 6 of its 5 weighted ones: no entitlement left
        ("h100 over its quota", (("h", 6),), True, False),
        # a runs all 8 V100 GPUs: its whole plain quota, but 2 of its 5 weighted GPUs: funded
        ("v100 under its quota", (("v", 8),), False, True),
        ("both under", (("v", 4),), True, True),
    ],
)
def test_the_funding_decision_reads_weighted_gpus(
    case: str, running_on: tuple[tuple[str, int], ...], funded_before: bool, funded_after: bool
) -> None:
    jobs = [running(f"r{k}", "a", g, n) for k, (n, g) in enumerate(running_on)]
    want = {"plain": funded_before, "weighted": funded_after}
    for name, s in (("plain", PolicySettings()), ("weighted", weighted())):
        snap = snapshot(nodes=two_models(), tree=tree(a=0.5, b=0.5), running=jobs,
                        pending=[pending("w", "a", 1)], settings=s)
        result = schedule(snap)
        (p,) = result.placements
        assert p.funded is want[name], (case, name)
        funding = p.evidence["funding"]
        charged = funding_charge(running_on, {"h": s.model_weight("H100"), "v": s.model_weight("V100")})
        assert funding["funded_gpus_before"] == pytest.approx(charged)
        assert funding["quota_gpus"] == pytest.approx(0.5 * (16 if name == "plain" else 10))
        assert ("units" in funding) is (name == "weighted")


def test_a_placement_is_charged_at_the_weight_of_the_nodes_it_takes() -> None:
    # w1 takes the V100 node's GPUs (tightest fit: v has 1 free), charged 1 × 0.25; w2 then sees 6 + 0.25 before it
    snap = snapshot(nodes=two_models(), tree=tree(a=0.9, b=0.1),
                    running=[running("r0", "a", 7, "v"), running("r1", "a", 6, "h")],
                    pending=[pending("w1", "a", 1, 1.0), pending("w2", "a", 1, 2.0)], settings=weighted())
    result = schedule(snap)
    by = {p.job_id: p for p in result.placements}
    assert by["w1"].assignments == (("v", 1),)
    assert by["w1"].evidence["funding"]["charged"] == pytest.approx(0.25)
    assert by["w2"].evidence["funding"]["funded_gpus_before"] == pytest.approx(7 * 0.25 + 6 + 0.25)


def test_a_waiting_jobs_explanation_says_weighted_gpus() -> None:
    # a holds all 8 H100 GPUs (8 weighted GPUs of its 5) and b the V100 node: nothing is free, a's job is explained
    snap = snapshot(nodes=two_models(), tree=tree(a=0.5, b=0.5),
                    running=[running("r0", "a", 8, "h"), running("r1", "b", 8, "v")],
                    pending=[pending("w", "a", 1)], settings=weighted())
    e = schedule(snap).explanations["w"]
    assert e.reason == "entitlement_used"
    assert e.evidence["funding"] == {"allocation": "a", "funded_gpus": 8.0, "quota_gpus": 5.0,
                                     "units": "weighted_gpus"}
    assert "(8 of 5.0 weighted GPUs funded)" in explanation_text(e)


def test_the_submit_preview_reads_the_same_weighted_figures() -> None:
    nodes = two_models()
    job = pending("new", "a", 1)
    o = outlook(job, tree(a=0.5, b=0.5), 16, [running("r0", "a", 6, "h")], [], weighted(), nodes=nodes)
    assert (o.funded, o.reason, o.in_use_gpus, o.entitled_gpus) == (False, "entitlement_used", 6.0, 5.0)
    assert "6 of its 5 entitled weighted GPUs" in o.message and o.to_dict()["units"] == "weighted_gpus"
    plain = outlook(job, tree(a=0.5, b=0.5), 16, [running("r0", "a", 6, "h")], [], PolicySettings(), nodes=nodes)
    assert (plain.funded, plain.entitled_gpus) == (True, 8.0) and "units" not in plain.to_dict()


# ---- routing: among the clusters where it starts now, the least served ----

@pytest.mark.parametrize(
    ("options", "served", "want", "by"),
    [
        ([("ceres", 0), ("jupiter", 4)], None, "ceres", "tightest_fit"),  # no standings: ADR 0057's rule
        ([("ceres", 0), ("jupiter", 4)], {"ceres": 0.9, "jupiter": 0.1}, "jupiter", "least_served"),
        ([("ceres", 4), ("jupiter", 0)], {"ceres": 0.1, "jupiter": 0.9}, "ceres", "least_served"),
        ([("ceres", 4), ("jupiter", 0)], {"ceres": 0.0, "jupiter": 0.0}, "jupiter", "tightest_fit"),  # a tie
        ([("ceres", 2), ("jupiter", 2)], {"ceres": 0.5, "jupiter": 0.5}, "ceres", "tightest_fit"),  # then the name
        ([("ceres", 0), ("jupiter", 4)], {"ceres": math.inf, "jupiter": 3.0}, "jupiter", "least_served"),
        ([("jupiter", 4)], {"ceres": 0.0, "jupiter": 3.0}, "jupiter", "only"),  # the only one that takes it now
    ],
)
def test_the_choice_among_clusters_where_it_starts_now(
    options: list[tuple[str, int]], served: dict[str, float] | None, want: str, by: str
) -> None:
    assert choose_cluster(options, served) == want
    assert chosen_by(options, served, want) == by


def two_clusters(used_on_jupiter: int = 4) -> tuple[tuple[Node, ...], list[RunningJob]]:
    """ceres and jupiter, one 8-GPU node each; b holds 7 GPUs of ceres (the tighter fit for a 1-GPU job) and
    `used_on_jupiter` of jupiter (0: jupiter's node is wholly free)."""
    nodes = (Node("c0", 8, "H100", ("ceres", "b0"), "ready", "ceres"),
             Node("j0", 8, "H100", ("jupiter", "b0"), "ready", "jupiter"))
    jobs = [running("rb", "b", 7, "c0")]
    if used_on_jupiter:
        jobs.append(running("rb2", "b", used_on_jupiter, "j0"))
    return nodes, jobs


ON = PolicySettings(route_by_standing=True)


def routed(cluster_usage: dict[str, dict[str, float]] | None, s: PolicySettings = ON,
           job: PendingJob | None = None, used_on_jupiter: int = 4) -> dict[str, Any]:
    nodes, jobs = two_clusters(used_on_jupiter)
    snap: Snapshot = snapshot(nodes=nodes, tree=tree(a=0.5, b=0.5), running=jobs,
                              pending=[job or pending("w", "a", 1)], settings=s,
                              usage={p: sum(u.get(p, 0.0) for u in (cluster_usage or {}).values()) for p in "ab"},
                              cluster_usage=cluster_usage)
    (p,) = schedule(snap).placements
    routing: dict[str, Any] = p.evidence["routing"]
    return routing


def test_a_job_goes_where_its_allocation_is_least_served_among_clusters_that_take_it_now() -> None:
    # a has used ceres a lot and jupiter not at all: its job goes to jupiter although ceres is the tighter fit
    r = routed({"ceres": {"a": 50 * HOUR, "b": 7 * HOUR}, "jupiter": {}})
    assert r["cluster"] == "jupiter" and r["chosen_by"] == "least_served"
    served = {c["cluster"]: c["served"] for c in r["candidates"]}
    assert served["jupiter"] == 0.0 and served["ceres"] > 0
    assert r["reason"].startswith("placed on jupiter (H100): would wait 0 s there against it would also start now "
                                  "on ceres, where its allocation is more served (")


def test_level_on_both_clusters_the_tightest_fit_decides() -> None:
    r = routed({"ceres": {"b": 7 * HOUR}, "jupiter": {}})  # a has used neither: 0 and 0
    assert r["cluster"] == "ceres" and r["chosen_by"] == "tightest_fit"
    assert "it would also start now on jupiter (a looser fit)" in r["reason"]


def test_the_setting_off_or_no_standings_per_cluster_route_by_the_tightest_fit_as_before() -> None:
    usage = {"ceres": {"a": 50 * HOUR}, "jupiter": {}}
    for s, cluster_usage in ((PolicySettings(), usage),  # the setting off (every preset)
                             (PolicySettings(route_by_standing=True, cluster_fair_share=False), usage),
                             (ON, None)):
        r = routed(cluster_usage, s)
        assert r["cluster"] == "ceres" and "chosen_by" not in r
        assert all("served" not in c for c in r["candidates"])


def test_it_never_waits_for_the_less_served_cluster_when_the_other_takes_it_now() -> None:
    # a's 2-GPU job fits only on jupiter now (ceres has 1 free), where a is far more served: it starts there now
    r = routed({"ceres": {}, "jupiter": {"a": 80 * HOUR}}, job=pending("w", "a", 2))
    assert r["cluster"] == "jupiter" and r["chosen_by"] == "only"
    ceres = next(c for c in r["candidates"] if c["cluster"] == "ceres")
    assert ceres["fits_now"] is False and ceres["served"] == 0.0


def test_a_pinned_allocations_job_goes_to_its_pin_however_served_it_is_there() -> None:
    r = routed({"ceres": {"a": 80 * HOUR}, "jupiter": {}},
               job=pending("w", "a", 1, clusters=("ceres",), pin="ceres"))
    assert r["cluster"] == "ceres" and r["pinned_to"] == "ceres" and r["chosen_by"] == "only"


def test_a_waiting_jobs_own_charge_does_not_decide_whether_it_is_funded() -> None:
    # funded while its allocation is below its quota before it starts (ADR 0017: the last job's overshoot is its
    # own); its charge is made once placed, at the weight of the nodes it took
    nodes = two_models()
    snap = snapshot(nodes=nodes, tree=tree(a=0.5, b=0.5), running=[running("r0", "a", 4, "h")],
                    pending=[pending("big", "a", 8)], settings=weighted(), now=NOW)
    (p,) = schedule(snap).placements
    # 4 of 5 weighted GPUs before: funded, though its 8 V100 GPUs (2 weighted) take a past its quota
    assert p.funded and p.assignments == (("v", 8),)
    assert p.evidence["funding"]["charged"] == pytest.approx(2.0)
