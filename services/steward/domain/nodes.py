"""Nodes in the ledger beyond registration: draining (a host empties itself for repair), resuming, and
retiring (a host gone for good, ADR 0078)."""

from __future__ import annotations

from collections.abc import Mapping

from steward.domain.commands import DrainNode, RegisterNode, ReportNodeDrained, ResumeNode, RetireNode
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.events import Event
from steward.domain.guards import require_node
from steward.domain.state import ACTIVE_STATES, ClusterNode, LedgerState, evolve


def jobs_on(state: LedgerState, node_id: str) -> list[str]:
    return sorted(j.job_id for j in state.jobs.values() if j.state in ACTIVE_STATES and node_id in j.nodes)


READY = "ready"
DRAINING = "draining"
RETIRING = "retiring"  # a node's state between a retirement asked while it was busy and its last attempt's end

WINDING_DOWN = frozenset({DRAINING, RETIRING})
"""The states an operator gives a node to empty it (a drain for repair, a retirement when empty): it takes no new
work and its attempts run on. Any other state but `ready` is the executor's view (`unhealthy`): down."""


def takes_new_work(state: str) -> bool:
    """Issue 3 "Draining", ADR 0081: only a ready node takes new work; draining, retiring and unhealthy nodes take
    none. The one reading of a node's state that every reader asks (the ledger's placement check, the policy's
    ready layout and placement, the API's free GPUs, the metrics), so they cannot disagree (ADR 0091)."""
    return state == READY


def winding_down(state: str) -> bool:
    """Whether a node in `state` is being emptied by an operator (draining or retiring, `WINDING_DOWN`): its idle
    GPUs are "draining" in the API's figures, not down, and a registration keeps the state (ADR 0082)."""
    return state in WINDING_DOWN


def require_ready(node: ClusterNode) -> None:
    """Issue 3 "Draining": only a ready node is drained (a draining one already is)."""
    if not takes_new_work(node.state):
        raise InvalidTransition(f"node '{node.node_id}' is {node.state}, not ready")


def require_draining(node: ClusterNode) -> None:
    if node.state != DRAINING:
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


KEPT_ON_REGISTRATION = WINDING_DOWN
"""The states an operator gives a node that registering it again keeps (ADR 0082): only `ResumeNode` makes a
draining node ready, and a retiring one is retired when its last attempt ends. `unhealthy` is the executor's
view of the node, not an operator's: a registration makes it ready as before."""


def state_kept(state: LedgerState, node_id: str) -> str | None:
    """The state a registration of `node_id` keeps (ADR 0082): a registered node's draining or retiring, even
    when the registration changes its GPUs, model, path, executor or cluster; None for a new node (or one retired,
    which comes back new and ready, ADR 0078) and for a ready or unhealthy one."""
    node = state.nodes.get(node_id)
    return node.state if node is not None and winding_down(node.state) else None


def foreign_kept(state: LedgerState, cmd: RegisterNode) -> int:
    """ADR 0091: the foreign load (GPUs another scheduler's work holds, as the executor's last heartbeat said) that a
    registration of a registered node keeps, at most its new GPU count; 0 for a new node and for one whose
    executor changes (the load was the old executor's report; the new one's heartbeat names its own). Before,
    every registration reset it to 0 until the executor's next heartbeat: Steward could place on GPUs in use."""
    node = state.nodes.get(cmd.node_id)
    if node is None or node.executor != cmd.executor:
        return 0
    return min(node.foreign_gpus, cmd.gpus)


def decide_retire(state: LedgerState, cmd: RetireNode, now: float) -> list[Event]:
    """ADR 0078: a node leaves the state for good, whatever its state (ready, draining, unhealthy), once no
    placed or running attempt holds its GPUs; its attempts are never declared lost or requeued by a
    retirement (drain the node first, or let the executor's losses end them). ADR 0081: asked `when_empty`
    while attempts hold it, the node is retiring (it takes no new work, its attempts run on) and
    `retirements_due` retires it in the decision that ends the last of them."""
    node = require_node(state, cmd.node_id)
    if not cmd.reason.strip():
        raise InvalidCommand("retiring a node needs a reason")
    busy = jobs_on(state, node.node_id)
    if busy and not cmd.when_empty:
        raise InvalidTransition(f"node '{node.node_id}' still runs {', '.join(busy)}: drain it first "
                                f"(steward node drain {node.node_id}), then retire it once it is empty, or retire "
                                f"it when its last attempt ends (--when-empty)")
    if busy:
        if node.state == RETIRING:
            raise InvalidTransition(f"node '{node.node_id}' is already retiring: it is retired when "
                                    f"{', '.join(busy)} end")
        return [Event(cmd.aggregate, "NodeRetirementPending", {
            "node_id": node.node_id, "reason": cmd.reason, "executor": node.executor, "cluster": node.cluster,
            "jobs": busy, "was": node.state, "requested_at": now,
        })]
    return [_retired(node, cmd.reason, now)]


def _retired(node: ClusterNode, reason: str, now: float) -> Event:
    return Event(f"node-{node.node_id}", "NodeRetired", {
        "node_id": node.node_id, "reason": reason, "executor": node.executor, "cluster": node.cluster,
        "gpus": node.gpus, "was": node.state, "retired_at": now,
    })


def retiring_nodes(nodes: Mapping[str, ClusterNode]) -> frozenset[str]:
    """The nodes of a node table that are retiring, read once per table (a node table is replaced, never changed
    in place: ADR 0072's memo), so the check costs nothing for a command when no node is retiring."""
    memo = _RETIRING_MEMO[0]
    if memo is not None and memo[0] is nodes:
        return memo[1]
    found = frozenset(n.node_id for n in nodes.values() if n.state == RETIRING)
    _RETIRING_MEMO[0] = (nodes, found)
    return found


_RETIRING_MEMO: list[tuple[Mapping[str, ClusterNode], frozenset[str]] | None] = [None]


def retirements_due(state: LedgerState, events: list[Event], now: float) -> list[Event]:
    """ADR 0081, the second half: a retiring node is retired by the decision whose events end the last attempt
    holding its GPUs (a completion, a failure, a loss, a preemption's stop, a cancellation), in the same batch.
    `events` are the decision's own; the state after them is folded here only when one of them names a job
    that holds a retiring node."""
    retiring = retiring_nodes(state.nodes)
    if not retiring:
        return []
    touched: set[str] = set()
    for event in events:
        job = state.jobs.get(event.payload.get("job_id", ""))
        if job is not None and job.state in ACTIVE_STATES:
            touched.update(n for n, _gpus in job.assignments if n in retiring)
    if not touched:
        return []
    after = state
    for event in events:
        after = evolve(after, event, now)
    return [_retired(state.nodes[n], "retired once its last attempt ended (asked while it ran: see its "
                                      "NodeRetirementPending)", now)
            for n in sorted(touched) if not after.used.get(n)]
