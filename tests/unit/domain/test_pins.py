"""Allocations pinned to a cluster (issue 25, ADR 0067; steward.domain.pins): SetAllocations' optional `pins`,
the rules of a pin (a registered cluster, one cluster per subtree), the event (AllocationsSet v4, old ones
upcast unchanged), its fold, and the refusal at submit of a job that asks for another cluster."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.allocation_history import AllocationsSetRecord, allocation_changes
from steward.domain.clusters import NO_CLUSTER, admits, effective_pin, pinned_clusters
from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import DomainError
from steward.domain.events import EVENT_TYPES
from steward.domain.pins import pin_of
from steward.domain.state import LedgerState, evolve
from steward.store.upcasting import upcast, validate


def fold(commands: list[Any], state: LedgerState | None = None) -> LedgerState:
    state = state or LedgerState()
    for cmd in commands:
        for ev in decide(state, cmd, 10.0):
            state = evolve(state, ev, 10.0)
    return state


BASE = fold([
    SetAllocations("cluster", {"lab": 0.5, "other": 0.5}, "setup"),
    SetAllocations("lab", {"p": 0.5, "q": 0.5}, "setup"),
    RegisterNode("h1", 8, "H100", ["h1"], cluster="ceres"),
    RegisterNode("a1", 8, "A100", ["a1"], cluster="jupiter"),
    RegisterNode("v1", 4, "V100", ["v1"], cluster="jupiter"),
])
LAB_ON_CERES = fold([SetAllocations("cluster", {}, "the lab's own H100s", pins={"lab": "ceres"})], BASE)


def refusal(state: LedgerState, cmd: Any) -> str | None:
    try:
        decide(state, cmd, 10.0)
    except DomainError as err:
        return str(err)
    return None


@pytest.mark.parametrize(("state", "cmd", "expected"), [
    (BASE, SetAllocations("cluster", {}, "own", pins={"lab": "ceres"}), None),
    (BASE, SetAllocations("lab", {}, "own", pins={"p": "jupiter"}), None),
    (BASE, SetAllocations("cluster", {"new": 0.0}, "own", pins={"new": "ceres"}), None),  # created and pinned
    (BASE, SetAllocations("cluster", {}, "own", pins={"lab": "mars"}),
     "the pin of 'lab': unknown cluster 'mars'; the registered clusters are ceres, jupiter"),
    (BASE, SetAllocations("cluster", {}, "own", pins={"p": "ceres"}), "'p' is not a child of 'cluster'"),
    (BASE, SetAllocations("cluster", {}, "own", pins={"lab": "bad name"}), "cluster name 'bad name' must be"),
    (BASE, SetAllocations("cluster", {}, "own", pins={"lab": ""}), "cluster name '' must not be empty"),
    (LAB_ON_CERES, SetAllocations("lab", {}, "own", pins={"p": "jupiter"}),
     "'lab' is pinned to cluster 'ceres', so its subtree runs only there; 'p' cannot be pinned to 'jupiter'"),
    (LAB_ON_CERES, SetAllocations("lab", {}, "own", pins={"p": "ceres"}), None),  # says what the parent says
    (LAB_ON_CERES, SetAllocations("lab", {}, "own", pins={"p": None}), "'p' cannot be unpinned: 'lab' is pinned"),
    (LAB_ON_CERES, SetAllocations("cluster", {}, "move", pins={"lab": "jupiter"}), None),
    (LAB_ON_CERES, SetAllocations("cluster", {}, "unpin", pins={"lab": None}), None),
    (fold([SetAllocations("lab", {}, "own", pins={"p": "jupiter"})], BASE),
     SetAllocations("cluster", {}, "own", pins={"lab": "ceres"}),
     "its descendant 'p' is pinned to cluster 'jupiter'; unpin it first"),
    (LedgerState(), SetAllocations("cluster", {"lab": 1.0}, "before nodes", pins={"lab": "ceres"}), None),
], ids=["pin a child", "pin a grandchild", "create pinned", "unknown cluster", "not a child", "bad name",
        "empty name", "against the ancestor", "same as the ancestor", "unpin under a pinned parent", "move",
        "unpin", "against a descendant", "no node registered yet"])
def test_a_pin_is_checked(state: LedgerState, cmd: SetAllocations, expected: str | None) -> None:
    why = refusal(state, cmd)
    if expected is None:
        assert why is None
    else:
        assert why is not None and expected in why, why


def test_the_pin_is_recorded_at_v4_folded_and_inherited() -> None:
    (ev,) = decide(BASE, SetAllocations("cluster", {}, "own", pins={"lab": "ceres"}), 10.0)
    assert ev.type == "AllocationsSet" and ev.payload["pins"] == {"lab": "ceres"}
    assert EVENT_TYPES["AllocationsSet"] == 4
    validate("AllocationsSet", 4, ev.payload)
    state = evolve(BASE, ev, 10.0)
    assert state.allocations["lab"].pin == "ceres"
    assert state.allocations["lab"].share == 0.5  # a pin keeps the share
    assert [pin_of(state, n) for n in ("lab", "p", "q", "other")] == ["ceres", "ceres", "ceres", ""]
    shares_only = fold([SetAllocations("cluster", {"lab": 0.6, "other": 0.4}, "more")], state)
    assert shares_only.allocations["lab"].pin == "ceres"  # a share keeps the pin
    unpinned = fold([SetAllocations("cluster", {}, "unpin", pins={"lab": None})], state)
    assert unpinned.allocations["lab"].pin is None and pin_of(unpinned, "p") == ""


def test_a_payload_without_pins_is_the_old_shape_and_old_versions_upcast_unchanged() -> None:
    (ev,) = decide(BASE, SetAllocations("cluster", {"lab": 0.5}, "same"), 10.0)
    assert "pins" not in ev.payload
    for version, payload in [(1, {"parent": "cluster", "shares": {"a": 0.5}, "reason": "r"}),
                             (3, {"parent": "cluster", "shares": {}, "reason": "r", "display_names": {"a": "A"}})]:
        assert upcast("AllocationsSet", version, payload) == payload
        validate("AllocationsSet", 4, payload)


def job(project: str, clusters: list[str] | None = None, gpus: int = 1, models: list[str] | None = None) -> SubmitJob:
    return SubmitJob("j", project, gpus, 60.0, ["true"], gpu_models=models or [], clusters=clusters or [])


@pytest.mark.parametrize(("cmd", "expected"), [
    (job("p"), None),
    (job("p", ["ceres"]), None),
    (job("p", ["ceres", "jupiter"]), None),  # accepts the pin among others
    (job("p", ["jupiter"]), "allocation 'p' is pinned to cluster 'ceres' (its jobs run only there), but the job "
                            "asks for cluster jupiter: ask for 'ceres' or for no cluster"),
    (job("other", ["jupiter"]), None),  # not pinned
    (job("p", gpus=9), "the largest placement this cluster could ever give is 8 GPUs (cluster 'ceres'"),
    (job("p", models=["A100"]), "is 0 GPUs"),  # the pin's cluster has no A100
    (job("other", gpus=12), None),  # jupiter's 12 GPUs: an unpinned gang may use them
], ids=["any cluster", "the pin", "the pin among others", "another cluster", "unpinned", "larger than the pin's",
        "a model the pin lacks", "unpinned gang"])
def test_a_job_of_a_pinned_allocation_is_checked_at_submit(cmd: SubmitJob, expected: str | None) -> None:
    why = refusal(LAB_ON_CERES, cmd)
    if expected is None:
        assert why is None
    else:
        assert why is not None and expected in why, why
        rejected = decide_or_reject(LAB_ON_CERES, cmd, 10.0)
        assert [e.type for e in rejected] == ["CommandRejected"]


@pytest.mark.parametrize(("clusters", "pin", "expected"), [
    ((), "", ()),
    (("jupiter",), "", ("jupiter",)),
    ((), "ceres", ("ceres",)),
    (("ceres", "jupiter"), "ceres", ("ceres",)),
    (("jupiter",), "ceres", (NO_CLUSTER,)),
])
def test_pinned_clusters(clusters: tuple[str, ...], pin: str, expected: tuple[str, ...]) -> None:
    assert pinned_clusters(clusters, pin) == expected


def test_no_cluster_admits_nothing_and_a_pin_holds_for_the_subtree() -> None:
    assert not admits((), (NO_CLUSTER,), "H100", "")  # not even the default cluster
    assert not admits((), (NO_CLUSTER,), "H100", "ceres")
    parents = {"p": "lab", "lab": "cluster"}
    assert effective_pin("p", parents, {"lab": "ceres"}) == "ceres"
    assert effective_pin("p", parents, {"lab": "ceres", "p": "ceres"}) == "ceres"
    assert effective_pin("p", parents, {}) == ""


def test_the_allocation_history_says_who_pinned_what() -> None:
    records = [AllocationsSetRecord(1, 1.0, "root", {"parent": "cluster", "shares": {"lab": 1.0}, "reason": "setup"}),
               AllocationsSetRecord(2, 2.0, "maria", {"parent": "cluster", "shares": {}, "reason": "own",
                                                     "pins": {"lab": "ceres"}}),
               AllocationsSetRecord(3, 3.0, "maria", {"parent": "cluster", "shares": {"lab": 0.5}, "reason": "less"}),
               AllocationsSetRecord(4, 4.0, "maria", {"parent": "cluster", "shares": {}, "reason": "any",
                                                     "pins": {"lab": None}})]
    rows = [(c.position, c.pin_before, c.pin_after, c.pin_set) for c in allocation_changes(records)]
    assert rows == [(1, None, None, False), (2, None, "ceres", True), (3, "ceres", "ceres", False),
                    (4, "ceres", None, True)]

