"""A Steward process started while Kafka is down waits for it instead of exiting (ADR 0064): a real ledger
started against the slot's stopped broker logs "waiting for Kafka at ..." once a try, stays up, answers 503
on its metrics port's `/ready`, and once `infra/kafka.sh start` brought the broker back, records a submission
and is ready. Before ADR 0064 it exited with `KafkaTimeoutError: Unable to bootstrap` after 30 s (or sooner,
as soon as the broker had been away longer than one bootstrap)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from steward.store.eventstore import EventStore
from tests.integration.conftest import SLOT, TEST_ENV, infra
from tests.integration.pg import pg_owner, pg_store
from tests.integration.test_ledger_reliability import LedgerProcess, create_topics, publish, workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # the broker is stopped and started
__all__ = ["pg_owner", "pg_store"]

METRICS_PORT = 18019 + SLOT * 20  # beside the slot's API port; no stack process of the slot uses it


def ready(timeout: float = 5.0) -> tuple[int, dict[str, object]] | None:
    try:
        answer = httpx.get(f"http://127.0.0.1:{METRICS_PORT}/ready", timeout=timeout)
    except httpx.HTTPError:
        return None
    return answer.status_code, json.loads(answer.text)


def test_a_ledger_started_while_kafka_is_down_waits_then_records(pg_store: EventStore, tmp_path: Path) -> None:
    prefix = f"wait{int(time.time())}"
    create_topics(prefix)
    log = tmp_path / "ledger.log"
    ledger = LedgerProcess(prefix, log)
    ledger.env |= {"STEWARD_METRICS_PORT": str(METRICS_PORT), "STEWARD_LOG_FORMAT": "text"}
    infra("kafka", "stop")
    try:
        ledger.start()
        assert ledger.proc is not None
        deadline = time.monotonic() + 90
        while "waiting for Kafka at" not in log.read_text(errors="replace"):
            assert ledger.proc.poll() is None, f"the ledger exited while Kafka was down:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no wait logged:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        answer = ready()
        assert answer is not None and answer[0] == 503, answer
        assert "waiting for Kafka" in json.dumps(answer[1])
        time.sleep(4)  # a few seconds more of the outage: still up, still waiting
        assert ledger.proc.poll() is None
        infra("kafka", "start")
        back = time.monotonic()
        publish(prefix, workload(2), store=pg_store)  # the allocation tree, recorded, then one submission
        deadline = time.monotonic() + 120
        while pg_store.head() < 2:
            assert ledger.proc.poll() is None, f"the ledger exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"nothing recorded:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        print(f"recorded {time.monotonic() - back:.1f} s after the broker was ready")
        assert [r.type for r in pg_store.read(0)][:2] == ["AllocationsSet", "JobSubmitted"]  # nothing refused
        answer = ready()
        assert answer is not None and answer[0] == 200, answer
        text = log.read_text(errors="replace")
        waits = [line for line in text.splitlines() if "waiting for Kafka at" in line]
        assert waits and all(TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"] in line for line in waits)
        assert "Unable to bootstrap" not in text and "Traceback" not in text, text[-3000:]
        assert ledger.proc.poll() is None
    finally:
        ledger.stop()
        infra("kafka", "start")  # the session's other modules find the broker running (a no-op when it is)
