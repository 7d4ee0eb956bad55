"""Notifications through the whole stack (ADR 0050): `steward notify set` -> API -> Kafka -> ledger -> PostgreSQL; a
job fails on the local executor; the worker's notifier reads the event from the store and its DeliverNotification
workflow posts to a real HTTP receiver started here. A receiver that refuses for good is given up, recorded through
the workflows' own Kafka topic and listed by `steward notify failed`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.integration.conftest import steward
from tests.integration.test_notify_delivery import Receiver

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    rec = Receiver()
    http = ThreadingHTTPServer(("127.0.0.1", 0), rec.handler())
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        yield rec, f"http://127.0.0.1:{http.server_address[1]}"
    finally:
        http.shutdown()
        http.server_close()


def wait(check: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_a_failed_job_reaches_a_webhook_and_a_refused_one_is_listed(stack: dict[str, object],
                                                                    receiver: tuple[Receiver, str]) -> None:
    rec, base = receiver
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    steward("notify", "set", "b436b2", "--webhook", f"{base}/hook", "--kinds", "job_failed")
    steward("notify", "set", "b436b2", "--webhook", f"{base}/gone", "--kinds", "job_failed")
    listed = json.loads(steward("notify", "list", "--output", "json").stdout)
    assert {r["target"] for r in listed} >= {f"{base}/hook", f"{base}/gone"}

    out = steward("submit", "-p", "b436b2", "-g", "1", "--min-runtime", "0", "-o", "json", "--", "sh", "-c", "exit 7")
    job_id = json.loads(out.stdout)["id"]
    wait(lambda: any(m["steward"]["job_id"] == job_id for m in rec.kept.get("/hook", {}).values()), "the message")
    (message,) = [m for m in rec.kept["/hook"].values() if m["steward"]["job_id"] == job_id]
    assert message["steward"]["kind"] == "job_failed" and message["steward"]["facts"]["exit_code"] == 7
    assert f"Job {job_id} (b436b2) failed with exit code 7" in message["text"]

    def failed() -> list[dict[str, object]]:
        rows: list[dict[str, object]] = json.loads(steward("notify", "failed", "--output", "json").stdout)
        return [r for r in rows if r["target"] == f"{base}/gone"]

    wait(lambda: len(failed()) == 1, "the refused delivery listed")
    (row,) = failed()
    assert row["attempts"] == 1 and "HTTP 404" in str(row["error"]) and row["kind"] == "job_failed"
