"""ADR 0091 (rules version 5): a cluster's nodes are served by one executor; a registration keeps a node's foreign
load; a restored session's request is checked against today's nodes and pins; and one reading of a node's state
(`domain.nodes.takes_new_work`, `winding_down`) that the ledger, the policy, the API and the metrics share."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from steward.domain import rules_version
from steward.domain.commands import (
    CancelJob,
    PlaceJob,
    RegisterNode,
    ReportHeartbeat,
    ReportJobStarted,
    RestoreSession,
    RetireNode,
    SetAllocations,
)
from steward.domain.decide import decide, decide_or_reject
from steward.domain.nodes import KEPT_ON_REGISTRATION, takes_new_work, winding_down
from steward.domain.state import LedgerState, evolve
from tests.unit.domain.builders import apply, submit, tree

V4, V5 = 4, 5


def base() -> LedgerState:
    """ceres: c1, c2 of executor `ceres`; the default cluster: d1 of executor `local`; jupiter: j1 of `jup`."""
    return apply(tree(cluster={"a": 0.6, "b": 0.4}, a={"a1": 1.0}, b={"b1": 0.5}),
                 RegisterNode("c1", 8, "H100", ["ceres", "c1"], "ceres", cluster="ceres"),
                 RegisterNode("c2", 8, "H100", ["ceres", "c2"], "ceres", cluster="ceres"),
                 RegisterNode("d1", 8, "V100", ["b0", "d1"], "local"),
                 RegisterNode("j1", 4, "A100", ["jupiter", "j1"], "jup", cluster="jupiter"))


# (case, the registration, refused under rules 5 (with the words of the reason), under rules 4 accepted always)
REGISTRATIONS: list[tuple[str, RegisterNode, str | None]] = [
    ("a new node of the cluster's executor", RegisterNode("c3", 8, "H100", ["ceres", "c3"], "ceres", cluster="ceres"),
     None),
    ("a new node of another executor in a named cluster",
     RegisterNode("c3", 8, "H100", ["ceres", "c3"], "slurm-b", cluster="ceres"),
     "node 'c3' cannot join cluster 'ceres' with executor 'slurm-b': executor 'ceres' serves its nodes (c1, c2)"),
    ("a new node of another executor in the default cluster, unnamed",
     RegisterNode("d2", 8, "V100", ["b0", "d2"], "k8s"),
     "node 'd2' cannot join cluster 'default' with executor 'k8s': executor 'local' serves its nodes (d1)"),
    ("the default cluster named by its name", RegisterNode("d2", 8, "V100", ["b0", "d2"], "k8s", cluster="default"),
     "executor 'local' serves its nodes (d1)"),
    ("a new node of its own cluster", RegisterNode("k1", 8, "H100", ["kube", "k1"], "k8s", cluster="kube"), None),
    ("one executor serving a second cluster", RegisterNode("c9", 8, "H100", ["west", "c9"], "ceres", cluster="west"),
     None),
    ("a node moving to a cluster another executor serves",
     RegisterNode("j1", 4, "A100", ["ceres", "j1"], "jup", cluster="ceres"),
     "node 'j1' cannot join cluster 'ceres' with executor 'jup'"),
    ("a node of the cluster moving to another executor (a migration, one node at a time)",
     RegisterNode("c1", 8, "H100", ["ceres", "c1"], "slurm-b", cluster="ceres"), None),
    ("a node from another cluster joining with the executor of neither",
     RegisterNode("d1", 8, "V100", ["ceres", "d1"], "slurm-b", cluster="ceres"),
     "node 'd1' cannot join cluster 'ceres' with executor 'slurm-b': executor 'ceres' serves its nodes (c1, c2)"),
    ("the only node of its cluster moving to another executor",
     RegisterNode("j1", 4, "A100", ["jupiter", "j1"], "jup-2", cluster="jupiter"), None),
    ("a node registered again unchanged", RegisterNode("c1", 8, "H100", ["ceres", "c1"], "ceres", cluster="ceres"),
     None),
    ("a node registered again with fewer GPUs", RegisterNode("c1", 4, "H100", ["ceres", "c1"], "ceres",
                                                             cluster="ceres"), None),
]


@pytest.mark.parametrize(("case", "cmd", "refused"), REGISTRATIONS, ids=[r[0] for r in REGISTRATIONS])
def test_a_cluster_has_one_executor(case: str, cmd: RegisterNode, refused: str | None) -> None:
    state = base()
    (now,) = decide_or_reject(state, cmd, 5.0, V5)
    (then,) = decide_or_reject(state, cmd, 5.0, V4)
    assert then.type == "NodeRegistered", case  # rules 4: any executor anywhere
    if refused is None:
        assert now.type == "NodeRegistered", now.payload
    else:
        assert now.type == "CommandRejected" and refused in now.payload["reason"], now.payload
        assert "A cluster has one executor" in now.payload["reason"]


def test_a_cluster_mixed_before_the_rule_still_takes_its_nodes_updates() -> None:
    """A store where two executors already share a cluster (recorded under rules 4): registering one of its nodes
    again unchanged, or with another GPU count, moves nothing and is decided as before; a new node still is not."""
    mixed = apply(base(), now=0.0)
    for ev in decide(mixed, RegisterNode("d2", 8, "V100", ["b0", "d2"], "k8s"), 1.0, V4):
        mixed = evolve(mixed, ev, 1.0)
    again = RegisterNode("d2", 4, "V100", ["b0", "d2"], "k8s")
    assert decide_or_reject(mixed, again, 2.0, V5)[0].type == "NodeRegistered"
    (new,) = decide_or_reject(mixed, RegisterNode("d3", 8, "V100", ["b0", "d3"], "k8s"), 2.0, V5)
    assert new.type == "CommandRejected" and "executor 'local' serves" in new.payload["reason"]


def test_a_whole_cluster_moves_to_another_executor_one_registration_at_a_time() -> None:
    """`steward cluster apply FILE --executor sim` on a store where the file's nodes are the node agent's (the demo on
    a stack that applied the same file before): each node of the cluster is registered again with the new executor
    (allowed, a migration), then the file's new nodes join a cluster that is the new executor's alone."""
    state = apply(tree(cluster={"a": 1.0}), *[RegisterNode(f"n{i}", 8, "V100", ["b", f"n{i}"], "local")
                                              for i in range(3)])
    for i in range(5):
        (ev,) = decide_or_reject(state, RegisterNode(f"n{i}", 8, "V100", ["b", f"n{i}"], "sim"), 1.0, V5)
        assert ev.type == "NodeRegistered", (i, ev.payload)
        state = evolve(state, ev, 1.0)
    assert {n.executor for n in state.nodes.values()} == {"sim"}
    (late,) = decide_or_reject(state, RegisterNode("x", 8, "V100", ["b", "x"], "local"), 2.0, V5)
    assert late.type == "CommandRejected"
    assert "executor 'sim' serves its nodes (n0, n1, n2, n3, n4)" in late.payload["reason"]


def test_a_refusal_names_a_few_of_many_nodes() -> None:
    state = apply(tree(cluster={"a": 1.0}),
                  *[RegisterNode(f"n{i}", 8, "V100", ["b", f"n{i}"], "local") for i in range(9)])
    (ev,) = decide_or_reject(state, RegisterNode("x", 8, "V100", ["b", "x"], "k8s"), 1.0, V5)
    assert "(n0, n1, n2, n3, n4, ... (9 in all))" in ev.payload["reason"]


def with_foreign(gpus: int = 6) -> LedgerState:
    return apply(base(), ReportHeartbeat("local", {}, ["d1"], foreign={"d1": gpus}), now=2.0)


# (case, the registration of d1 after a heartbeat reported 6 foreign GPUs on it, foreign GPUs after it: rules 5, 4)
FOREIGN: list[tuple[str, RegisterNode, int, int]] = [
    ("unchanged", RegisterNode("d1", 8, "V100", ["b0", "d1"], "local"), 6, 0),
    ("a new path", RegisterNode("d1", 8, "V100", ["b1", "d1"], "local"), 6, 0),
    ("fewer GPUs than the foreign load", RegisterNode("d1", 4, "V100", ["b0", "d1"], "local"), 4, 0),
    ("another cluster of its own", RegisterNode("d1", 8, "V100", ["west", "d1"], "local", cluster="west"), 6, 0),
    ("another executor", RegisterNode("d1", 8, "V100", ["b0", "d1"], "k8s"), 0, 0),
]


@pytest.mark.parametrize(("case", "cmd", "after", "before"), FOREIGN, ids=[f[0] for f in FOREIGN])
def test_a_registration_keeps_the_foreign_load(case: str, cmd: RegisterNode, after: int, before: int) -> None:
    state = with_foreign()
    assert state.nodes["d1"].foreign_gpus == 6
    for rules, expected in ((V5, after), (V4, before)):
        (ev,) = decide(state, cmd, 3.0, rules)
        assert ev.payload.get("foreign_gpus", 0) == expected, (case, rules, ev.payload)
        assert evolve(state, ev, 3.0).nodes["d1"].foreign_gpus == expected, (case, rules)


def test_the_kept_foreign_load_is_not_placed_on_and_the_next_heartbeat_still_rules() -> None:
    state = apply(with_foreign(), RegisterNode("d1", 8, "V100", ["b1", "d1"], "local"), now=3.0)
    assert len(state.free_gpus("d1")) == 2
    state = apply(state, submit("big", "a1", gpus=4), now=4.0)
    (ev,) = decide_or_reject(state, PlaceJob("big", {"d1": [0, 1, 2, 3]}, True), 5.0, V5)
    assert ev.type == "CommandRejected" and "not free" in ev.payload["reason"]
    state = apply(state, ReportHeartbeat("local", {}, ["d1"]), now=6.0)  # the foreign work ended
    assert state.nodes["d1"].foreign_gpus == 0 and len(state.free_gpus("d1")) == 8


def a_stopped_session(state: LedgerState, job_id: str, node: str, **request: Any) -> LedgerState:
    state = apply(state, submit(job_id, "a1", gpus=2, job_class="interactive", resumable=True, **request), now=10.0)
    state = apply(state, PlaceJob(job_id, {node: [0, 1]}, True), now=11.0)
    state = apply(state, ReportJobStarted(job_id, 1, 4242, started_at=11.0), now=11.0)
    return apply(state, CancelJob(job_id, "lunch"), now=12.0)


def retire_jupiter(state: LedgerState) -> LedgerState:
    return apply(state, RetireNode("j1", "the last A100 goes"), now=13.0)


def pin_to_ceres(state: LedgerState) -> LedgerState:
    return apply(state, SetAllocations("a", {"a1": 1.0}, "own hardware", pins={"a1": "ceres"}), now=13.0)


def shrink_ceres(state: LedgerState) -> LedgerState:
    return apply(state, RetireNode("c2", "c2 goes"), RegisterNode("c1", 1, "H100", ["ceres", "c1"], "ceres",
                                                                   cluster="ceres"), now=13.0)


# (case, the session's request and node, what changed since, the words of the refusal under rules 5 or None)
RESTORES: list[tuple[str, dict[str, Any], str, Any, str | None]] = [
    ("nothing changed", {"gpu_models": ["A100"]}, "j1", lambda s: s, None),
    ("its only model is gone", {"gpu_models": ["A100"]}, "j1", retire_jupiter,
     "unknown GPU model 'A100': the registered GPU models are H100, V100"),
    ("its only cluster is gone", {"clusters": ["jupiter"]}, "j1", retire_jupiter,
     "unknown cluster 'jupiter': the registered clusters are ceres, default"),
    ("one of its models is left", {"gpu_models": ["A100", "H100"]}, "j1", retire_jupiter,
     "unknown GPU model 'A100'"),  # the request names a model no node has: refused as a submission would be
    ("it accepted any and its node is gone", {}, "j1", retire_jupiter, None),
    ("its project pinned outside its cluster", {"clusters": ["default"]}, "d1", pin_to_ceres,
     "allocation 'a1' is pinned to cluster 'ceres'"),
    ("its project pinned, it accepted any", {}, "d1", pin_to_ceres, None),
    ("its cluster too small now", {"clusters": ["ceres"]}, "c1", shrink_ceres,
     "the job asks for 2 GPUs, but the largest placement this cluster could ever give is 1 GPUs"),
]


@pytest.mark.parametrize(("case", "request_", "node", "change", "refused"), RESTORES, ids=[r[0] for r in RESTORES])
def test_a_restore_is_checked_against_todays_nodes_and_pins(case: str, request_: dict[str, Any], node: str,
                                                            change: Any, refused: str | None) -> None:
    state = change(a_stopped_session(base(), "s1", node, **request_))
    restore = RestoreSession("s1", "s1-again")
    then = decide_or_reject(state, restore, 20.0, V4)
    assert [e.type for e in then] == ["SessionRestored", "JobSubmitted"], case  # rules 4: the request stood
    now = decide_or_reject(state, restore, 20.0, V5)
    if refused is None:
        assert [e.type for e in now] == ["SessionRestored", "JobSubmitted"], now
        assert now[1].payload["gpu_models"] == request_.get("gpu_models", [])
    else:
        (ev,) = now
        assert ev.type == "CommandRejected", ev.payload
        assert ev.payload["reason"].startswith("session 's1' cannot be restored with what it asked for: ")
        assert refused in ev.payload["reason"] and "Open a new session" in ev.payload["reason"], ev.payload


def test_the_rule_changes_are_rules_version_5() -> None:
    for name in ("one_executor_a_cluster", "registration_keeps_foreign", "restore_checks_request"):
        assert not rules_version.patched(name, 4) and rules_version.patched(name, 5)
    assert rules_version.CURRENT >= 5


# -- one reading of a node's state (ADR 0091) ---------------------------------------------------------------

# (state, takes new work, winding down: its idle GPUs "draining" in the API, not down)
NODE_STATES: list[tuple[str, bool, bool]] = [
    ("ready", True, False),
    ("draining", False, True),
    ("retiring", False, True),
    ("unhealthy", False, False),
]


@pytest.mark.parametrize(("node_state", "takes", "winds"), NODE_STATES)
def test_every_reader_reads_a_node_state_alike(node_state: str, takes: bool, winds: bool) -> None:
    from steward.api.clusters import node_gpus
    from steward.api.metrics import cluster_gpus
    from steward.policy.model import Node
    from steward.policy.placement import NodeLayout
    from steward.scheduler.bridge import policy_node

    assert takes_new_work(node_state) is takes and winding_down(node_state) is winds
    assert (node_state in KEPT_ON_REGISTRATION) is winds
    # the ledger: a placement on the node
    state = apply(base(), submit("j", "a1"), now=1.0)
    state = replace(state, nodes={**state.nodes, "d1": replace(state.nodes["d1"], state=node_state)})
    (placed,) = decide_or_reject(state, PlaceJob("j", {"d1": [0]}, True), 2.0)
    assert (placed.type == "JobPlaced") is takes, placed.payload
    # the policy: the node as the scheduler hands it over, in the placement's ready layout
    node = policy_node(state.nodes["d1"])
    assert node.schedulable is takes and NodeLayout([node]).ready == (takes,)
    assert NodeLayout([Node("x", 8, state=node.state)]).ready == (takes,)
    # the API: a node row's idle GPUs (busy, free, draining, down)
    row = {"node_id": "d1", "gpus": 8, "state": node_state, "foreign_gpus": 1}
    busy, free, draining, down = node_gpus(row, {"d1": 2})
    assert busy == 3 and (free, draining, down) == (5 if takes else 0, 5 if winds else 0,
                                                   5 if not takes and not winds else 0)
    # the metrics: the node's GPUs by state (no job holds any here)
    family = cluster_gpus([row], [])
    by = {s.labels["state"]: int(s.value) for s in family.samples}
    assert (by["free"] > 0) is takes and (by["draining"] > 0) is winds, by
