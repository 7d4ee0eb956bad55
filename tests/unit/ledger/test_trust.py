"""The ledger trusts a command only as far as its topic's component may vouch for it (issue 21, ADR 0036),
and records every refusal in the chain, rate-summarised (steward.ledger.deciding.refusals)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.bus.envelope import command_envelope
from steward.bus.identity import ALLOWED_COMMANDS, Sender, command_topic, principal, sender_of_topic
from steward.domain.commands import (
    COMMAND_TYPES,
    MapNamespace,
    PlaceJob,
    RegisterNode,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobExited,
    ReportJobStarted,
    RetireNode,
    SetAllocations,
    SubmitJob,
)
from steward.ledger.deciding.refusals import RefusalLog, source_coordinates
from steward.ledger.deciding.steps import DeadLetter
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

API, SCHED, WF = "steward.commands", "steward.commands.scheduler", "steward.commands.workflows"
LOCAL, SIM = "steward.commands.executor.local", "steward.commands.executor.sim"
_offset = [0]


def msg(topic: str, command: Any, actor: str, role: str = "system") -> tuple[str, bytes]:
    _offset[0] += 1
    env = command_envelope(command, actor=actor, role=role, message_id=f"m{_offset[0]}")
    return (f"{topic}/0@{_offset[0]}", env.encode())


@pytest.fixture()
def ledger(tmp_path: Path) -> Ledger:
    """A ledger on `steward` topics with a tree, a node of executor local and one of sim, and a job
    placed on each."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    led = Ledger(EventStore.from_url(url), clock=lambda: 100.0, topic_prefix="steward")
    recorded, dead = led.process([
        msg(API, SetAllocations("cluster", {"a": 1.0}, "setup"), "admin", "admin"),
        msg(LOCAL, RegisterNode("n-local", 4, "H100", ["n-local"], "local"), "executor:local"),
        msg(SIM, RegisterNode("n-sim", 4, "H100", ["n-sim"], "sim", cluster="sim"), "executor:sim"),  # ADR 0091
        msg(API, SubmitJob("on-local", "a", 1, 0.0, ["true"]), "alice", "researcher"),
        msg(API, SubmitJob("on-sim", "a", 1, 0.0, ["true"]), "alice", "researcher"),
        msg(SCHED, PlaceJob("on-local", {"n-local": [0]}, True), "scheduler"),
        msg(SCHED, PlaceJob("on-sim", {"n-sim": [0]}, True), "scheduler"),
    ], {})
    assert not dead and [r.type for r in recorded].count("JobPlaced") == 2, [r.type for r in recorded]
    return led


