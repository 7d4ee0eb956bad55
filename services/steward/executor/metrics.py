"""The executors' Prometheus collectors (docs/metrics.md): the rounds of the Slurm and Kubernetes executors'
heartbeat loops (`steward.executor.cluster.heartbeat_loop`: one pass over the cluster, `scontrol` or one list of
the pods), counted by outcome and timed, and the heartbeats they sent. `steward.metrics` serves them."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

# a round lists a cluster's nodes and jobs: milliseconds on a small cluster, seconds on a large one
ROUND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class RoundMetrics:
    """`steward_executor_rounds_total{executor, outcome}` (ok, failed), `steward_executor_round_seconds{executor}`
    and `steward_executor_heartbeats_sent_total{executor}`, once per registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rounds = Counter("steward_executor_rounds", "Rounds of the executor's loop over its cluster, by outcome "
                              "(failed: the cluster or Kafka did not answer; tried again at the next poll).",
                              ["executor", "outcome"], registry=registry)
        self.seconds = Histogram("steward_executor_round_seconds", "How long one round over the cluster took "
                                 "(listing its nodes and jobs or pods, reporting what changed).", ["executor"],
                                 buckets=ROUND_BUCKETS, registry=registry)
        self.sent = Counter("steward_executor_heartbeats_sent", "Heartbeats the executor sent (on every change, and "
                            "at least every STEWARD_EXECUTOR_HEARTBEAT_REPORT_S).", ["executor"], registry=registry)

    @classmethod
    def of(cls, registry: CollectorRegistry = REGISTRY) -> RoundMetrics:
        made = _made.get(id(registry))
        if made is None:
            made = _made[id(registry)] = cls(registry)
        return made

    def observe(self, executor_id: str, seconds: float, ok: bool) -> None:
        self.rounds.labels(executor=executor_id, outcome="ok" if ok else "failed").inc()
        self.seconds.labels(executor=executor_id).observe(seconds)


_made: dict[int, RoundMetrics] = {}
