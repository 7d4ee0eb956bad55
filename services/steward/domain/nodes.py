"""Nodes in the ledger beyond registration: draining (a host empties itself for repair), resuming, and
retiring (a host gone for good, ADR 0078)."""

from __future__ import annotations

from steward.domain.commands import DrainNode, ReportNodeDrained, ResumeNode, RetireNode
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.events import Event
from steward.domain.guards import require_node
from steward.domain.state import ACTIVE_STATES, ClusterNode, LedgerState


def jobs_on(state: LedgerState, node_id: str) -> list[str]:
    return sorted(j.job_id for j in state.jobs.values() if j.state in ACTIVE_STATES and node_id in j.nodes)


def require_ready(node: ClusterNode) -> None:
    """Issue 3 "Draining": only a ready node is drained (a draining one already is)."""
    if node.state != "ready":
        raise InvalidTransition(f"node '{node.node_id}' is {node.state}, not ready")


def require_draining(node: ClusterNode) -> None:
    if node.state != "draining":
        raise InvalidTransition(f"node '{node.node_id}' is {node.state}, not draining")


def require_empty(state: LedgerState, node: ClusterNode) -> None:
    """A node is drained once no placed or running job holds its GPUs."""
    busy = jobs_on(state, node.node_id)
    if busy:
        raise InvalidTransition(f"node '{node.node_id}' still runs {', '.join(busy)}")


def decide_drain(state: LedgerState, cmd: DrainNode, now: float) -> list[Event]:
    node = require_node(state, cmd.node_id)
    if not cmd.reason.strip():
        raise InvalidCommand("draining a node needs a reason")
    require_ready(node)
    return [Event(cmd.aggregate, "NodeDrainRequested", {
        "node_id": node.node_id, "reason": cmd.reason, "executor": node.executor,
        "jobs": jobs_on(state, node.node_id), "requested_at": now,
    })]


def decide_drained(state: LedgerState, cmd: ReportNodeDrained, now: float) -> list[Event]:
    node = require_node(state, cmd.node_id)
    require_draining(node)
    require_empty(state, node)
    return [Event(cmd.aggregate, "NodeDrained", {"node_id": node.node_id, "drained_at": now})]


def decide_resume(state: LedgerState, cmd: ResumeNode, now: float) -> list[Event]:
    node = require_node(state, cmd.node_id)
    require_draining(node)
    return [Event(cmd.aggregate, "NodeResumed", {"node_id": node.node_id, "reason": cmd.reason})]


def decide_retire(state: LedgerState, cmd: RetireNode, now: float) -> list[Event]:
    """ADR 0078: a node leaves the state for good, whatever its state (ready, draining, unhealthy), once no
    placed or running attempt holds its GPUs; its attempts are never declared lost or requeued by a
    retirement (drain the node first, or let the executor's losses end them)."""
    node = require_node(state, cmd.node_id)
    if not cmd.reason.strip():
        raise InvalidCommand("retiring a node needs a reason")
    busy = jobs_on(state, node.node_id)
    if busy:
        raise InvalidTransition(f"node '{node.node_id}' still runs {', '.join(busy)}: drain it first "
                                f"(steward node drain {node.node_id}), then retire it once it is empty")
    return [Event(cmd.aggregate, "NodeRetired", {
        "node_id": node.node_id, "reason": cmd.reason, "executor": node.executor, "cluster": node.cluster,
        "gpus": node.gpus, "was": node.state, "retired_at": now,
    })]