# (name, topic, command, actor, role, the refusal's reason or "" when it is decided)
CASES: list[tuple[str, str, Any, str, str, str]] = [
    ("the API vouches for its users", API, SubmitJob("j1", "a", 1, 0.0, ["true"]), "bob", "researcher", ""),
    ("a user command names its actor", API, SubmitJob("j2", "a", 1, 0.0, ["true"]), "", "researcher",
     "a user command names its actor and role"),
    ("the API does not place jobs", API, PlaceJob("on-local", {"n-local": [1]}, True), "admin", "admin",
     "steward-api may not issue PlaceJob"),
    ("the scheduler places", SCHED, PlaceJob("nope", {"n-local": [1]}, True), "scheduler", "system", ""),
    ("the scheduler sets no allocations", SCHED, SetAllocations("cluster", {"a": 0.5}, "x"), "scheduler", "system",
     "steward-scheduler may not issue SetAllocations"),
    ("the scheduler is only itself", SCHED, PlaceJob("nope", {"n-local": [1]}, True), "alice", "admin",
     "steward-scheduler may act only as scheduler (system), not as 'alice' ('admin')"),
    ("the workflows report exits", WF, ReportJobExited("on-local", 1, 0), "temporal-worker", "system", ""),
    ("the workflows submit nothing", WF, SubmitJob("j3", "a", 1, 0.0, ["true"]), "temporal-worker", "system",
     "steward-workflows may not issue SubmitJob"),
    ("an executor reports its own job", LOCAL, ReportJobStarted("on-local", 1, 7), "executor:local", "system", ""),
    ("an executor's checkpoint of its own job", LOCAL, ReportCheckpointSaved("on-local", 1, "/c", 1.0),
     "executor:local", "system", ""),
    ("not another executor's job", LOCAL, ReportJobStarted("on-sim", 1, 7), "executor:local", "system",
     "job on-sim runs on node n-sim, not one of executor local's"),
    ("an unknown job goes on to the domain", LOCAL, ReportJobStarted("ghost", 1, 7), "executor:local", "system", ""),
    ("an executor submits its cluster's pods under its prefix", LOCAL,
     SubmitJob("local.team.p", "a", 1, 0.0, ["x"], from_executor="local", from_namespace="team"),
     "executor:local", "system", ""),
    ("an executor's submission names its pods' namespace", LOCAL, SubmitJob("local.team.p", "a", 1, 0.0, ["x"]),
     "executor:local", "system", "executor local submits a job from one of its own namespaces (from_executor "
     "'local' and from_namespace), not from ''/''"),
    ("not from another cluster's namespace", LOCAL,
     SubmitJob("local.team.p", "a", 1, 0.0, ["x"], from_executor="sim", from_namespace="team"),
     "executor:local", "system", "executor local submits a job from one of its own namespaces (from_executor "
     "'local' and from_namespace), not from 'sim'/'team'"),
    ("the API submits from no namespace", API,
     SubmitJob("j5", "a", 1, 0.0, ["x"], from_executor="local", from_namespace="team"), "alice", "researcher",
     "only a Kubernetes executor submits jobs from a namespace (from_executor, from_namespace)"),
    ("an executor submits nothing under another name", LOCAL, SubmitJob("p", "a", 1, 0.0, ["x"]), "executor:local",
     "system", "executor local may submit or cancel only jobs named local.*, not 'p'"),
    ("no SetAllocations from an executor", LOCAL, SetAllocations("cluster", {"a": 0.1}, "x"), "executor:local",
     "system", "steward-executor-local may not issue SetAllocations"),
    ("an executor is only itself", LOCAL, ReportJobStarted("on-local", 1, 7), "alice", "admin",
     "steward-executor-local may act only as executor:local (system), not as 'alice' ('admin')"),
    ("an executor names no other executor", LOCAL, ReportJobStarted("on-local", 1, 7), "executor:sim", "system",
     "steward-executor-local may act only as executor:local (system), not as 'executor:sim' ('system')"),
    ("its own heartbeat", LOCAL, ReportHeartbeat("local", {"on-local": 1}, ["n-local"]), "executor:local", "system",
     ""),
    ("not another executor's heartbeat", LOCAL, ReportHeartbeat("sim", {}, []), "executor:local", "system",
     "executor local may not report the heartbeat of executor 'sim'"),
    ("a heartbeat naming another executor's job", LOCAL, ReportHeartbeat("local", {"on-sim": 1}, []),
     "executor:local", "system", "job on-sim runs on node n-sim, not one of executor local's"),
    ("no node for another executor", LOCAL, RegisterNode("n2", 4, "H100", ["n2"], "sim"), "executor:local", "system",
     "executor local may not register a node of executor 'sim'"),
    ("no taking over another executor's node", LOCAL, RegisterNode("n-sim", 4, "H100", ["n-sim"], "local"),
     "executor:local", "system", "node n-sim belongs to executor sim"),
    ("no retiring another executor's node", LOCAL, RetireNode("n-sim", "gone"), "executor:local", "system",
     "node n-sim belongs to executor sim"),
    ("not a command topic", "steward.events", SubmitJob("j4", "a", 1, 0.0, ["true"]), "alice", "admin",
     "not a command topic"),
]


@pytest.mark.parametrize(("name", "topic", "command", "actor", "role", "reason"), CASES, ids=[c[0] for c in CASES])
def test_each_sender_may_say_only_its_own(ledger: Ledger, name: str, topic: str, command: Any, actor: str, role: str,
                                          reason: str) -> None:
    source, raw = msg(topic, command, actor, role)
    head = ledger.head
    recorded, dead = ledger.process([(source, raw)], {(topic, 0): 1})
    if not reason:
        assert not dead and recorded and all(r.type != "CommandRefused" for r in recorded), recorded
        assert recorded[0].metadata["actor"] == actor
        return
    assert [d.error for d in dead] == [reason]
    (rec,) = recorded
    stream = f"refused-{rec.payload['principal']}"
    assert (rec.type, rec.position, rec.stream_id) == ("CommandRefused", head + 1, stream)
    sender = sender_of_topic("steward", topic)
    assert rec.payload == {
        "principal": sender.principal if sender else f"(not a command topic: {topic})", "topic": topic,
        "partition": 0, "offset": int(source.rsplit("@", 1)[1]), "reason": reason,
        "digest": hashlib.sha256(raw).hexdigest(), "size": len(raw), "command": command.TYPE,
        "message_id": f"m{_offset[0]}", "actor": actor, "count": 1, "first_at": 100.0, "last_at": 100.0,
        "reasons": {}}
    assert ledger.store.load_offsets("ledger") == {(topic, 0): 1}  # the message is behind the ledger


def test_malformed_messages_are_recorded_with_their_digest(ledger: Ledger) -> None:
    recorded, dead = ledger.process([(f"{LOCAL}/2@9", b"not json")], {})
    (rec,) = recorded
    assert rec.payload["principal"] == "steward-executor-local" and rec.payload["reason"] == dead[0].error
    assert rec.payload["digest"] == hashlib.sha256(b"not json").hexdigest() and rec.payload["command"] == ""
    assert (rec.payload["partition"], rec.payload["offset"]) == (2, 9)


def test_every_command_type_has_a_sender_and_topics_map_back() -> None:
    issued: set[str] = set().union(*ALLOWED_COMMANDS.values())
    assert issued == set(COMMAND_TYPES)  # each command type some component may issue
    for component, executor in (("api", ""), ("scheduler", ""), ("workflows", ""), ("executor", "n-1")):
        sender = sender_of_topic("p", command_topic("p", component, executor))
        assert sender == Sender(component, executor) and sender.principal == principal(component, executor)
    assert sender_of_topic("p", "p.commands.executor.") is None and sender_of_topic("p", "p.events") is None


