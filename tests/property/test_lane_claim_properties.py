"""ADR 0099, the debug quota read as a claim: whatever the snapshot, a claim takes only funded work out of
protection of another allocation running above its entitlement (or one strict improvement allows), for a
qualified lane job, with the claim's grace; with the setting off no preemption is a claim."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.property.test_policy_properties import EXAMPLES, NOW, snapshots

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.lane import lane_pending
from steward.policy.model import AllocationTree, Node, PendingJob, RunningJob, Snapshot
from steward.policy.preemption import CLAIM_RULE


@st.composite
def claim_snapshots(draw: st.DrawFn) -> Snapshot:
    snap = draw(snapshots())
    s = PolicySettings.steward(
        reservation_min_gpus=snap.settings.reservation_min_gpus, lane_claim=True,
        lane_claim_grace_s=draw(st.sampled_from([None, 0.0, 20.0, 30.0])),
        lane_victim_max_gpus=draw(st.sampled_from([2, 8])),
    )
    return replace(snap, settings=s)


@st.composite
def full_of_funded_work(draw: st.DrawFn) -> Snapshot:
    """The case the claim is for: full nodes of small funded jobs (some out of protection, some of allocations
    running above their entitlement) and qualified debug jobs waiting."""
    shares = draw(st.lists(st.floats(0.05, 0.5), min_size=3, max_size=3))
    tree = AllocationTree.flat({p: x / max(1.0, sum(shares)) for p, x in zip(("a", "b", "c"), shares, strict=True)})
    n = draw(st.integers(1, 2))
    nodes = tuple(Node(f"n{i}", 8, "default", ("s0", "b0")) for i in range(n))
    running: list[RunningJob] = []
    for i in range(n):
        free = 8
        while free:
            g = min(free, draw(st.sampled_from([1, 1, 2, 4])))
            free -= g
            started = NOW - draw(st.floats(0, 6 * 3600))
            k = len(running)
            running.append(RunningJob(
                f"r{k}", draw(st.sampled_from(["a", "b", "c"])), g, ((f"n{i}", g),), started,
                started + draw(st.sampled_from([0.0, 600.0, 3600.0, 8 * 3600.0])),
                draw(st.sampled_from([True, True, True, False])),
                last_checkpoint_at=draw(st.one_of(st.none(), st.floats(started, NOW))), resumable=draw(st.booleans()),
                submitted_at=started - 10,
            ))
    pending = [PendingJob(f"d{j}", draw(st.sampled_from(["a", "b", "c"])), draw(st.sampled_from([1, 2])),
                          NOW - draw(st.floats(0, 600)), 300.0, klass="debug")
               for j in range(draw(st.integers(1, 3)))]
    usage = {p: draw(st.floats(0, 5e6)) for p in ("a", "b", "c")}
    s = PolicySettings.steward(lane_claim=True, lane_claim_grace_s=draw(st.sampled_from([None, 0.0, 20.0])),
                               lane_victim_max_gpus=draw(st.sampled_from([2, 8])))
    return Snapshot(NOW, nodes, tree, usage, tuple(running), tuple(pending), s)


@EXAMPLES
@given(st.one_of(snapshots(), claim_snapshots(), full_of_funded_work()))
def test_a_claim_takes_only_what_runs_above_entitlement_out_of_protection(snap: Snapshot) -> None:
    result = schedule(snap)
    s, tree = snap.settings, snap.tree
    capacity = sum(n.gpus for n in snap.nodes if n.state == "ready")
    jobs = {j.id: j for j in snap.pending}
    by_id = {r.id: r for r in snap.running}
    for p in result.preemptions:
        if p.evidence["rule"] != CLAIM_RULE:
            continue
        w, v = jobs[p.for_job_id], by_id[p.victim_id]
        assert s.lane_claim and lane_pending(w, s) and p.evidence["lane"]
        assert v.funded and v.protected_until <= NOW and v.preemption_requested_at is None
        assert v.project != w.project  # its own allocation's work is a trade (ADR 0021)
        grace = s.preemption_grace_s if s.lane_claim_grace_s is None else s.lane_claim_grace_s
        assert p.grace_ends_at == NOW + grace
        check = p.evidence["check"]
        if check.get("strict_improvement", True) or check["claim"]["victim_allocation"] is None:
            continue  # strict improvement held as well (its own property), or the victim has no allocation
        claim = check["claim"]
        assert claim["above_entitlement"]
        for r in claim["readings"]:
            assert r["running_gpus"] - r["freed_gpus"] >= r["entitled_gpus"]
        # the last reading is DESIGN.md's in-full one: the allocation's entitlement × the capacity
        assert claim["readings"][-1]["entitled_gpus"] == pytest.approx(
            tree.entitlement(claim["victim_allocation"]) * capacity)
