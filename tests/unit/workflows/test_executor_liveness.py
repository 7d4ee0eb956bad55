"""What a waiting start reads about its executor (ADR 0069), from the real embedded store written by the real
ledger: the time its last heartbeat was recorded, and its placements not yet started."""

from __future__ import annotations

from pathlib import Path

from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    Command,
    PlaceJob,
    RegisterNode,
    ReportHeartbeat,
    ReportJobStarted,
    SetAllocations,
    SubmitJob,
)
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from steward_workflows.facts import StoreFacts


def test_the_last_heartbeat_and_the_placements_waiting_at_the_executor(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    now = [100.0]
    ledger = Ledger(store, clock=lambda: now[0])

    def record(*commands: Command) -> None:
        recorded, dead = ledger.process(
            [("t/0@0", command_envelope(c, actor="test", role="admin").encode()) for c in commands], {})
        assert not dead and all(r.type != "CommandRejected" for r in recorded), [r.payload for r in recorded]

    facts = StoreFacts(store)
    assert facts.executor_liveness("k8s").heard_at is None  # never heard: silent
    record(SetAllocations("cluster", {"a": 1.0}, "setup"),
           RegisterNode("k0", 4, "A100", ["z", "k0"], executor="k8s", cluster="kube"),  # one executor a cluster
           RegisterNode("l0", 4, "A100", ["z", "l0"], executor="local"),
           *(SubmitJob(f"j{i}", "a", 1, 0, ["true"]) for i in range(4)),
           PlaceJob("j0", {"k0": [0]}, funded=True), PlaceJob("j1", {"k0": [1]}, funded=True),
           PlaceJob("j2", {"k0": [2]}, funded=True), PlaceJob("j3", {"l0": [0]}, funded=True))
    now[0] = 130.0
    record(ReportHeartbeat("k8s", {}))
    now[0] = 150.0
    record(ReportHeartbeat("local", {}), ReportJobStarted("j2", 1, 7, 150.0))
    seen = facts.executor_liveness("k8s", "j0")
    assert seen.heard_at == 130.0  # its own stream's newest heartbeat, not the other executor's
    assert seen.queued == 1  # j1 (j0 asks, j2 started, j3 waits at the other executor)
    assert facts.executor_liveness("local").heard_at == 150.0 and facts.executor_liveness("local").queued == 1