def refusal(principal_topic: str = LOCAL, reason: str = "bad", offset: int = 1) -> DeadLetter:
    return DeadLetter(b"x", reason, f"{principal_topic}/0@{offset}")


def test_past_the_burst_refusals_are_one_summary_once_the_window_closed() -> None:
    log = RefusalLog("steward", window_s=10.0, burst=2)
    out = log.record([refusal(offset=i, reason="a" if i % 2 else "b") for i in range(5)], 1.0)
    assert [p.events[0].payload["count"] for p in out] == [1, 1]
    assert log.pending(10.9) is False and log.pending(11.0) is True
    (summary,) = log.record([], 11.0)
    p = summary.events[0].payload
    assert (p["count"], p["first_at"], p["last_at"], p["reasons"], p["offset"]) == (3, 1.0, 1.0, {"a": 1, "b": 2}, 4)
    assert log.record([], 12.0) == [] and not log.windows


def test_an_undone_batch_counts_its_refusals_once(ledger: Ledger) -> None:
    ledger.refusals = RefusalLog("steward", window_s=60.0, burst=1)
    bad = [msg(LOCAL, SetAllocations("cluster", {"a": 0.1}, "x"), "executor:local") for _ in range(3)]
    prepared = ledger.prepare(bad, {})
    assert len(prepared.records) == 1  # one recorded, two waiting for the summary
    ledger.abort()
    ledger.process(bad, {})
    assert ledger.refusals.windows["steward-executor-local"].over == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([LOCAL, SIM, API]), st.floats(0, 100)), max_size=60),
       st.integers(0, 4), st.floats(1, 30))
def test_every_refusal_is_counted_and_each_window_adds_at_most_burst_plus_one(
        arrivals: list[tuple[str, float]], burst: int, window: float) -> None:
    log = RefusalLog("steward", window_s=window, burst=burst)
    events = []
    for topic, at in sorted(arrivals, key=lambda a: a[1]):
        events += log.record([refusal(topic)], at)
    events += log.record([], 1e9)
    assert sum(e.events[0].payload["count"] for e in events) == len(arrivals)
    per_key: dict[str, int] = {}
    for e in events:
        per_key[e.events[0].stream] = per_key.get(e.events[0].stream, 0) + 1
    for topic in {t for t, _ in arrivals}:
        key = f"refused-{sender_of_topic('steward', topic).principal}"  # type: ignore[union-attr]
        windows = 1 + int(max(a for t, a in arrivals if t == topic) // window) + 1
        assert per_key.get(key, 0) <= windows * (burst + 1)


def test_source_coordinates() -> None:
    assert source_coordinates("a.b/3@17") == ("a.b", 3, 17)
    assert source_coordinates("weird") == ("weird", -1, -1)


def test_the_ledger_charges_a_clusters_pods_to_their_namespaces_recorded_project(ledger: Ledger) -> None:
    """ADR 0056: an executor's submission is decided against the recorded mapping of its namespace: accepted
    when the namespace is mapped to the project it charges, rejected (in the job's stream, with the reason and
    the command kept for the replay) when it is unmapped or mapped to another project."""
    def submit(job: str, namespace: str, project: str = "a") -> Any:
        (rec,), dead = ledger.process([msg(LOCAL, SubmitJob(job, project, 1, 0.0, ["x"], from_executor="local",
                                                            from_namespace=namespace), "executor:local")], {})
        assert not dead
        return rec

    unmapped = submit("local.team.p1", "team")
    assert (unmapped.type, unmapped.stream_id, unmapped.payload["code"]) == (
        "CommandRejected", "job-local.team.p1", "namespace_not_mapped")
    assert "namespace team of cluster local is not mapped to a project" in unmapped.payload["reason"]
    assert unmapped.metadata["input"]["from_namespace"] == "team"
    ledger.process([msg(API, SetAllocations("cluster", {"b": 0.0}, "another project"), "admin", "admin"),
                    msg(API, MapNamespace("local", "team", "a", "the team's"), "admin", "admin"),
                    msg(API, MapNamespace("sim", "other", "b", "another cluster's"), "admin", "admin")], {})
    accepted = submit("local.team.p2", "team")
    assert accepted.type == "JobSubmitted" and "from_namespace" not in accepted.payload
    assert accepted.metadata["input"]["from_executor"] == "local"  # where it came from, for the replay
    other = submit("local.team.p3", "team", project="b")
    assert other.type == "CommandRejected" and "charges project a, not b" in other.payload["reason"]
    elsewhere = submit("local.other.p4", "other", project="b")  # mapped in another cluster only
    assert elsewhere.type == "CommandRejected" and elsewhere.payload["code"] == "namespace_not_mapped"
    ledger.process([msg(API, MapNamespace("local", "team", "", "the team left"), "admin", "admin")], {})
    assert submit("local.team.p5", "team").type == "CommandRejected"
    assert ledger.state.namespaces == {("sim", "other"): "b"}
