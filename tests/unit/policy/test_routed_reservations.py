"""Reservations and preemption per cluster for routed jobs (issue 25, ADR 0071), hand-computed: a routed large
gang holds nodes on the one cluster where its reservation is due soonest, work behind it backfills those nodes
(routed work included) only when it leaves before the reservation is due, and the victim search takes the
cluster where making room costs least."""

from __future__ import annotations

from typing import Any

import pytest

from steward.policy.cycle import schedule
from steward.policy.model import Node
from steward.policy.reasons import RESERVED
from tests.unit.policy.builders import HOUR, NOW, pending, placed, preempted, running, snapshot, tree


def two() -> tuple[Node, ...]:
    """ceres: c0, c1 (H100); jupiter: j0, j1 (A100); 8 GPUs each."""
    return (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"), Node("c1", 8, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"),
            Node("j1", 8, "A100", ("jupiter",), "ready", "jupiter"))


def busy(ceres_h: float, jupiter_h: float, gpus: int = 8) -> list[Any]:
    """Project b's work on every node, protected `ceres_h` / `jupiter_h` more hours."""
    hours = {"c": ceres_h, "j": jupiter_h}
    return [running(f"b-{n}", "b", gpus, on=n, started_at=NOW, protected_for=hours[n[0]] * HOUR)
            for n in ("c0", "c1", "j0", "j1")]


ONLY = "reserved on ceres: due in 3.0 h there; the only cluster it may use"


def run(jobs: list[Any], work: list[Any]) -> Any:
    return schedule(snapshot(two(), tree=tree(a=0.5, b=0.5), usage={"a": 0, "b": 1e9}, running=work, pending=jobs,
                             levels=("cluster",)))


@pytest.mark.parametrize(("ceres_h", "jupiter_h", "accepts", "cluster", "due_h", "other_due_h", "reason"), [
    # due soonest on jupiter, though ceres comes first by name
    (3, 1, {}, "jupiter", 1, 3, "reserved on jupiter: due in 60 min there against 3.0 h on ceres"),
    (1, 3, {}, "ceres", 1, 3, "reserved on ceres: due in 60 min there against 3.0 h on jupiter"),
    # a tie: the tightest (both hold 16 exactly), then the name
    (2, 2, {}, "ceres", 2, 2, "reserved on ceres: due in 2.0 h there against 2.0 h on jupiter"),
    # only where it accepts, even if later there
    (3, 1, {"gpu_models": ("H100",)}, "ceres", 3, None, ONLY),
    (3, 1, {"clusters": ("ceres",)}, "ceres", 3, None, ONLY),
])
def test_a_routed_gang_is_reserved_on_the_cluster_where_it_is_due_soonest(
        ceres_h: float, jupiter_h: float, accepts: dict[str, Any], cluster: str, due_h: float,
        other_due_h: float | None, reason: str) -> None:
    result = run([pending("gang", "a", 16, **accepts)], busy(ceres_h, jupiter_h))
    r = result.reservation
    assert r is not None and r.job_id == "gang" and r.cluster == cluster
    assert r.ready_at == NOW + due_h * HOUR
    assert {n[0] for n in r.nodes} == {cluster[0]} and len(r.nodes) == 2
    routing = r.evidence["routing"]
    assert routing["cluster"] == cluster
    due = {c["cluster"]: c["ready_at"] for c in routing["candidates"]}
    other = "jupiter" if cluster == "ceres" else "ceres"
    want = {cluster: NOW + due_h * HOUR}
    if other_due_h is not None:
        want[other] = NOW + other_due_h * HOUR
    assert due == want
    assert routing["reason"] == reason
    assert result.explanations["gang"].reason == RESERVED


def test_a_routed_gang_no_cluster_can_ever_hold_gets_no_reservation() -> None:
    # funded work of an allocation it may not preempt (a is over-served) never frees: no plan anywhere
    result = schedule(snapshot(two(), tree=tree(a=0.5, b=0.5), usage={"a": 1e9, "b": 0}, running=busy(1, 1),
                               pending=[pending("gang", "a", 16)], levels=("cluster",)))
    assert result.reservation is None


@pytest.mark.parametrize(("job", "where"), [
    (pending("short", "a", 2, submitted_at=1, min_runtime_s=HOUR / 2), "j"),  # leaves before it is due: backfills
    (pending("long", "a", 2, submitted_at=1, min_runtime_s=8 * HOUR), None),  # would outlast it: waits
    (pending("unfunded", "a", 2, submitted_at=1, min_runtime_s=0), "j"),  # no protection: always may
    (pending("h100", "a", 2, submitted_at=1, min_runtime_s=HOUR / 2, gpu_models=("H100",)), None),  # not its model
])
def test_reserved_nodes_are_backfilled_by_routed_work_only_when_it_leaves_in_time(job: Any, where: str | None) -> None:
    # jupiter: 6 of 8 GPUs busy for 1 h on each node (due soonest there); ceres: full for 3 h
    work = busy(3, 1, 8)[:2] + busy(3, 1, 6)[2:]
    result = run([pending("gang", "a", 16), job], work)
    assert result.reservation is not None and result.reservation.cluster == "jupiter"
    got = placed(result)
    if where is None:
        assert job.id not in got
        return
    assert [n[0] for n, _ in got[job.id]] == [where]
    p = next(p for p in result.placements if p.job_id == job.id)
    assert p.evidence["rule"] == "backfill_reserved"
    assert p.evidence["reservation"]["job_id"] == "gang"
    assert p.evidence["routing"]["cluster"] == "jupiter"


def test_the_gang_takes_its_own_reserved_nodes_when_they_are_free() -> None:
    # its nodes were held (masked); once free it is placed there through the reserved path
    result = run([pending("gang", "a", 16)], [])
    assert placed(result)["gang"] in ((("c0", 8), ("c1", 8)), (("j0", 8), ("j1", 8)))


@pytest.mark.parametrize(("ceres_ckpt", "jupiter_ckpt", "victim", "cluster"), [
    (NOW - 5 * HOUR, NOW - 600, "b-j0", "jupiter"),  # less work lost on jupiter, though ceres comes first by name
    (NOW - 600, NOW - 5 * HOUR, "b-c0", "ceres"),
])
def test_the_victim_search_makes_room_on_the_cluster_where_it_costs_least(
        ceres_ckpt: float, jupiter_ckpt: float, victim: str, cluster: str) -> None:
    nodes = (Node("c0", 8, "H100", ("ceres",), "ready", "ceres"),
             Node("j0", 8, "A100", ("jupiter",), "ready", "jupiter"))
    work = [running("b-c0", "b", 8, on="c0", started_at=NOW - 6 * HOUR, protected_for=HOUR,
                    last_checkpoint_at=ceres_ckpt),
            running("b-j0", "b", 8, on="j0", started_at=NOW - 6 * HOUR, protected_for=HOUR,
                    last_checkpoint_at=jupiter_ckpt)]
    result = schedule(snapshot(nodes, tree=tree(a=0.5, b=0.5), usage={"a": 0, "b": 1e9}, running=work,
                               pending=[pending("p", "a", 8)]))
    assert preempted(result) == {victim: "p"}
    routing = result.preemptions[0].evidence["plan"]["routing"]
    assert routing["cluster"] == cluster
    assert [c["cluster"] for c in routing["compared"]] == ["ceres", "jupiter"]
    costs = {c["cluster"]: c["lost_gpu_s"] for c in routing["compared"]}
    assert costs[cluster] == min(costs.values()) < max(costs.values())
