"""The routing baselines of the two-clusters family (issue 25, ADR 0066): where a job goes when it is not
steward's routing that chooses. Each is `steward`'s cycle (the same fair share, contract and placement)
with the job *pinned at submit* to one of its admissible clusters (`metrics.admissible_clusters`: the
clusters where the nodes of the models and clusters it accepts could ever hold it); it then waits for that
cluster only, as under a dispatcher that routes each job once (MultiKueue-style). `steward` itself routes at
placement time instead (policy/routing.py): a waiting job goes to whichever admissible cluster has room when
its turn comes.

- `random-cluster`: a uniformly random admissible cluster, drawn from `random.Random(f"{seed}/{job_id}")`:
  the same job and seed route the same way in every run, whatever else arrives (the suite's runs use
  `ROUTING_SEED`, 0; the suite's seeds vary the workload).
- `least-loaded`: the admissible cluster with the lowest load at the job's submit, load = (GPUs busy there +
  GPUs of jobs waiting pinned there) ÷ its GPUs; ties to the cluster's name.

With one cluster neither pins anything, so each is `steward` exactly.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from steward.sim.scenario import TraceJob

if TYPE_CHECKING:
    from steward.sim.engine import Engine, Router

ROUTING_SEED = 0
ROUTERS: tuple[str, ...] = ("random-cluster", "least-loaded")


def random_cluster(seed: int = ROUTING_SEED) -> Router:
    """A router to a random admissible cluster, reproducible by (seed, job id)."""

    def route(engine: Engine, job: TraceJob, admissible: tuple[str, ...]) -> tuple[str, ...]:
        if len(admissible) < 2:
            return admissible
        return (random.Random(f"{seed}/{job.job_id}").choice(sorted(admissible)),)

    return route


def least_loaded() -> Router:
    """A router to the least loaded admissible cluster at submit (module docstring)."""

    def route(engine: Engine, job: TraceJob, admissible: tuple[str, ...]) -> tuple[str, ...]:
        if len(admissible) < 2:
            return admissible
        return (min(admissible, key=lambda c: (load(engine, c), c)),)

    return route


def load(engine: Engine, cluster: str) -> float:
    """(GPUs busy on `cluster` + GPUs waiting pinned to it) ÷ its GPUs."""
    cap = engine.rec.cluster_capacity[cluster]
    busy = cap - engine.cluster_free[cluster]
    return (busy + engine.cluster_queued[cluster]) / cap


def router_for(name: str, seed: int = ROUTING_SEED) -> Router:
    if name == "random-cluster":
        return random_cluster(seed)
    if name == "least-loaded":
        return least_loaded()
    raise ValueError(f"no router {name!r} (one of {', '.join(ROUTERS)})")
