"""Allocations pinned to a cluster (issue 25: "optionally an allocation can be pinned to a cluster (a lab's
own hardware)"; ADR 0067).

A manager of `parent` pins a child to a cluster with `SetAllocations.pins` (recorded in `AllocationsSet` v4),
with an actor and a reason like every share; `None` unpins it. The pin holds for the child's whole subtree
(`clusters.effective_pin`). The pinned allocation's jobs run only on that cluster (`clusters.pinned_clusters`,
read by routing), a job asking for another cluster is refused at submit (`require_no_pin_conflict`), and its
owed is capped by what that cluster could deliver (`steward.domain.budget`).

The rules of which pins a command may set have one home here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from steward.domain.clusters import cluster_name, nearest_pin, pin_conflict
from steward.domain.errors import InvalidAllocation, InvalidCommand
from steward.domain.ids import id_problem, shown
from steward.domain.state import LedgerState


def registered_clusters(state: LedgerState) -> list[str]:
    """The clusters some registered node is in, by name."""
    return sorted({cluster_name(n.cluster) for n in state.nodes.values()})


def pin_of(state: LedgerState, allocation: str) -> str:
    """The cluster `allocation` is pinned to, its own pin or its nearest pinned ancestor's ("" when none)."""
    allocations = state.allocations

    def step(name: str) -> tuple[str | None, str | None]:
        node = allocations.get(name)
        return (node.pin, node.parent) if node is not None else (None, None)

    return nearest_pin(allocation, step)


def require_valid_pins(state: LedgerState, parent: str, shares: Mapping[str, float], pins: Mapping[str, Any]) -> None:
    """A manager of `parent` pins `parent`'s children only (existing ones, or ones this command creates), each
    to a cluster some registered node is in (nothing is refused while no node is registered: the clusters are
    being set up), or None to unpin. A pin may not contradict the pin of an ancestor (the subtree of a pinned
    node is pinned there too) nor the own pin of a descendant (it would strand that descendant's jobs)."""
    if not pins:
        return
    children = {n for n, a in state.allocations.items() if a.parent == parent} | set(shares)
    known = registered_clusters(state)
    above = pin_of(state, parent)
    for child, pin in sorted(pins.items()):
        if child not in children:
            raise InvalidAllocation(f"'{child}' is not a child of '{parent}': no pin to set")
        if pin is None:
            if above:
                raise InvalidAllocation(f"'{child}' cannot be unpinned: '{parent}' is pinned to cluster "
                                        f"{above!r}, and its subtree with it")
            continue
        problem = id_problem(pin)
        if problem is not None:
            raise InvalidAllocation(f"the pin of '{child}': cluster name {shown(pin)} {problem}")
        if known and pin not in known:
            raise InvalidAllocation(f"the pin of '{child}': unknown cluster {pin!r}; the registered clusters "
                                    f"are {', '.join(known)}")
        if above and pin != above:
            raise InvalidAllocation(f"the pin of '{child}': '{parent}' is pinned to cluster {above!r}, so its "
                                    f"subtree runs only there; {child!r} cannot be pinned to {pin!r}")
        for name, node in sorted(state.allocations.items()):
            if node.pin and node.pin != pin and name != child and _under(state, name, child):
                raise InvalidAllocation(f"the pin of '{child}': its descendant {name!r} is pinned to cluster "
                                        f"{node.pin!r}; unpin it first (a subtree runs on one cluster)")


def _under(state: LedgerState, name: str, ancestor: str) -> bool:
    node = state.allocations.get(name)
    for _ in range(64):
        if node is None:
            return False
        if node.parent == ancestor:
            return True
        node = state.allocations.get(node.parent)
    return False


def require_no_pin_conflict(state: LedgerState, project: str, clusters: list[str]) -> str:
    """ADR 0067: a job of a pinned allocation that names clusters must accept the pin's; refused at submit
    with the reason (it could never be placed). Returns the pin ("" when none)."""
    pin = pin_of(state, project)
    why = pin_conflict(project, pin, clusters)
    if why is not None:
        raise InvalidCommand(why)
    return pin
