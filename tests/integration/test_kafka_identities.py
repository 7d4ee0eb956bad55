"""Issue 21 "Kafka with identities", tried as an attacker would, against the real broker and the whole stack:
a client without credentials (or with a wrong password) cannot produce or consume; an executor's principal
cannot write another component's topic, cannot issue `SetAllocations` on its own, cannot report a job
placed on another executor's node, and cannot claim another actor; each refusal is a `CommandRefused`
event (principal, coordinates, digest, reason) in the chain; nothing already recorded changes."""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, TopicAuthorizationFailedError

from steward.audit.verify import verify
from steward.bus.envelope import Envelope, command_envelope
from steward.config import Settings
from steward.domain.commands import (
    CancelJob,
    Command,
    PlaceJob,
    RegisterNode,
    ReportHeartbeat,
    ReportJobStarted,
    RetireNode,
    SetAllocations,
    SubmitJob,
)
from steward.store.eventstore import EventStore, RecordedEvent
from tests.integration.conftest import TEST_ENV, kafka_options, steward

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"
EXECUTOR = "steward-executor-local"
BOOTSTRAP = TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"]


@pytest.fixture(scope="module")
def store(stack: dict[str, object]) -> EventStore:
    steward("tree", "apply", str(SCENARIO))
    return EventStore.from_url(Settings().resolved_store_url)


def produce(user: str, topic: str, env: Envelope) -> tuple[int, int, bytes]:
    """Send `env` as `user`; (partition, offset, the bytes sent)."""
    producer = KafkaProducer(**kafka_options(user), acks="all", max_block_ms=10_000, request_timeout_ms=10_000)
    raw = env.encode()
    try:
        meta = producer.send(topic, key=env.key.encode(), value=raw).get(timeout=15)
    finally:
        producer.close(timeout=5)
    return meta.partition, meta.offset, raw


def as_executor(command: Command, actor: str = "executor:local", role: str = "system") -> Envelope:
    return command_envelope(command, actor=actor, role=role, message_id=f"adv-{uuid.uuid4().hex}")


def refusal_of(store: EventStore, topic: str, partition: int, offset: int, after: int,
               timeout: float = 60) -> RecordedEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in store.iterate(after):
            p = rec.payload
            if rec.type == "CommandRefused" and (p["topic"], p["partition"], p["offset"]) == (topic, partition, offset):
                return rec
        time.sleep(0.3)
    raise AssertionError(f"no CommandRefused for {topic}/{partition}@{offset} within {timeout} s")


