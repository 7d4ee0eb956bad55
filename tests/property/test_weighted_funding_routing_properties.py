"""ADR 0090 on random snapshots of two clusters and three GPU models: the funding quota is entitlement × the ready
nodes' weighted GPUs and every funded GPU is charged at its node's weight (the figures a placement's evidence
carries are those sums, recomputed here from the snapshot alone, and the funded decision reads them); with every
weight 1 the cycle is the one without weights to the dict; and routing never sends a job to a cluster where it
would start later when another takes it now, and (with `route_by_standing`) among those that take it now never to
one where its allocation is more served (its standing there recomputed from the snapshot's usage per cluster and
the parts of ADR 0076)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.property.test_cluster_properties import CLUSTERS, MODELS, PROJECTS, snapshots
from tests.unit.policy.builders import check_routing

from steward.domain.clusters import admits
from steward.policy.cycle import schedule
from steward.policy.model import Snapshot
from steward.policy.usage import entitled_horizon_s

SHARES = {"a": 0.5, "b": 0.3, "c": 0.2}  # the tree of `snapshots()`
weights = st.fixed_dictionaries({m: st.sampled_from((0.25, 0.55, 1.0, 2.0)) for m in MODELS})


@settings(max_examples=150, deadline=None)
@given(snapshots(), weights)
def test_the_quota_and_the_charges_are_weighted_sums(snap: Snapshot, w: dict[str, float]) -> None:
    snap = replace(snap, settings=replace(snap.settings, gpu_model_weights=w, weighted_funding=True))
    result = schedule(snap)
    if result.preemptions or result.stops:
        return  # a room's or a stop's charge moves the tally between placements: checked by hand elsewhere
    model = {n.id: n.model for n in snap.nodes}
    capacity = sum(n.gpus * w[n.model] for n in snap.nodes if n.state == "ready")
    tally = {p: 0.0 for p in PROJECTS}
    for r in snap.running:
        if r.funded:
            tally[r.project] += sum(g * w[model[nid]] for nid, g in r.placement)
    jobs = {j.id: j for j in snap.pending}
    for p in result.placements:  # in the order the cycle placed them
        funding = p.evidence["funding"]
        assert math.isclose(funding["quota_gpus"], SHARES[p.project] * capacity, rel_tol=1e-9)
        assert math.isclose(funding["funded_gpus_before"], tally[p.project], rel_tol=1e-9, abs_tol=1e-9)
        quota = SHARES[p.project] * capacity
        if jobs[p.job_id].min_runtime_s > 0 and not math.isclose(tally[p.project], quota, rel_tol=1e-9):
            assert p.funded is (tally[p.project] < quota), (p, tally, quota)  # funded while below its quota
        if p.funded:
            charge = sum(g * w[model[nid]] for nid, g in p.assignments)
            if "charged" in funding:  # said when some weight is not 1
                assert math.isclose(funding["charged"], charge, rel_tol=1e-9)
            tally[p.project] += charge


@settings(max_examples=100, deadline=None)
@given(snapshots())
def test_every_weight_one_is_the_cycle_without_weights(snap: Snapshot) -> None:
    ones = replace(snap, settings=replace(snap.settings, gpu_model_weights=dict.fromkeys(MODELS, 1.0)))
    got, want = schedule(ones).to_dict(), schedule(snap).to_dict()
    got["evidence"].pop("settings")  # the setting itself is in the cycle's evidence; nothing else may differ
    want["evidence"].pop("settings")
    assert got == want


@st.composite
def with_usage_per_cluster(draw: st.DrawFn) -> Snapshot:
    snap = draw(snapshots())
    cluster_usage: dict[str, dict[str, float]] = {c: {} for c in CLUSTERS}
    usage: dict[str, float] = {}
    for p in PROJECTS:
        for c in CLUSTERS:
            u = draw(st.sampled_from((0.0, 0.0, draw(st.floats(0, 5e5)))))  # level at 0 often: ties
            cluster_usage[c][p] = u
            usage[p] = usage.get(p, 0.0) + u
    return replace(snap, usage=usage, cluster_usage=cluster_usage,
                   settings=replace(snap.settings, route_by_standing=True))


def served(snap: Snapshot, project: str, cluster: str) -> float:
    """ADR 0076 from first principles: usage on the cluster ÷ (its part × all GPUs × the window), its part its share
    × the cluster's GPUs ÷ the GPUs of the clusters its waiting and running jobs accept."""
    caps = {c: sum(n.gpus for n in snap.nodes if n.cluster == c and n.state == "ready") for c in CLUSTERS}
    accepted: set[str] = set()
    for j in (*snap.pending, *snap.running):
        if j.project == project:
            accepted |= {n.cluster for n in snap.nodes if admits(j.gpu_models, j.clusters, n.model, n.cluster)}
    accepted = {c for c in accepted if caps[c] > 0} or {c for c in caps if caps[c] > 0}
    if cluster not in accepted:
        return math.inf
    part = SHARES[project] * caps[cluster] / sum(caps[c] for c in accepted)
    entitled = part * sum(caps.values()) * entitled_horizon_s(snap.settings)
    assert snap.cluster_usage is not None
    return snap.cluster_usage[cluster].get(project, 0.0) / entitled if entitled > 0 else math.inf


@settings(max_examples=200, deadline=None)
@given(with_usage_per_cluster())
def test_routing_starts_a_job_now_where_its_allocation_is_least_served(snap: Snapshot) -> None:
    if len({n.cluster for n in snap.nodes}) < 2:
        return
    result = schedule(snap)
    seen = check_routing(snap, result)  # the chosen cluster takes it now (0 s), in one cluster, models honoured
    jobs = {j.id: j for j in snap.pending}
    for p, routing in zip([p for p in result.placements if "routing" in p.evidence], seen, strict=True):
        job = jobs[p.job_id]
        now = [c for c in routing["candidates"] if c["fits_now"]]
        chosen = routing["cluster"]
        assert any(c["cluster"] == chosen for c in now)  # never where it would start later while one takes it now
        if routing.get("chosen_by") == "room" or p.evidence.get("rule") == "backfill_reserved":
            continue
        mine = served(snap, job.project, chosen)
        for c in now:  # among the clusters that take it now, never where its allocation is more served
            theirs = served(snap, job.project, c["cluster"])
            assert math.isclose(c["served"] if c["served"] is not None else math.inf, theirs, rel_tol=1e-9)
            assert mine <= theirs or math.isclose(mine, theirs, rel_tol=1e-9), (routing, mine, theirs)
