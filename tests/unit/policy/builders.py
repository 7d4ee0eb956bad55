"""Builders for policy tests: each test says only what matters to its case."""

from __future__ import annotations

from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import AllocationTree, Node, PendingJob, RunningJob, Snapshot

NOW = 100_000.0
HOUR = 3600.0


def node(id: str, gpus: int = 8, path: tuple[str, ...] = ("b0",), state: Any = "ready", model: str = "default") -> Node:
    return Node(id, gpus, model, path, state)


def nodes(count: int, gpus: int = 8, per_block: int = 2, blocks_per_spine: int | None = None) -> tuple[Node, ...]:
    """`count` nodes n0.. in blocks of `per_block` (paths ("b0",), ...), or spine/block paths when
    `blocks_per_spine` is given."""
    out = []
    for i in range(count):
        block = i // per_block
        if blocks_per_spine:
            path: tuple[str, ...] = (f"s{block // blocks_per_spine}", f"b{block}")
        else:
            path = (f"b{block}",)
        out.append(Node(f"n{i}", gpus, "default", path))
    return tuple(out)


def tree(**shares: float) -> AllocationTree:
    """A flat tree: tree(a=.5, b=.5)."""
    return AllocationTree.flat(shares)


def nested(spec: dict[str, Any]) -> AllocationTree:
    return AllocationTree.from_nested(spec)


def pending(
    id: str,
    project: str = "a",
    gpus: int = 1,
    submitted_at: float = 0.0,
    min_runtime_s: float = HOUR,
    **kw: Any,
) -> PendingJob:
    return PendingJob(id, project, gpus, submitted_at, min_runtime_s, **kw)


def running(
    id: str,
    project: str = "a",
    gpus: int = 1,
    on: str | tuple[tuple[str, int], ...] = "n0",
    started_at: float = NOW - 2 * HOUR,
    protected_for: float = HOUR,
    funded: bool = True,
    last_checkpoint_at: float | None = None,
    **kw: Any,
) -> RunningJob:
    placement = ((on, gpus),) if isinstance(on, str) else on
    return RunningJob(
        id=id,
        project=project,
        gpus=gpus,
        placement=placement,
        started_at=started_at,
        protected_until=started_at + protected_for if funded else started_at,
        funded=funded,
        last_checkpoint_at=last_checkpoint_at,
        **kw,
    )


def snapshot(
    nodes: tuple[Node, ...] | None = None,
    tree: AllocationTree | None = None,
    usage: dict[str, float] | None = None,
    running: tuple[RunningJob, ...] | list[RunningJob] = (),
    pending: tuple[PendingJob, ...] | list[PendingJob] = (),
    settings: PolicySettings | None = None,
    now: float = NOW,
    levels: tuple[str, ...] = (),
    cluster_usage: dict[str, dict[str, float]] | None = None,
) -> Snapshot:
    return Snapshot(
        now=now,
        nodes=nodes if nodes is not None else (node("n0"),),
        tree=tree if tree is not None else AllocationTree.flat({"a": 0.5, "b": 0.5}),
        usage=usage or {},
        running=tuple(running),
        pending=tuple(pending),
        settings=settings or PolicySettings(),
        topology_levels=levels,
        cluster_usage=cluster_usage,
    )


def placed(result: Any) -> dict[str, tuple[tuple[str, int], ...]]:
    """job id → assignments of a CycleResult's placements."""
    return {p.job_id: p.assignments for p in result.placements}


def preempted(result: Any) -> dict[str, str]:
    """victim id → the job it was preempted for."""
    return {p.victim_id: p.for_job_id for p in result.preemptions}


def check_routing(snap: Snapshot, result: Any) -> list[dict[str, Any]]:
    """ADR 0057's invariants of one cycle's placements: no job on a model or cluster it excluded, no gang
    across clusters, the routing evidence on every routed placement (several clusters, or a job naming
    models or clusters) and on no other. Returns the routing evidence seen."""
    nodes = {n.id: n for n in snap.nodes}
    jobs = {j.id: j for j in snap.pending}
    several = len({n.cluster for n in snap.nodes}) > 1
    seen = []
    for p in result.placements:
        job = jobs[p.job_id]
        used = [nodes[n] for n, _ in p.assignments]
        assert len({n.cluster for n in used}) == 1, f"{p.job_id} spans clusters"
        assert not job.gpu_models or all(n.model in job.gpu_models for n in used), p
        assert not job.clusters or all(n.cluster in job.clusters for n in used), p
        if not (several or job.gpu_models or job.clusters):
            assert "routing" not in p.evidence  # one cluster, no request: placed as before clusters
            continue
        routing = p.evidence["routing"]
        assert routing["cluster"] == used[0].cluster and routing["models"] == sorted({n.model for n in used})
        moved = routing.get("moved_from")  # ADR 0068: it left the room being made for it on another cluster
        verb = "placed on" if moved is None else f"moved from {moved} to"
        assert moved != used[0].cluster and routing["reason"].startswith(f"{verb} {used[0].cluster} ")
        chosen = [c for c in routing["candidates"] if c["cluster"] == used[0].cluster]
        assert chosen and chosen[0]["fits_now"] and chosen[0]["estimated_wait_s"] == 0.0
        seen.append(routing)
    return seen
