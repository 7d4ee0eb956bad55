"""Notifications end to end (issue 24 "Being told", ADR 0050): from a command the ledger records to the message a
real SMTP server (aiosmtpd) and a real HTTP receiver (started here) receive, through the notifier tailing the
store and the DeliverNotification workflow on a real Temporal (the test server), with its retries.

The HTTP receivers de-duplicate by the Idempotency-Key, as a receiver should: the flaky one refuses once, then
keeps the message but loses its answer (HTTP 500), then answers the retry with 200 without keeping it twice.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from prometheus_client import REGISTRY
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steward.bus.envelope import Envelope, command_envelope
from steward.config import REPO_ROOT
from steward.domain.commands import (
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    SetNotifications,
    SubmitJob,
)
from steward.domain.notifications import KINDS
from steward.ledger.ledger import Ledger
from steward.notify.log import failed_deliveries, load_position, save_position, subscriptions
from steward.notify.settings import NotifySettings
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from steward_workflows.delivery import DeliverNotificationWorkflow
from steward_workflows.notifications import NotificationActivities, run_notifier
from steward_workflows.worker import workflow_runner

pytestmark = pytest.mark.integration

TEST_SERVER = REPO_ROOT / ".venv" / "bin" / "temporal-test-server"
QUEUE = "notify-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Mailbox:
    """aiosmtpd's handler: every message the server accepted, parsed."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"


@dataclass
class Receiver:
    """What the HTTP receiver saw: every request (path, Idempotency-Key) and, per path, the messages it kept,
    once per key."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    kept: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key", "")
                with receiver.lock:
                    receiver.requests.append((self.path, key))
                    tries = sum(1 for p, k in receiver.requests if (p, k) == (self.path, key))
                    kept = receiver.kept.setdefault(self.path, {})
                    if self.path == "/flaky" and tries == 1:
                        status = 503  # not kept
                    elif self.path == "/down":
                        status = 500
                    elif self.path == "/gone":
                        status = 404
                    else:
                        kept.setdefault(key, body)  # the receiver's de-duplication by id
                        status = 500 if self.path == "/flaky" and tries == 2 else 200  # kept, the answer lost
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def receivers() -> Iterator[tuple[Mailbox, int, Receiver, int]]:
    box, smtp_port = Mailbox(), free_port()
    smtp = Controller(box, hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    rec = Receiver()
    http = ThreadingHTTPServer(("127.0.0.1", 0), rec.handler())
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield box, smtp_port, rec, http.server_address[1]
    finally:
        http.shutdown()
        http.server_close()
        smtp.stop()


class LocalLedger:
    """The ledger's own unit of work in this process (no Kafka), for the test's commands and the worker's."""

    def __init__(self, store: EventStore) -> None:
        self.ledger = Ledger(store, consumer_name="local")
        self.lock = threading.Lock()

    def publish(self, env: Envelope) -> None:
        with self.lock:
            self.ledger.process([("local", env.encode())], {})

    def send(self, *commands: Command, actor: str = "alice", role: str = "admin") -> None:
        for command in commands:
            self.publish(command_envelope(command, actor=actor, role=role))


def new_store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'steward.db'}"
    upgrade(url)
    return EventStore.from_url(url)


@dataclass
class Notifier:
    """The notifier and a worker on one Temporal test server; `restart` starts the notifier again (the server,
    and so the workflows it already started, stay)."""

    env: WorkflowEnvironment
    store: EventStore
    settings: NotifySettings
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(run_notifier(self.store, self.env.client, self.settings, self.stop, QUEUE))

    async def halt(self) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task


@asynccontextmanager
async def notifier(store: EventStore, ledger: LocalLedger, settings: NotifySettings) -> AsyncIterator[Notifier]:
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(TEST_SERVER))
    async with env:
        acts = NotificationActivities(settings, ledger.publish)
        worker = Worker(env.client, task_queue=QUEUE, workflows=[DeliverNotificationWorkflow], activities=acts.all(),
                        graceful_shutdown_timeout=timedelta(0), workflow_runner=workflow_runner(sandbox=True))
        async with worker:
            n = Notifier(env, store, settings)
            n.start()
            try:
                yield n
            finally:
                await n.halt()


def started() -> float:
    return sum(REGISTRY.get_sample_value("steward_notifications_started_total", {"channel": c, "kind": k}) or 0.0
               for c in ("email", "webhook") for k in KINDS)


async def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def settings_for(smtp_port: int, **over: Any) -> NotifySettings:
    base: dict[str, Any] = dict(smtp_host="127.0.0.1", smtp_port=smtp_port, mail_from="steward@lab.example",
                                first_retry_s=0.2, backoff=1.0, max_retry_s=0.2, max_attempts=5, poll_s=0.1)
    return NotifySettings(**(base | over))


def cluster(ledger: LocalLedger) -> None:
    ledger.send(SetAllocations("cluster", {"a": 0.5, "b": 0.5}, "setup"), SetAllocations("a", {"a1": 1.0}, "setup"),
                RegisterNode("n0", 8, "V100", ["b0", "n0"]))


