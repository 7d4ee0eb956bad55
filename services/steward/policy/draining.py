"""Draining (issue 3 "Draining"): a node marked draining takes no new work, and its jobs are stopped
(with a checkpoint, and requeued) as soon as their protection ends, so hosts empty themselves for
repair without anyone negotiating.

An *unhealthy* node (its executor lost an attempt and has not spoken since, or reported the node
down) takes no new work either, but its running jobs are left alone: stopping them is impossible
when the executor is dead (the jobs are reported lost instead) and pure waste when it was only slow
(issue 26's benchmark: one pod lost on a loaded machine marked all 200 nodes of the Kubernetes
executor unhealthy, and the next cycle stopped 298 running jobs, none of them at fault).
"""

from __future__ import annotations

from collections.abc import Mapping

from steward.domain.nodes import takes_new_work as node_takes_new_work
from steward.policy.contract import in_grace, is_protected
from steward.policy.model import Node, RunningJob, Stop


def takes_new_work(node: Node) -> bool:
    """Issue 3 "Draining": only a `ready` node takes new work (`domain.nodes.takes_new_work`, ADR 0091)."""
    return node_takes_new_work(node.state)


def on_drained_node(job: RunningJob, nodes: Mapping[str, Node]) -> str | None:
    """The first node of the job's placement that is draining or gone (None if none): an unhealthy
    node's jobs are not stopped (module docstring)."""
    for node_id, _count in job.placement:
        node = nodes.get(node_id)
        if node is None or node.state == "draining":
            return node_id
    return None


def drain_stop(job: RunningJob, nodes: Mapping[str, Node], now: float) -> Stop | None:
    """Issue 3 "Draining": stop a job on a draining (or gone) node once its protection has ended
    (never inside it: DESIGN.md "nothing preempts it ... during that time"); checkpoint when the job
    can resume, and requeue it with its original submit time."""
    node_id = on_drained_node(job, nodes)
    if node_id is None or is_protected(job, now) or in_grace(job):
        return None
    node = nodes.get(node_id)
    return Stop(
        job_id=job.id,
        reason="drain",
        checkpoint=job.resumable,
        requeue=True,
        evidence={
            "node": node_id,
            "node_state": node.state if node is not None else "gone",
            "protected_until": job.protected_until,
            "funded": job.funded,
            "now": now,
        },
    )
