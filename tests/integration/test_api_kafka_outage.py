"""The API started while Kafka is down (issue 22): a real API process on the slot's PostgreSQL and stopped broker
(`infra/kafka.sh stop`). It starts and serves reads at once; a mutation is answered 503 with `Retry-After`, the
code `kafka_unavailable` and a message naming the broker (the command was not sent), never a hang or HTTP 500;
once `infra/kafka.sh start` brought the broker back, the same mutation is recorded by a ledger, with no restart
of the API. Before, the API waited for the broker in its start (`STEWARD_KAFKA_WAIT_S`, 600 s) and served
nothing meanwhile, not even `/healthz`, then exited."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from steward.auth.tokens import TokenStore
from steward.store.eventstore import EventStore
from tests.integration.conftest import SLOT, TEST_ENV, TEST_RUN_DIR, infra
from tests.integration.pg import pg_owner, pg_store, store_test_urls
from tests.integration.test_api_replicas import api_process
from tests.integration.test_ledger_reliability import LedgerProcess, create_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # the broker is stopped and started
__all__ = ["pg_owner", "pg_store"]

PORT = 18017 + SLOT * 20  # beside the slot's API port; no stack process of the slot uses it
REGISTER = """mutation($id: String!) { registerNode(input: {id: $id, gpus: 2, gpuModel: "L4", path: ["z", $id]}) {
  __typename ... on NodeRegistered { id position } ... on Rejected { code reason } } }"""


def ask(token: str, query: str, **variables: Any) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{PORT}/graphql", json={"query": query, "variables": variables},
                      headers={"Authorization": f"Bearer {token}"}, timeout=90)


def assert_kafka_503(answer: httpx.Response) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text[:2000])
    assert answer.headers.get("retry-after") == "2"
    assert "Traceback" not in answer.text and "internal error" not in answer.text, answer.text
    (error,) = answer.json()["errors"]
    assert error["extensions"]["code"] == "kafka_unavailable", error
    assert f"Kafka at {TEST_ENV['STEWARD_KAFKA_BOOTSTRAP']} is unavailable" in error["message"], error
    assert "the command was not sent" in error["message"] and error["extensions"]["maybeRecorded"] is False


def test_the_api_serves_reads_while_kafka_is_down_and_takes_mutations_once_it_is_back(
        pg_store: EventStore, tmp_path: Path) -> None:
    prefix = f"kout{uuid.uuid4().hex[:8]}"
    create_topics(prefix)
    admin = TokenStore(pg_store).create(role="admin", scopes=[], subject="kafka-outage-admin", created_by="test")[0]
    log = TEST_RUN_DIR / "logs" / f"test-api-{PORT}.log"  # where api_process writes it
    start = log.stat().st_size if log.exists() else 0
    ledger = LedgerProcess(prefix, tmp_path / "ledger.log")
    infra("kafka", "stop")
    try:
        began = time.monotonic()
        # the operator's principal writes `<prefix>.commands` as the API (the API's own may write only steward.*)
        with api_process(PORT, "api", STEWARD_STORE_URL=store_test_urls()[0], STEWARD_TOPIC_PREFIX=prefix,
                         STEWARD_COMPONENT="admin", STEWARD_LOG_FORMAT="text"):
            assert time.monotonic() - began < 60  # api_process waited for /healthz: 200
            me = ask(admin, "{ me { role } nodes { id } }")
            assert me.status_code == 200 and me.json()["data"]["me"]["role"] == "admin", me.text
            assert_kafka_503(ask(admin, REGISTER, id="kafka-back-1"))
            assert_kafka_503(ask(admin, REGISTER, id="kafka-back-1"))  # every try, at once, while it is away
            health = httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=30)
            assert health.status_code == 200, health.text  # reads are served: the replica stays ready
            intake = health.json()["commands"]
            assert intake["via"] == "kafka" and intake["state"] == "unavailable", intake
            assert intake["bootstrap"] == TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"] and intake["error"], intake

            infra("kafka", "start")
            ledger.start()
            deadline = time.monotonic() + 180
            while True:
                answer = ask(admin, REGISTER, id="kafka-back-1")
                if answer.status_code == 200 and not answer.json().get("errors"):
                    break
                if answer.status_code == 503:
                    assert_kafka_503(answer)  # the producer's next try is up to 2 s away
                else:  # sent, but the ledger (started with the broker) had not recorded it in time
                    assert answer.json()["errors"][0]["extensions"]["code"] == "OUTCOME_TIMEOUT", answer.text
                assert time.monotonic() < deadline, answer.text
                time.sleep(0.5)
            assert answer.json()["data"]["registerNode"]["__typename"] == "NodeRegistered", answer.text
            intake = httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=30).json()["commands"]
            assert intake == {"via": "kafka", "bootstrap": TEST_ENV["STEWARD_KAFKA_BOOTSTRAP"],
                              "state": "connected"}, intake
            assert [e.type for e in pg_store.read(0)][-1] == "NodeRegistered"
            with log.open("rb") as fh:
                fh.seek(start)
                text = fh.read().decode(errors="replace")
            assert "Traceback" not in text, text[-4000:]
            assert "unavailable to the command producer" in text and "reached by the command producer" in text
    finally:
        ledger.stop()
        infra("kafka", "start")  # the session's other modules find the broker running (a no-op when it is)
