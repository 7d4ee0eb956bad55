"""Allocations pinned to a cluster in routing (issue 25, ADR 0067; steward.policy.routing, the bridge): a
pinned allocation's jobs go only to the pin's cluster, even when another would take them now, and the
evidence and the "why pending" words say so. Hand-computed."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
from steward.domain.decide import decide
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import LedgerState, evolve
from steward.policy.cycle import schedule
from steward.policy.model import Node, PendingJob
from steward.policy.reasons import explanation_text
from steward.scheduler.bridge import snapshot_of
from tests.unit.policy.builders import NOW, pending, placed, running, snapshot


def two() -> tuple[Node, ...]:
    return (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"))


def pinned(id: str, gpus: int, pin: str, clusters: tuple[str, ...] | None = None, **kw: Any) -> PendingJob:
    return pending(id, "a", gpus, clusters=clusters if clusters is not None else (pin,), pin=pin, **kw)


JUPITER_FULL = running("r", "b", 8, on="j0", started_at=NOW - 600, protected_for=600 + 2400)


# (case, pending job, where it is placed or None, words in the routing reason or the explanation)
CASES: list[tuple[str, PendingJob, str | None, str]] = [
    ("unpinned: where it starts now", pending("p", "a", 4), "c0",
     "placed on ceres (H100): would wait 0 s there against an estimated 40 min on jupiter"),
    ("pinned to the full cluster: waits", pinned("p", 4, "jupiter"), None,
     "its allocation is pinned to cluster jupiter (0 GPUs it accepts free there): it runs only there"),
    ("pinned to the free cluster", pinned("p", 4, "ceres"), "c0",
     "placed on ceres (H100): would wait 0 s there; its allocation is pinned to ceres"),
]


@pytest.mark.parametrize(("case", "job", "node", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_pinned_job_goes_only_to_its_pin(case: str, job: PendingJob, node: str | None, words: str) -> None:
    result = schedule(snapshot(two(), running=[JUPITER_FULL], pending=[job]))
    if node is None:
        assert placed(result) == {}
        e = result.explanations[job.id]
        assert e.evidence["pinned_to"] == {"cluster": "jupiter", "free_gpus": 0}
        assert words in explanation_text(e)
        return
    assert placed(result) == {job.id: ((node, 4),)}
    routing = result.placements[0].evidence["routing"]
    assert routing["reason"] == words
    assert [c["cluster"] for c in routing["candidates"]] == ([job.pin] if job.pin else ["ceres", "jupiter"])
    assert routing.get("pinned_to", "") == job.pin


def test_a_pinned_job_never_starts_elsewhere_while_its_cluster_fills_and_frees() -> None:
    # one cluster only has room, over several jobs: none of the pinned ones goes there
    jobs = [pinned(f"p{i}", 2, "jupiter", submitted_at=float(i)) for i in range(3)]
    result = schedule(snapshot(two(), running=[JUPITER_FULL], pending=jobs))
    assert placed(result) == {}
    free = schedule(snapshot(two(), pending=jobs))
    assert {n for p in placed(free).values() for n, _ in p} == {"j0"}


def fold(commands: list[Any]) -> LedgerState:
    state = LedgerState()
    for cmd in commands:
        for ev in decide(state, cmd, 10.0):
            state = evolve(state, ev, 10.0)
    return state


@pytest.mark.parametrize(("project", "asks", "clusters", "pin"), [
    ("p", [], ("ceres",), "ceres"),  # pinned through its parent
    ("p", ["ceres", "jupiter"], ("ceres",), "ceres"),
    ("o", ["jupiter"], ("jupiter",), ""),  # unpinned: as it asked
    ("o", [], (), ""),
])
def test_the_bridge_narrows_a_pinned_allocation_s_jobs_to_its_pin(project: str, asks: list[str],
                                                                  clusters: tuple[str, ...], pin: str) -> None:
    state = fold([
        SetAllocations("cluster", {"lab": 0.5, "o": 0.5}, "setup"),
        SetAllocations("lab", {"p": 1.0}, "setup"),
        RegisterNode("c0", 8, "H100", ["c0"], cluster="ceres"),
        RegisterNode("j0", 8, "A100", ["j0"], cluster="jupiter"),
        SetAllocations("cluster", {}, "the lab's own H100s", pins={"lab": "ceres"}),
        SubmitJob("j", project, 1, 60.0, ["true"], clusters=asks),
    ])
    (job,) = snapshot_of(state, {}, PolicySettings(), 20.0).pending
    assert (job.clusters, job.pin) == (clusters, pin)
