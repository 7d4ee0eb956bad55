"""The policy core (DESIGN.md "The policy"): pure, no IO, no clock, no randomness — time (float
seconds) and ids come in as arguments, and the same input always gives the same output.

One concept per module:

- `settings`    PolicySettings and the presets `steward`, `ai2`, `fair-tree`, `fifo-priority`
- `model`       Node, PendingJob, RunningJob, Snapshot in; Placement, Preemption, Stop,
                Reservation, Explanation, CycleResult out
- `tree`        the org tree, shares, entitlement, validation
- `usage`       GPU-seconds in a sliding window or with decay, batch and incremental
- `ordering`    hierarchical fair share: standing of every allocation, the global order
- `contract`    funded vs unfunded, protection, lost work, requeue
- `preemption`  strict improvement, victim choice
- `placement`   the capacity index, best/first fit, gangs, fragmentation
- `reservation` the head large gang's reservation and the backfill rule
- `draining`    draining and unhealthy nodes
- `sessions`    interactive sessions: cap, warnings, restore placement
- `topology`    Slurm topology.conf (tree, block), Kubernetes labels, hostlists → node paths
- `explain`     reason codes and plain words for every waiting job
- `cycle`       `schedule(snapshot) -> CycleResult`, the numbered phases
"""

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.errors import PolicyError
from steward.policy.model import (
    AllocationTree,
    CycleResult,
    Explanation,
    Node,
    PendingJob,
    Placement,
    Preemption,
    Reservation,
    RunningJob,
    Snapshot,
    Stop,
)

__all__ = [
    "AllocationTree",
    "CycleResult",
    "Explanation",
    "Node",
    "PendingJob",
    "Placement",
    "PolicyError",
    "PolicySettings",
    "Preemption",
    "Reservation",
    "RunningJob",
    "Snapshot",
    "Stop",
    "schedule",
]