def placed_on(store: EventStore, after: int, node: str, timeout: float = 60) -> str:
    """The first job placed on `node` after `after`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in store.iterate(after):
            if r.type == "JobPlaced" and node in r.payload["assignments"]:
                return str(r.payload["job_id"])
        time.sleep(0.3)
    raise AssertionError(f"no job placed on {node} within {timeout} s")


def wait_for(store: EventStore, after: int, event_type: str, field: str, value: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(r.type == event_type and r.payload.get(field) == value for r in store.iterate(after)):
        assert time.monotonic() < deadline, f"no {event_type} for {value} within {timeout} s"
        time.sleep(0.3)


def recorded(store: EventStore) -> list[tuple[int, str]]:
    return [(r.position, r.hash) for r in store.iterate(0)]


def test_a_client_without_credentials_cannot_produce_or_consume(store: EventStore) -> None:
    env = command_envelope(SubmitJob("anon-probe", "ee9e8c", 1, 0.0, ["true"]), actor="kcat-probe", role="admin")
    with pytest.raises(KafkaError):  # the listener speaks SASL only: a plain client never gets through
        KafkaProducer(bootstrap_servers=BOOTSTRAP, max_block_ms=5000).send(
            "steward.commands", value=env.encode()).get(timeout=10)
    with pytest.raises(KafkaError):
        KafkaConsumer("steward.events", bootstrap_servers=BOOTSTRAP, request_timeout_ms=5000).poll(5000)
    wrong = {**kafka_options("steward-api"), "sasl_plain_password": "not-the-password"}
    with pytest.raises(KafkaError):
        KafkaProducer(**wrong, max_block_ms=5000).send("steward.commands", value=env.encode()).get(timeout=10)
    with pytest.raises(KafkaError):
        KafkaConsumer("steward.events", **wrong, request_timeout_ms=5000).poll(5000)
    assert not any(r.payload.get("job_id") == "anon-probe" for r in store.iterate(0))


def read_events(user: str) -> tuple[set[int] | None, int]:
    """What `user` sees of the events topic: its partitions (None: not authorised) and how many records
    a few seconds of polling from the start give."""
    consumer = KafkaConsumer(**kafka_options(user), consumer_timeout_ms=3000)
    try:
        partitions = consumer.partitions_for_topic("steward.events")
        tp = TopicPartition("steward.events", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not got:
            got += sum(len(rs) for rs in consumer.poll(timeout_ms=1000).values())
        return partitions, got
    finally:
        consumer.close()


def test_an_executor_reads_no_events_and_writes_no_other_topic(store: EventStore) -> None:
    assert store.head() > 0
    partitions, got = read_events("steward-scheduler")  # its principal may read the events
    assert partitions == {0} and got > 0
    partitions, got = read_events(EXECUTOR)  # not authorised: no partitions, no records
    assert not partitions and got == 0
    env = as_executor(SetAllocations("cluster", {"ee9e8c": 1.0}, "executor takeover"), actor="alice", role="admin")
    for topic in ("steward.commands", "steward.commands.scheduler", "steward.commands.executor.sim"):
        with pytest.raises(TopicAuthorizationFailedError):
            produce(EXECUTOR, topic, env)


def test_what_an_executor_may_not_say_is_refused_and_recorded(store: EventStore) -> None:
    before = recorded(store)
    head = before[-1][0] if before else 0
    own = "steward.commands.executor.local"
    cases: list[tuple[Envelope, str]] = [
        (as_executor(SetAllocations("cluster", {"ee9e8c": 1.0}, "executor takeover")),
         f"{EXECUTOR} may not issue SetAllocations"),
        # an executor submits its own cluster's jobs (Kubernetes pods, ADR 0051): as itself, under its prefix
        (as_executor(SubmitJob("adv-forged", "ee9e8c", 1, 0.0, ["true"]), actor="alice", role="researcher"),
         f"{EXECUTOR} may act only as executor:local (system), not as 'alice' ('researcher')"),
        (as_executor(SubmitJob("adv-forged", "ee9e8c", 1, 0.0, ["true"])),
         "executor local may submit or cancel only jobs named local.*, not 'adv-forged'"),
        (as_executor(ReportHeartbeat("sim", {}, [])), "executor local may not report the heartbeat of executor 'sim'"),
        (as_executor(ReportHeartbeat("local", {}, []), actor="alice", role="admin"),
         f"{EXECUTOR} may act only as executor:local (system), not as 'alice' ('admin')"),
        (as_executor(RegisterNode("adv-stolen", 8, "H100", ["adv-stolen"], "sim")),
         "executor local may not register a node of executor 'sim'"),
    ]
    for env, reason in cases:
        partition, offset, raw = produce(EXECUTOR, own, env)
        rec = refusal_of(store, own, partition, offset, head)
        assert rec.stream_id == f"refused-{EXECUTOR}" and rec.metadata["actor"] == EXECUTOR
        p = rec.payload
        assert (p["principal"], p["reason"], p["command"], p["message_id"]) == (EXECUTOR, reason, env.type, env.id)
        assert p["digest"] == hashlib.sha256(raw).hexdigest() and p["size"] == len(raw) and p["count"] == 1
    after = [r for r in store.iterate(head)]
    assert not any(r.type in ("AllocationsSet", "JobSubmitted", "NodeRegistered", "ExecutorHeartbeat")
                   and r.metadata.get("source", "").startswith(own) for r in after)
    assert recorded(store)[:len(before)] == before  # nothing already recorded changed
    assert verify(store)["ok"], verify(store)


def test_an_executor_cannot_report_a_job_on_another_executors_node(store: EventStore) -> None:
    head = store.head()
    node, job = f"adv-{uuid.uuid4().hex[:6]}", f"adv-{uuid.uuid4().hex[:8]}"
    # the operator (a super user) sets the scene: a node of executor "sim" and a job placed on it; the job
    # asks for all of that node's GPUs, more than any other node has, so it can go nowhere else
    admin = "steward-admin"
    # in a cluster of its own: on the shared stack the default cluster has other executors' nodes, and a cluster
    # has one executor (ADR 0091)
    produce(admin, "steward.commands", command_envelope(RegisterNode(node, 64, "ADV", [node], "sim", cluster=node),
                                                        actor="admin", role="admin"))
    wait_for(store, head, "NodeRegistered", "node_id", node)
    produce(admin, "steward.commands", command_envelope(SubmitJob(job, "ee9e8c", 64, 0.0, ["true"]),
                                                        actor="admin", role="admin"))
    wait_for(store, head, "JobSubmitted", "job_id", job)
    produce(admin, "steward.commands.scheduler",
            command_envelope(PlaceJob(job, {node: list(range(64))}, False), actor="scheduler", role="system"))
    # on the shared stack, the scheduler may first fill the new node with work other tests left waiting (then
    # this PlaceJob is refused, the GPUs being taken): any job placed on that node of executor "sim" will do
    mine, job = job, placed_on(store, head, node)
    own = "steward.commands.executor.local"
    for command in (ReportJobStarted(job, 1, 4242), ReportHeartbeat("local", {job: 1}, [])):
        partition, offset, _ = produce(EXECUTOR, own, as_executor(command))
        rec = refusal_of(store, own, partition, offset, head)
        assert rec.payload["reason"] == f"job {job} runs on node {node}, not one of executor local's"
    assert not any(r.type == "JobStarted" and r.payload.get("job_id") == job for r in store.iterate(head))
    for done in {mine, job}:  # what this test put on that node
        produce(admin, "steward.commands", command_envelope(CancelJob(done, "adversarial test done"),
                                                            actor="admin", role="admin"))
    # and the node goes: no executor "sim" runs on the shared stack, so a later module's job open to any cluster
    # routed there would be lost at its start
    produce(admin, "steward.commands", command_envelope(RetireNode(node, "adversarial test done", when_empty=True),
                                                        actor="admin", role="admin"))
    deadline = time.monotonic() + 60  # retired, or retiring (no new work) while another test's job still holds it
    while not any(r.type in ("NodeRetired", "NodeRetirementPending") and r.payload.get("node_id") == node
                  for r in store.iterate(head)):
        assert time.monotonic() < deadline, f"{node} was not retired"
        time.sleep(0.3)


def test_a_new_executors_commands_reach_the_running_ledger(store: EventStore, stack: dict[str, object]) -> None:
    """`infra/kafka.sh add-executor` while the stack runs: the new executor's principal writes its own topic
    and the ledger, not restarted, records what it says (it lists the command topics every
    STEWARD_LEDGER_TOPIC_REFRESH_S) and counts that topic in its lag."""
    import os
    import subprocess

    import httpx

    from steward.infra.processes import Paths
    from tests.integration.conftest import REPO, active_of

    ex = f"dyn{uuid.uuid4().hex[:6]}"
    paths = Paths(Settings().run_dir)
    pids = {name: paths.pid_file(name).read_text().strip() for name in ("ledger", "ledger-2")
            if paths.pid_file(name).exists()}
    proc = subprocess.run(["bash", str(REPO / "infra" / "kafka.sh"), "add-executor", ex], capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-2000:]
    topic = f"steward.commands.executor.{ex}"
    head = store.head()
    env = command_envelope(ReportHeartbeat(ex, {}, []), actor=f"executor:{ex}", role="system",
                           message_id=f"dyn-{uuid.uuid4().hex}")
    partition, offset, _ = produce(f"steward-executor-{ex}", topic, env)
    wait_for(store, head, "ExecutorHeartbeat", "executor_id", ex, timeout=90)
    rec = next(r for r in store.iterate(head) if r.type == "ExecutorHeartbeat" and r.payload["executor_id"] == ex)
    assert rec.metadata["source"] == f"{topic}/{partition}@{offset}", rec.metadata
    assert {name: paths.pid_file(name).read_text().strip() for name in pids} == pids  # the same ledgers: no restart
    # what another executor's credentials say on the new topic is refused: the topic vouches for its writer
    with pytest.raises(KafkaError):
        produce(EXECUTOR, topic, as_executor(ReportHeartbeat(ex, {}, [])))
    urls = stack["metrics"]
    assert isinstance(urls, dict)
    text = httpx.get(active_of(urls, "ledger"), timeout=30).text  # the ledger holding the lease
    assert f'steward_ledger_lag_messages{{partition="{partition}",topic="{topic}"}} 0.0' in text, text[-3000:]
    assert "steward_ledger_backlog_messages " in text


def tls_paths() -> dict[str, str]:
    import os
    import subprocess

    from tests.integration.conftest import REPO

    proc = subprocess.run(["bash", str(REPO / "infra" / "kafka.sh"), "tls-paths"], capture_output=True, text=True,
                          timeout=60, env=os.environ.copy(), check=True)
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_the_tls_listener_takes_the_same_principals_and_checks_the_projects_ca(
        real_services: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """SASL_SSL on its own port (ADR 0039): a client trusting the project's CA (STEWARD_KAFKA_CA_FILE)
    authenticates as its principal and round-trips a message; a client that does not trust that CA, or
    speaks plain SASL to the TLS port, gets nothing; a CA file that is missing is named, not skipped."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from steward.bus.kafka import MissingCredentials, client_options

    paths = tls_paths()
    settings = Settings(kafka_bootstrap=paths["STEWARD_KAFKA_TLS_BOOTSTRAP"])
    monkeypatch.setenv("STEWARD_KAFKA_CA_FILE", paths["STEWARD_KAFKA_CA_FILE"])
    options = client_options(settings, "steward-admin")
    assert options["security_protocol"] == "SASL_SSL" and options["ssl_check_hostname"] is True
    topic = f"tls-probe-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(**options, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        producer = KafkaProducer(**options, acks="all", max_block_ms=30_000)
        producer.send(topic, value=b"over tls").get(timeout=30)
        producer.close(timeout=5)
        consumer = KafkaConsumer(topic, **options, auto_offset_reset="earliest", consumer_timeout_ms=15_000)
        assert [m.value for m in consumer] == [b"over tls"]
        consumer.close()
    finally:
        admin.delete_topics([topic])
        admin.close()
    untrusted = options | {"ssl_cafile": None}  # the system's CAs, which never signed the broker's certificate
    plain = options | {"security_protocol": "SASL_PLAINTEXT"}
    for wrong in (untrusted, plain):
        with pytest.raises(KafkaError):
            KafkaProducer(**wrong, max_block_ms=8000).send(topic, value=b"x").get(timeout=10)
    monkeypatch.setenv("STEWARD_KAFKA_CA_FILE", "/nonexistent/ca.pem")
    with pytest.raises(MissingCredentials, match=r"STEWARD_KAFKA_CA_FILE names /nonexistent/ca\.pem"):
        client_options(settings, "steward-admin")
