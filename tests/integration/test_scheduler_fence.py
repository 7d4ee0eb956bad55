"""A paused-then-resumed active scheduler records nothing (issue 22, ADR 0065), on the whole stack (real Kafka,
PostgreSQL, the ledger and both scheduler candidates as `steward up --standbys` starts them).

The active scheduler is paused with SIGSTOP; its standby takes the lease and places a job (its commands carry the
new epoch); the old one is resumed with SIGCONT. It can publish nothing the ledger records: either it finds the
lease taken before it publishes (the scheduler's own check, ADR 0060), or its commands, decided before the pause
and published after it, carry the old epoch and the ledger refuses them outright. The second case needs a pause
between the check and the publish, a window of milliseconds a test cannot hit with a signal, so the test also
sends, on the scheduler's own topic with the scheduler's own Kafka identity, what such a cycle sends: a placement
with the old epoch. The ledger refuses it before the domain sees it (a `CommandRefused` naming both epochs, where
without an epoch the domain would have decided it)."""

from __future__ import annotations

import os
import signal
import time
import uuid

import httpx
import pytest
from kafka import KafkaProducer

from steward.bus.envelope import command_envelope
from steward.bus.identity import SCHEDULER_ACTOR, SYSTEM_ROLE
from steward.config import Settings
from steward.domain.commands import PlaceJob, SubmitJob
from steward.infra.processes import Paths
from steward.store.eventstore import EventStore
from tests.integration.conftest import kafka_options, steward
from tests.integration.test_kafka_identities import SCENARIO
from tests.integration.test_standbys import lease, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

def send(user: str, topic: str, env: object) -> None:
    producer = KafkaProducer(**kafka_options(user), acks="all", max_block_ms=10_000, request_timeout_ms=10_000)
    try:
        producer.send(topic, key=env.key.encode(), value=env.encode()).get(timeout=15)  # type: ignore[attr-defined]
    finally:
        producer.close(timeout=5)


def submit(job_id: str, project: str) -> None:
    env = command_envelope(SubmitJob(job_id, project, 1, 0.0, ["true"]), actor="admin", role="admin")
    send("steward-admin", "steward.commands", env)


def test_a_paused_then_resumed_active_scheduler_records_nothing(stack: dict[str, object]) -> None:
    # lazy: the stack's start-up, as the other whole-stack modules do
    from steward.cli.stack import bring_up

    settings = Settings()
    store = EventStore.from_url(settings.resolved_store_url)
    paths = Paths(settings.run_dir)
    steward("tree", "apply", str(SCENARIO))  # the allocation `ee9e8c` the job charges
    steward("cluster", "apply", str(SCENARIO))  # nodes to place on
    info = bring_up(settings, postgres=True, supervise=False, standbys=True)  # adds ledger-2 and scheduler-2
    urls = info["metrics"]
    assert isinstance(urls, dict)
    old_pid: int | None = None
    try:
        holder, old_epoch = wait_for(lambda: lease(store, "scheduler"), 60, "a scheduler to hold the lease")
        old_pid = int(holder.split(":")[1])
        names = {int(paths.pid_file(n).read_text()): n for n in ("scheduler", "scheduler-2")
                 if paths.pid_file(n).exists()}
        assert old_pid in names, (holder, names)
        paused_head = store.head()
        os.kill(old_pid, signal.SIGSTOP)
        _, new_epoch = wait_for(lambda: (seen := lease(store, "scheduler")) and seen[1] > old_epoch and seen,
                                30, "the standby to take the scheduler's lease")
        # the new active decides: a job submitted now is placed by it, its placement carrying the new epoch
        job = f"fence-{uuid.uuid4().hex[:8]}"
        submit(job, "ee9e8c")
        placed = wait_for(lambda: next((r for r in store.iterate(paused_head)
                                        if r.type == "JobPlaced" and r.payload["job_id"] == job), None),
                          90, "the new active scheduler to place the job")
        assert placed.metadata.get("epoch") == new_epoch, placed.metadata
        # the paused active's last cycle, as it reaches the ledger: a placement decided under the old epoch
        waiting = f"fence-{uuid.uuid4().hex[:8]}"
        gpus = {node: list(held) for node, held in placed.payload["assignments"].items()}
        late = command_envelope(PlaceJob(waiting, gpus, True), actor=SCHEDULER_ACTOR, role=SYSTEM_ROLE,
                                epoch=old_epoch)
        send("steward-scheduler", "steward.commands.scheduler", late)
        os.kill(old_pid, signal.SIGCONT)
        reason = f"fenced: scheduler epoch {old_epoch}, lease at {new_epoch}"
        refused = wait_for(lambda: next((r for r in store.iterate(paused_head) if r.type == "CommandRefused"
                                         and r.payload["message_id"] == late.id), None),
                           60, "the ledger to refuse the old epoch's placement")
        assert refused.payload["reason"] == reason and refused.payload["command"] == "PlaceJob"
        log_file = paths.log_file(names[old_pid])
        wait_for(lambda: "stepping down" in log_file.read_text(errors="replace") or None, 30,
                 "the old active to step down")
        time.sleep(3.0)  # whatever the old active had decided has had its chance to reach the ledger
        recorded_by_old = [r for r in store.iterate(paused_head)
                           if r.metadata.get("actor") == SCHEDULER_ACTOR and r.metadata.get("epoch") == old_epoch
                           and r.type != "CommandRefused"]
        assert recorded_by_old == [], [(r.position, r.type, r.metadata) for r in recorded_by_old]
        assert not any(r.payload.get("job_id") == waiting for r in store.iterate(paused_head)
                       if r.type != "CommandRefused")
        assert (lease(store, "scheduler") or ("", 0))[1] == new_epoch  # the old one stands by, no new takeover
        holder_pid = int((lease(store, "ledger") or ("::", 0))[0].split(":")[1])
        ledger = next(n for n in ("ledger", "ledger-2") if paths.pid_file(n).exists()
                      and int(paths.pid_file(n).read_text()) == holder_pid)
        text = httpx.get(str(urls[ledger]), timeout=30).text  # the active ledger: it refused and counted
        assert 'steward_ledger_fenced_commands_total{role="scheduler"} 1.0' in text, text[-2000:]
        print(f"\npaused scheduler (epoch {old_epoch}) replaced by epoch {new_epoch}; its late placement: {reason}")
    finally:
        if old_pid is not None:
            os.kill(old_pid, signal.SIGCONT)
        bring_up(settings, postgres=True, supervise=False, standbys=False)  # the session's stack as it was
