"""Allocations pinned to a cluster in routing (issue 25, ADR 0067), on random snapshots of two clusters: a
pinned allocation's jobs are placed on its pin's cluster only and their routing evidence offers no other
candidate; every other job still goes only where it starts now (ADR 0057's invariants hold for all)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.property.test_cluster_properties import CLUSTERS, snapshots
from tests.unit.policy.builders import check_routing

from steward.domain.clusters import pinned_clusters
from steward.policy.cycle import schedule
from steward.policy.model import Snapshot


@settings(max_examples=120, deadline=None)
@given(snapshots(), st.sampled_from(CLUSTERS))
def test_a_pinned_allocation_s_jobs_are_placed_on_its_pin_only(snap: Snapshot, pin: str) -> None:
    # project "a" pinned to `pin`, as the scheduler's bridge narrows its jobs
    pending = tuple(replace(j, clusters=pinned_clusters(j.clusters, pin), pin=pin) if j.project == "a" else j
                    for j in snap.pending)
    snap = replace(snap, pending=pending)
    result = schedule(snap)
    check_routing(snap, result)
    nodes = {n.id: n for n in snap.nodes}
    jobs = {j.id: j for j in pending}
    for p in result.placements:
        job = jobs[p.job_id]
        if job.pin:
            assert {nodes[n].cluster for n, _ in p.assignments} == {pin}, p
            routing = p.evidence["routing"]
            assert [c["cluster"] for c in routing["candidates"]] == [pin]
            assert routing["pinned_to"] == pin
        else:
            assert "pinned_to" not in p.evidence.get("routing", {})
    for job_id, e in result.explanations.items():
        assert ("pinned_to" in e.evidence) == bool(jobs[job_id].pin)