def test_events_reach_mail_and_webhooks_once_each_through_retries(
        tmp_path: Path, receivers: tuple[Mailbox, int, Receiver, int]) -> None:
    box, smtp_port, rec, http_port = receivers
    hook = f"http://127.0.0.1:{http_port}"
    store = new_store(tmp_path)
    ledger = LocalLedger(store)
    cluster(ledger)
    ledger.send(
        SetNotifications("alice", "a1", "email", "alice@lab.example", ["started_unfunded", "job_failed"]),
        SetNotifications("alice", "a1", "webhook", f"{hook}/flaky", ["started_unfunded"]),
        SetNotifications("mgr", "a", "webhook", f"{hook}/manager", ["share_changed"]),
        SetNotifications("bob", "b", "email", "bob@lab.example", ["job_failed", "started_unfunded"]),  # elsewhere
        actor="alice", role="researcher")
    ledger.send(SubmitJob("j1", "a1", 1, 600.0, ["train"]), PlaceJob("j1", {"n0": [0]}, funded=False))
    ledger.send(ReportJobStarted("j1", 1, 4242, started_at=time.time()), SetAllocations("a", {"a1": 0.5}, "rebalance"),
                ReportJobExited("j1", 1, 3))

    async def scenario() -> tuple[int, int, float]:
        async with notifier(store, ledger, settings_for(smtp_port)) as n:
            await until(lambda: len(box.messages) >= 2 and len(rec.kept.get("/flaky", {})) == 1
                        and len(rec.kept.get("/manager", {})) == 1
                        and len([r for r in rec.requests if r[0] == "/flaky"]) >= 3, "the deliveries")
            await until(lambda: load_position(store) == store.head(), "the notifier's position at the head")
            # the notifier's position lost: it reads the log again and starts nothing twice
            await n.halt()
            before = (len(rec.requests), len(box.messages), started())
            save_position(store, 0)
            n.start()
            await until(lambda: load_position(store) == store.head(), "the notifier reading the log again")
            assert started() == before[2] == 4.0
            return before

    requests, mails, _ = asyncio.run(scenario())
    assert (len(rec.requests), len(box.messages)) == (requests, mails) == (4, 2)

    subjects = sorted(str(m["Subject"]) for m in box.messages)
    assert subjects == ["Steward: Job j1 (a1) failed with exit code 3",
                        "Steward: Job j1 (a1) started unfunded: funded work may preempt it at once"]
    assert {m["To"] for m in box.messages} == {"alice@lab.example"}  # bob follows b: told nothing
    ids = [str(m["Message-ID"]) for m in box.messages]
    assert len(set(ids)) == 2 and all(i.startswith("<n") for i in ids)
    flaky = [k for p, k in rec.requests if p == "/flaky"]
    assert len(flaky) == 3 and len(set(flaky)) == 1  # refused, kept (answer lost), answered: one id
    (kept,) = rec.kept["/flaky"].values()
    assert kept["steward"]["kind"] == "started_unfunded" and "started unfunded" in kept["text"]
    (share,) = rec.kept["/manager"].values()
    assert share["steward"]["facts"]["changes"] == {"a1": {"from": 1.0, "to": 0.5}}
    assert failed_deliveries(store) == []


def test_a_delivery_given_up_is_recorded_and_listed(tmp_path: Path,
                                                    receivers: tuple[Mailbox, int, Receiver, int]) -> None:
    box, smtp_port, rec, http_port = receivers
    hook = f"http://127.0.0.1:{http_port}"
    store = new_store(tmp_path)
    ledger = LocalLedger(store)
    cluster(ledger)
    ledger.send(SetNotifications("ops", "cluster", "webhook", f"{hook}/down", ["job_failed"]),
                SetNotifications("ops", "cluster", "webhook", f"{hook}/gone", ["job_failed"]),
                SetNotifications("ops", "cluster", "email", "nobody@lab.example", ["job_failed"]))
    ledger.send(SubmitJob("j1", "a1", 1, 600.0, ["train"]), PlaceJob("j1", {"n0": [0]}, funded=True),
                ReportJobStarted("j1", 1, 4242, started_at=time.time()), ReportJobExited("j1", 1, 1))

    async def scenario() -> None:
        async with notifier(store, ledger, settings_for(smtp_port, max_attempts=3)):
            await until(lambda: len(failed_deliveries(store)) == 2 and len(box.messages) == 1, "two failures")

    asyncio.run(scenario())
    failed = {f["target"].rsplit("/", 1)[1]: f for f in failed_deliveries(store)}
    assert failed["down"]["attempts"] == 3 and "HTTP 500" in failed["down"]["error"]
    assert failed["gone"]["attempts"] == 1 and "HTTP 404" in failed["gone"]["error"]  # not retried
    assert [k for p, k in rec.requests if p == "/down"] == [failed["down"]["delivery_id"]] * 3
    assert {s.target for s in subscriptions(store)} == {f"{hook}/down", f"{hook}/gone", "nobody@lab.example"}


def test_a_log_without_subscribers_is_followed_and_the_first_choice_is_honoured(
        tmp_path: Path, receivers: tuple[Mailbox, int, Receiver, int]) -> None:
    box, smtp_port, _, _ = receivers
    store = new_store(tmp_path)
    ledger = LocalLedger(store)
    cluster(ledger)
    ledger.send(SubmitJob("j1", "a1", 1, 600.0, ["train"]), PlaceJob("j1", {"n0": [0]}, funded=True),
                ReportJobStarted("j1", 1, 4242, started_at=time.time()), ReportJobExited("j1", 1, 2))

    async def scenario() -> None:
        async with notifier(store, ledger, settings_for(smtp_port)):
            await until(lambda: load_position(store) == store.head(), "the notifier following the head")
            ledger.send(SetNotifications("alice", "a", "email", "alice@lab.example", ["job_failed"]),
                        SubmitJob("j2", "a1", 1, 600.0, ["train"]), PlaceJob("j2", {"n0": [0]}, funded=True),
                        ReportJobStarted("j2", 1, 4243, started_at=time.time()), ReportJobExited("j2", 1, 5))
            await until(lambda: len(box.messages) >= 1 and load_position(store) == store.head(), "the message")

    asyncio.run(scenario())
    # j1 failed before anyone chose anything: told to nobody; j2's failure (a1, under a) reaches alice
    assert [str(m["Subject"]) for m in box.messages] == ["Steward: Job j2 (a1) failed with exit code 5"]
