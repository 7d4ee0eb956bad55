"""Reading a decision's command back from its recorded events (`steward.domain.recorded`), and the ledger's
rule built on it: the message itself is stored with the events (`input`) exactly when they do not give the
command back, so that `steward audit replay` decides the very command again."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from steward.audit.replay import groups
from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    CancelJob,
    ClosePeriod,
    Command,
    DrainNode,
    ExplainWaiting,
    OpenSession,
    PlaceJob,
    ReachSessionCap,
    RecordAccessDenial,
    RegisterNode,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    ReportNodeDrained,
    ReportUtilisation,
    RequestPreemption,
    RestoreSession,
    ResumeNode,
    RetireNode,
    RevokeProtection,
    SetAllocations,
    SetPolicy,
    SubmitJob,
    WarnSession,
)
from steward.domain.recorded import UnreadableCommand, carries_its_command, command_from_events
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade


@pytest.mark.parametrize(("kind", "payloads", "expected"), [
    ("SubmitJob", [{"job_id": "j", "project": "p", "gpus": 2, "min_runtime_s": 60.0, "command": ["x"],
                    "resumable": False, "job_class": "batch", "priority": 0, "submitted_at": 5.0}],
     SubmitJob("j", "p", 2, 60.0, ["x"])),
    # PolicySet records the command's settings as `changed` (and all those in force as `settings`)
    ("SetPolicy", [{"changed": {"grace_s": 5.0}, "settings": {"grace_s": 5.0, "window_s": 3600.0}, "reason": "r"}],
     SetPolicy({"grace_s": 5.0}, "r")),
    # one JobDeferred per job still waiting: the explanations are read from all of them
    ("ExplainWaiting", [{"job_id": "a", "explanation": {"reason": "queue"}},
                        {"job_id": "b", "explanation": {"reason": "gang"}}],
     ExplainWaiting({"a": {"reason": "queue"}, "b": {"reason": "gang"}})),
    # an older ledger recorded "no checkpoint" as None: the field's default, as a message without it
    ("ReportJobPreempted", [{"job_id": "j", "attempt": 1, "reason": "fairness", "exit_code": 0,
                             "grace_expired": False, "requeue": True, "checkpoint_path": None,
                             "checkpoint_at": None, "evidence": {}}],
     ReportJobPreempted("j", 1, "fairness", 0)),
    # AllocationsSet leaves out debug_quotas when there are none (v1's shape)
    ("SetAllocations", [{"parent": "cluster", "shares": {"a": 1.0}, "reason": "r"}],
     SetAllocations("cluster", {"a": 1.0}, "r")),
])
def test_a_command_is_read_back_from_its_events(kind: str, payloads: list[dict[str, Any]],
                                                expected: Command) -> None:
    assert command_from_events(kind, payloads) == expected


@pytest.mark.parametrize(("kind", "payloads", "why"), [
    ("Teleport", [{"x": 1}], "no known command ('Teleport')"),
    ("SubmitJob", [], "recorded no event"),
    ("SubmitJob", [{"job_id": "j"}], "missing field 'project'"),
    ("ExplainWaiting", [{"job_id": "a"}], "has no 'job_id' and 'explanation'"),
])
def test_what_cannot_be_read_back_is_named(kind: str, payloads: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(UnreadableCommand, match=re.escape(why)):
        command_from_events(kind, payloads)


def test_carries_its_command_only_when_the_events_give_exactly_it_back() -> None:
    started = ReportJobStarted("j", 1, 42)  # started_at 0: the ledger records the time it decided instead
    assert not carries_its_command(started, [{"job_id": "j", "attempt": 1, "pid": 42, "started_at": 7.0,
                                              "protected_until": 67.0}])
    assert carries_its_command(ReportJobStarted("j", 1, 42, 7.0), [{"job_id": "j", "attempt": 1, "pid": 42,
                                                                     "started_at": 7.0, "protected_until": 67.0}])
    stale = ExplainWaiting({"a": {"reason": "queue"}, "gone": {"reason": "queue"}})
    assert not carries_its_command(stale, [{"job_id": "a", "explanation": {"reason": "queue"}}])
    assert not carries_its_command(SubmitJob("j", "p", 1, 0.0, ["x"]), [])


# -- the ledger stores the message exactly when its events do not give the command back ----------------


def _inputs(tmp_path: Path, commands: list[Command], now: float = 100.0) -> dict[str, bool]:
    """Per (command, event type): whether the ledger stored the input. And for every decision it did not
    store it for, reading the command back from the stored events gives the very command it decided."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    ledger = Ledger(store, clock=lambda: now)
    envelopes = [command_envelope(c, actor="a", role="admin") for c in commands]
    ledger.process([("t/0@0", env.encode()) for env in envelopes], {})
    sent = {env.id: c for env, c in zip(envelopes, commands, strict=True)}
    out: dict[str, bool] = {}
    for group in groups(store.read()):
        if "input" not in group[0].metadata:
            assert command_from_events(group[0].metadata["command"], [r.payload for r in group]) == \
                sent[str(group[0].message_id)]
        for rec in group:
            out.setdefault(f"{rec.metadata['command']}:{rec.type}", "input" in rec.metadata)
    return out


