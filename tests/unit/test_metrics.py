"""The metrics as Prometheus reads them: each family rendered in the text format and parsed back with
prometheus_client's own parser, from hand-built events, projections and figures."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from steward import metrics
from steward.api.metrics import cluster_gpus, fairness_gauges, job_gauges, outcome_of
from steward.config import Settings
from steward.domain.state import Job, LedgerState
from steward.ledger.metrics import LagCollector, LedgerMetrics, kafka_end_offsets
from steward.metrics import MetricsSettingError, base_port, metrics_urls, stack_ports
from steward.scheduler.metrics import SchedulerMetrics
from steward.store.eventstore import RecordedEvent
from steward.store.projections import job_row


def rec(position: int, type_: str, payload: dict[str, Any], message_id: str | None = None,
        metadata: dict[str, Any] | None = None) -> RecordedEvent:
    return RecordedEvent(position, f"job-{payload.get('job_id', 'x')}", 1, type_, 1, payload, metadata or {},
                         message_id, 1000.0 + position, "", "")


def job(job_id: str, **kw: Any) -> Job:
    base: dict[str, Any] = dict(job_id=job_id, project="p1", gpus=2, min_runtime_s=60.0, command=("true",),
                                resumable=False, job_class="batch", priority=0, submitted_at=1000.0)
    return Job(**(base | kw))


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_ledger_counts_events_rejections_preemptions_and_admission_waits() -> None:
    registry = CollectorRegistry()
    metrics = LedgerMetrics(registry)
    state = LedgerState(jobs={
        "a": job("a", attempt=1, started_at=1030.0),
        "b": job("b", job_class="interactive", attempt=2, requeued_at=2000.0, submitted_at=1000.0),
        "s": job("s", job_class="interactive", attempt=1, restored_from="old", preferred_node="n1",
                 assignments=(("n1", (0, 1)),)),
    })
    metrics.observe_batch([
        rec(1, "JobStarted", {"job_id": "a", "attempt": 1, "started_at": 1030.0}),
        rec(2, "JobStarted", {"job_id": "b", "attempt": 2, "started_at": 2005.0}),
        rec(3, "JobPreempted", {"job_id": "b", "reason": "fair_share"}),
        rec(4, "CommandRejected", {"code": "UNKNOWN_PROJECT", "reason": "no"}),
        rec(5, "JobStarted", {"job_id": "s", "attempt": 1, "started_at": 1000.5}),
    ], state, dead=2, seconds=0.004,
        reasons=["fenced: scheduler epoch 1, lease at 2", "steward-api may not issue PlaceJob"])
    got = samples(registry)
    assert got[("steward_ledger_events_total", (("type", "JobStarted"),))] == 3
    assert got[("steward_ledger_rejections_total", (("code", "UNKNOWN_PROJECT"),))] == 1
    assert got[("steward_preemptions_total", (("allocation", "p1"), ("reason", "fair_share")))] == 1
    assert got[("steward_deadletter_total", ())] == 2
    assert got[("steward_ledger_fenced_commands_total", (("role", "scheduler"),))] == 1  # ADR 0065
    # a: 30 s from submit; b: 5 s from its requeue (not from its submit); s: 0.5 s
    assert got[("steward_admission_wait_seconds_count", (("class", "batch"),))] == 1
    assert got[("steward_admission_wait_seconds_sum", (("class", "batch"),))] == 30
    assert got[("steward_admission_wait_seconds_sum", (("class", "interactive"),))] == 5.5
    assert got[("steward_admission_wait_seconds_bucket", (("class", "interactive"), ("le", "1.0")))] == 1
    assert got[("steward_sessions_restored_total", (("outcome", "same_node"),))] == 1
    assert got[("steward_ledger_batch_seconds_count", ())] == 1


class FakeStore:
    def __init__(self, offsets: dict[tuple[str, int], int], head: int, fail: bool = False) -> None:
        self.offsets, self._head, self.fail = offsets, head, fail

    def load_offsets(self, name: str) -> dict[tuple[str, int], int]:
        if self.fail:
            raise OSError("store away")
        return self.offsets

    def head(self) -> int:
        return self._head

    @property
    def engine(self) -> Any:
        from sqlalchemy import create_engine

        from steward.store import schema

        engine = create_engine("sqlite://")
        schema.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(schema.relay_positions.insert().values(relay="events-topic", position=7))
        return engine


C, EX = "steward.commands", "steward.commands.executor.gpu7"


@pytest.mark.parametrize(("ends", "stored", "want", "backlog"), [
    ({(C, 0): 10, (C, 1): 5}, {(C, 0): 10, (C, 1): 2}, {(C, "0"): 0, (C, "1"): 3}, 3),
    ({(C, 0): 4}, {}, {(C, "0"): 4}, 4),  # nothing stored yet: everything on the topic is lag
    # every command topic, each partition by its topic: a new executor's topic, never read, is all lag
    ({(C, 0): 6, (EX, 0): 2, (EX, 1): 3}, {(C, 0): 5, (EX, 1): 1}, {(C, "0"): 1, (EX, "0"): 2, (EX, "1"): 2}, 5),
    ({}, {}, {}, 0),
])
def test_ingest_lag_is_end_offsets_minus_the_stored_offsets_per_topic_and_in_total(
        ends: dict[tuple[str, int], int], stored: dict[tuple[str, int], int], want: dict[tuple[str, str], int],
        backlog: int) -> None:
    registry = CollectorRegistry()
    registry.register(LagCollector(FakeStore(stored, head=9), "ledger", lambda: ends))
    got = samples(registry)
    assert {(dict(k[1])["topic"], dict(k[1])["partition"]): v
            for k, v in got.items() if k[0] == "steward_ledger_lag_messages"} == want
    assert got[("steward_ledger_backlog_messages", ())] == backlog
    assert got[("steward_event_store_head", ())] == 9
    assert got[("steward_outbox_lag_events", ())] == 2


class FakeConsumer:
    """The metadata and end offsets a kafka-python consumer answers."""

    def __init__(self, partitions: dict[str, int], ends: dict[tuple[str, int], int]) -> None:
        self.partitions, self.ends = partitions, ends

    def topics(self) -> set[str]:
        return set(self.partitions)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.partitions[topic]))

    def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: self.ends.get((tp.topic, tp.partition), 0) for tp in tps}


def test_end_offsets_cover_every_command_topic_and_only_those() -> None:
    consumer = FakeConsumer({C: 2, EX: 1, "steward.events": 1, "steward.deadletter": 1, "other.commands": 1},
                            {(C, 0): 3, (C, 1): 4, (EX, 0): 7, ("steward.events", 0): 99})
    read = kafka_end_offsets(consumer, "steward")
    assert read() == {(C, 0): 3, (C, 1): 4, (EX, 0): 7}
    consumer.partitions["steward.commands.executor.new"] = 1  # created after the ledger started: counted
    assert ("steward.commands.executor.new", 0) in read()


def test_a_part_that_does_not_answer_leaves_its_series_out() -> None:
    registry = CollectorRegistry()

    def kafka_down() -> dict[tuple[str, int], int]:
        raise OSError("no broker")

    registry.register(LagCollector(FakeStore({}, 3), "ledger", kafka_down))
    got = samples(registry)
    assert ("steward_event_store_head", ()) in got
    assert not any(k[0] in ("steward_ledger_lag_messages", "steward_ledger_backlog_messages") for k in got)
    registry = CollectorRegistry()
    registry.register(LagCollector(FakeStore({}, 3, fail=True), "ledger", lambda: {(C, 0): 1}))
    assert samples(registry) == {}


def row(job_id: str, **kw: Any) -> dict[str, Any]:
    """A jobs row exactly as the projection writes it (assignments: node -> GPU indices)."""
    return job_row(job(job_id, **kw), 0)


# Rows in the projection's own shape: a test with a hand-made shape once hid that the API's gauges read
# assignments as (node, indices) pairs while the projection stores a node -> indices mapping (/metrics 500).
JOBS: list[dict[str, Any]] = [
    row("q", project="p1", state="QUEUED", gpus=4),
    row("p", project="p1", state="PREEMPTED", gpus=2),
    row("s", project="p2", job_class="interactive", state="RUNNING", gpus=2, funded=True,
        assignments=(("n1", (0, 1)),)),
    row("b", project="p2", state="PLACED", gpus=1, assignments=(("n1", (2,)),)),
    row("r", project="p3", state="RUNNING", gpus=8, funded=True, assignments=(("n3", tuple(range(8))),)),
]
NODES: list[dict[str, Any]] = [{"node_id": "n1", "gpus": 8, "state": "ready"},
                               {"node_id": "n2", "gpus": 8, "state": "unhealthy"},
                               {"node_id": "n3", "gpus": 8, "state": "draining"},
                               {"node_id": "n4", "gpus": 8, "state": "ready", "foreign_gpus": 3}]


def render(*families: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    class Fixed:
        def collect(self) -> Any:
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    return samples(registry)


def test_pending_and_running_jobs_by_allocation_and_class() -> None:
    got = render(*job_gauges(JOBS))
    assert got[("steward_pending_jobs", (("allocation", "p1"), ("class", "batch")))] == 2
    assert got[("steward_pending_gpus", (("allocation", "p1"), ("class", "batch")))] == 6
    assert got[("steward_running_jobs", (("allocation", "p2"), ("class", "interactive"), ("occupancy", "funded")))] == 1
    assert got[("steward_running_jobs", (("allocation", "p2"), ("class", "batch"), ("occupancy", "unfunded")))] == 1


def test_cluster_gpus_by_state_sum_to_the_capacity() -> None:
    got = {dict(k[1])["state"]: v for k, v in render(cluster_gpus(NODES, JOBS)).items()}
    # n1: 2 funded + 1 unfunded + 5 free; n2 unhealthy: down; n3 draining (its running job counts there);
    # n4: 3 held by another scheduler's work (foreign) + 5 free
    assert got == {"funded": 2, "unfunded": 1, "foreign": 3, "free": 10, "draining": 8, "down": 8}
    assert sum(got.values()) == sum(n["gpus"] for n in NODES)


def test_fairness_gauges_in_gpu_seconds_and_no_ratio_while_nothing_is_owed() -> None:
    class F:
        def __init__(self, name: str, entitlement: float, owed: float, delivered: float, leaf: bool) -> None:
            self.name, self.entitlement, self.owed, self.delivered = name, entitlement, owed, delivered
            self.is_project = leaf

    got = render(*fairness_gauges([F("a", 0.35, 7200.0, 3600.0, False), F("b", 0.1, 0.0, 0.0, True)]))
    a, b = (("allocation", "a"), ("is_project", "false")), (("allocation", "b"), ("is_project", "true"))
    assert got[("steward_owed_gpu_seconds", a)] == 7200  # base units (promtool check metrics)
    assert got[("steward_delivered_gpu_seconds", a)] == 3600
    assert got[("steward_owed_delivered_ratio", a)] == 0.5
    assert ("steward_owed_delivered_ratio", b) not in got
    assert got[("steward_entitled_share", b)] == 0.1


class Err:
    def __init__(self, code: str | None, path: list[str] | None = None) -> None:
        self.extensions = {"code": code} if code else None
        self.path = path


@pytest.mark.parametrize(("errors", "refusal", "want"), [
    (None, None, "ok"),
    (None, "rejected", "rejected"),  # a Rejected or InvalidInput answer (errors as data)
    (None, "unauthorised", "unauthorised"),  # a NotAuthorised answer
    ([Err("FORBIDDEN", ["submitJob"])], None, "unauthorised"),
    ([Err("UNAUTHENTICATED")], None, "unauthorised"),
    ([Err("BAD_USER_INPUT", ["jobs"])], None, "rejected"),
    ([Err(None)], None, "rejected"),  # a document that does not parse or validate: no path, no code
    ([Err("GRAPHQL_VALIDATION_FAILED")], None, "rejected"),  # several operations, no operationName
    ([Err("RATE_LIMITED")], None, "rejected"),
    ([Err(None, ["job"])], None, "error"),  # a masked fault of a resolver
    ([Err("OUTCOME_TIMEOUT", ["submitJob"])], None, "error"),
    ([Err("BAD_USER_INPUT", ["a"]), Err(None, ["b"])], None, "error"),  # a fault among client errors
])
def test_request_outcomes(errors: list[Err] | None, refusal: str | None, want: str) -> None:
    assert outcome_of(errors, None, refusal) == want


def test_scheduler_fragmentation_per_cluster_after_the_last_cycle() -> None:
    """ADR 0091: `steward_fragmented_gpus{cluster}` measures each cluster's free GPUs against the largest waiting gang
    that may run there (the API's rule). default: d0 half busy, d1 free; the 16-GPU gang (too big for jupiter) finds
    no 16 whole free GPUs: all 12 unusable. jupiter: the 4-GPU job needs an A100 (j0, 1 busy); j0's 3 free GPUs are
    too few for it, j1's 4 are not: 3. Lab-wide against the 16-GPU gang, as before, all 19 free GPUs were counted."""
    from steward.policy.cycle import schedule
    from steward.policy.model import AllocationTree, Node, PendingJob, RunningJob, Snapshot

    now = 100_000.0
    nodes = (Node("d0", 8, "H100", ("b0",)), Node("d1", 8, "H100", ("b0",)),
             Node("j0", 4, "A100", ("j",), cluster="jupiter"), Node("j1", 4, "V100", ("j",), cluster="jupiter"))
    running = (RunningJob("r0", "a", 4, (("d0", 4),), now - 60, now + 36_000, True),
               RunningJob("r1", "a", 1, (("j0", 1),), now - 60, now + 36_000, True))
    pending = (PendingJob("big", "b", 16, now - 30), PendingJob("mid", "b", 4, now - 30, gpu_models=("A100",)))
    snap = Snapshot(now, nodes, AllocationTree.flat({"a": 0.5, "b": 0.5}), {}, running, pending)
    result = schedule(snap)
    assert result.placements == () and result.preemptions == ()
    assert round(result.fragmentation * 24) == 19  # the cycle's own figure stays lab-wide

    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    assert not any(name == "steward_fragmented_gpus" for name, _ in samples(registry))  # no cycle yet
    metrics.observe(0.02, result, snap)
    got = samples(registry)
    assert {k: v for k, v in got.items() if k[0] == "steward_fragmented_gpus"} == {
        ("steward_fragmented_gpus", (("cluster", "default"),)): 12,
        ("steward_fragmented_gpus", (("cluster", "jupiter"),)): 3,
    }
    assert got[("steward_scheduler_cycle_seconds_count", ())] == 1


@pytest.mark.parametrize(("env", "api_port", "want"), [
    ({}, 8000, {"ledger": 9464, "scheduler": 9465, "worker": 9466, "executor": 9467}),
    ({}, 18120, {"ledger": 19584, "scheduler": 19585, "worker": 19586, "executor": 19587}),
    ({"STEWARD_METRICS_PORT": "7000"}, 8000, {"ledger": 7000, "scheduler": 7001, "worker": 7002, "executor": 7003}),
    ({"STEWARD_METRICS_PORT": "off"}, 8000, {}),
])
def test_metrics_ports_of_a_stack(env: dict[str, str], api_port: int, want: dict[str, int]) -> None:
    settings = Settings(api_port=api_port)
    assert stack_ports(settings, env) == want
    urls = metrics_urls(settings, env)
    assert urls["api"] == f"http://127.0.0.1:{api_port}/metrics"


@pytest.mark.parametrize("raw", ["abc", "0", "70000", "-1"])
def test_a_bad_metrics_port_is_refused_with_its_value(raw: str) -> None:
    with pytest.raises(MetricsSettingError, match=f"STEWARD_METRICS_PORT must be .* got '{raw}'"):
        base_port(Settings(), {"STEWARD_METRICS_PORT": raw})


def test_the_metrics_server_answers_ready_or_why_not() -> None:
    """`/ready` on the metrics port (ADR 0064): 503 with the reasons while a check says the process is not
    ready (its Kafka clients wait for the broker), 200 once none does; every other path is the metrics."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reasons = ["waiting for Kafka at its start (producer steward)"]
    metrics.not_ready_when(lambda: list(reasons))
    registry = CollectorRegistry()
    metrics.build_info("test", registry)
    metrics._start_server("127.0.0.1", port, registry)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10)
    assert refused.value.code == 503
    assert json.loads(refused.value.read()) == {"ready": False, "reasons": reasons}
    reasons.clear()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10) as ready:
        assert ready.status == 200 and json.loads(ready.read()) == {"ready": True, "reasons": []}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as scraped:
        assert b"steward_build_info" in scraped.read()
