"""What a job asks for, checked against today's nodes and pins (DESIGN.md "Clusters and GPU models", "Placement"):
the checks a submission's request passes (ADR 0033, 0057, 0067), and a restored session's too (ADR 0091), in one
place so that the two cannot drift."""

from __future__ import annotations

from steward.domain import clusters
from steward.domain.commands import SubmitJob
from steward.domain.errors import InvalidCommand
from steward.domain.pins import require_no_pin_conflict
from steward.domain.rules_version import CURRENT, patched
from steward.domain.state import LedgerState


def largest_placement(state: LedgerState, gpu_models: list[str] | None = None,
                      cluster_names: list[str] | None = None) -> tuple[int, int, str]:
    """The most GPUs any placement could ever give a job (with this request of models and clusters) on the
    registered nodes, over how many nodes, in which cluster: every registered node it admits, whatever its
    state now (a drained or unhealthy node may come back), inside one cluster (gangs never span clusters)."""
    return clusters.largest_in(clusters.registered_catalogue(state.nodes), gpu_models or (), cluster_names or ())


def require_placeable(state: LedgerState, gpus: int, gpu_models: list[str] | None = None,
                      cluster_names: list[str] | None = None) -> None:
    """DESIGN.md "Placement": gang jobs are all-or-nothing, so a job asking more GPUs than all registered
    nodes it admits hold together in one cluster could never start; it is refused at submit, naming the
    largest placement. A cluster with no node registered yet refuses nothing (it is being set up)."""
    if not state.nodes:
        return
    largest, nodes, name = largest_placement(state, gpu_models, cluster_names)
    if gpus > largest:
        several = len(clusters.registered_catalogue(state.nodes).clusters) > 1 or gpu_models or cluster_names
        where = f"cluster {name!r}, " if several and name else ""
        asked = " it accepts" if gpu_models or cluster_names else ""
        raise InvalidCommand(
            f"the job asks for {gpus} GPUs, but the largest placement this cluster could ever give is "
            f"{largest} GPUs ({where}all {nodes} registered node{'s' if nodes != 1 else ''}{asked})")


def require_admissible_request(state: LedgerState, cmd: SubmitJob, rules: int = CURRENT) -> None:
    """The request of `cmd` (its GPUs, the GPU models and clusters it accepts, its project's pin) could be placed on
    the registered nodes: each model and cluster named is one some node has, a named cluster agrees with the pin,
    and (rules 2 on) the admissible nodes of one cluster hold its GPUs. Each refusal names the problem."""
    registered = clusters.registered_catalogue(state.nodes)
    clusters.require_known_request(cmd, registered.models, registered.clusters)
    pin = require_no_pin_conflict(state, cmd.project, cmd.clusters)
    if patched("placeable", rules):
        require_placeable(state, cmd.gpus, cmd.gpu_models, cmd.clusters or ([pin] if pin else []))