def test_the_ledger_stores_the_input_of_decisions_whose_events_do_not_carry_it(tmp_path: Path) -> None:
    commands: list[Command] = [
        SetAllocations("cluster", {"p": 1.0}, "setup"),
        RegisterNode("n1", 4, "A100", ["z", "n1"]),
        SubmitJob("j1", "p", 1, 0.0, ["x"], resumable=True),
        SubmitJob("j2", "ghost", 1, 0.0, ["x"]),                       # rejected
        PlaceJob("j1", {"n1": [0]}, False, {"rank": 1}),
        ReportJobStarted("j1", 1, 42),                                  # started_at 0 becomes the time
        ReportCheckpointSaved("j1", 1, "/ck/1", 99.0),
        RequestPreemption("j1", "fair_share", grace_s=0.0),              # attempt 0 becomes the attempt
        ReportJobPreempted("j1", 1, "fair_share", 0),                 # checkpoint from the job
        ExplainWaiting({"j1": {"reason": "queue"}, "nope": {"reason": "queue"}}),  # a stale explanation
        SetPolicy({"preemption_grace_s": 5.0}, "shorter grace"),
    ]
    assert _inputs(tmp_path, commands) == {
        "SetAllocations:AllocationsSet": False, "RegisterNode:NodeRegistered": False,
        "SubmitJob:JobSubmitted": False, "SubmitJob:CommandRejected": True, "PlaceJob:JobPlaced": False,
        "ReportJobStarted:JobStarted": True, "ReportCheckpointSaved:CheckpointSaved": False,
        "RequestPreemption:JobPreemptionRequested": True, "ReportJobPreempted:JobPreempted": True,
        "ReportJobPreempted:JobRequeued": True,
        "ExplainWaiting:JobDeferred": True, "SetPolicy:PolicySet": False,
    }


def test_every_command_the_ledger_records_without_input_reads_back_as_itself(tmp_path: Path) -> None:
    """Sessions, drains, heartbeats, losses, denials and periods: whatever the ledger left without input
    gives the command back exactly (checked inside `_inputs`), and what it refused carries its input."""
    commands: list[Command] = [
        SetAllocations("cluster", {"p": 1.0}, "setup", {"p": 2}),
        RegisterNode("n1", 4, "A100", ["z", "n1"]), RegisterNode("n2", 4, "A100", ["z", "n2"], "sim"),
        SubmitJob("s1", "p", 1, 600.0, ["sh"], True, "interactive"),
        PlaceJob("s1", {"n1": [0]}, True, {"rank": 1}),
        ReportJobStarted("s1", 1, 7, 100.0),
        OpenSession("s1", 1, 700.0, [400.0, 600.0], "stop", 60.0),
        ReportUtilisation("s1", 1, True, 101.0, 0.0, 1.5, "nvml"),
        WarnSession("s1", 1, "idle", 30.0, {"idle_since": 101.0}),
        RevokeProtection("s1", 1, "idle for 60 s", {"idle_since": 101.0}),
        WarnSession("s1", 1, "cap", 300.0),
        ReachSessionCap("s1", 1, "stop"),
        ReportCheckpointSaved("s1", 1, "/ck/s1", 100.0, {"bytes": 10}),
        ReportJobPreempted("s1", 1, "session_cap", 0, checkpoint_path="/ck/s1", checkpoint_at=100.0),
        RestoreSession("s1", "s1-r1"),
        SubmitJob("b1", "p", 2, 0.0, ["x"]), PlaceJob("b1", {"n2": [0, 1]}, False),
        ReportJobStarted("b1", 1, 9, 100.0),
        ReportHeartbeat("sim", {"b1": 1}, ["n2"]),
        ReportJobLost("b1", 1, "heartbeat timeout"),
        ReportHeartbeat("sim", {}, ["n2"]),
        DrainNode("n2", "repair"), ReportNodeDrained("n2"), ResumeNode("n2", "repaired"),
        RegisterNode("n3", 2, "A100", ["z", "n3"]), RetireNode("n3", "decommissioned"), RetireNode("n1", "busy"),
        RetireNode("n2", "gone from the inventory", when_empty=True),  # ADR 0081: read back with its flag
        CancelJob("b1", "enough"), CancelJob("nope", "refused"),
        ReportJobExited("s1-r1", 1, 0),                                 # refused: not placed
        RecordAccessDenial("eve", "researcher", "setPolicy", "policy", "not an admin", 100.0, 100.0),
        ClosePeriod("2026-12", 0.0, 86400.0, 8 * 86400.0, {"p": {"owed_gpu_s": 10.0, "delivered_gpu_s": 5.0}}),
        SetPolicy({"settle_s": 30.0}, "calmer"),
        SetPolicy({"nope": 1}, "refused"),
    ]
    stored = _inputs(tmp_path, commands)
    assert stored["CancelJob:CommandRejected"] and stored["SetPolicy:CommandRejected"]
    assert not stored["OpenSession:SessionOpened"] and not stored["RestoreSession:SessionRestored"]
    assert not stored["ClosePeriod:PeriodClosed"] and not stored["ReportHeartbeat:ExecutorHeartbeat"]
