"""The API while PostgreSQL is unreachable (ADR 0064): a real API process on the slot's PostgreSQL, which
`infra/postgres.sh stop` takes away and `start` brings back. Meanwhile `/healthz` and every request that needs
the store answer 503 with `Retry-After`, the code `store_unavailable` and a message naming the store, never
HTTP 500 with a traceback; afterwards the same requests answer again. (The chaos run saw 137 HTTP 500s and 52
GraphQL "internal error"s around PostgreSQL's restart.)"""

from __future__ import annotations

import time

import httpx
import pytest

from steward.auth.tokens import TokenStore
from steward.store.eventstore import EventStore
from tests.integration.conftest import SLOT, TEST_RUN_DIR, infra
from tests.integration.pg import pg_owner, pg_store, store_test_urls
from tests.integration.test_api_replicas import api_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # PostgreSQL is stopped and started
__all__ = ["pg_owner", "pg_store"]

PORT = 18018 + SLOT * 20  # beside the slot's API port; no stack process of the slot uses it


def ask(token: str, query: str) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{PORT}/graphql", json={"query": query},
                      headers={"Authorization": f"Bearer {token}"}, timeout=60)


VERIFY = "{ verify(fromPosition: 1) { checked ok } }"  # reads the log itself, never a cache


def assert_clean_503(answer: httpx.Response) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text[:2000])
    assert answer.headers.get("retry-after") == "2"
    body = answer.json()
    text = answer.text
    assert "Traceback" not in text and "internal error" not in text, text
    errors = body.get("errors") or []
    if errors:  # GraphQL
        assert {e["extensions"]["code"] for e in errors} == {"store_unavailable"}, errors
        assert all("the store (PostgreSQL at 127.0.0.1:" in e["message"] for e in errors), errors
    else:  # /healthz
        assert body["ok"] is False and body["code"] == "store_unavailable", body
        assert "the store (PostgreSQL at 127.0.0.1:" in body["error"], body


def test_the_api_answers_503_naming_the_store_while_postgres_is_down(pg_store: EventStore) -> None:
    tokens = TokenStore(pg_store)
    admin = tokens.create(role="admin", scopes=[], subject="outage-admin", created_by="test")[0]
    log = TEST_RUN_DIR / "logs" / f"test-api-{PORT}.log"  # where api_process writes it
    start = log.stat().st_size if log.exists() else 0
    stopped = False
    try:
        # the token mirror reads every token once and not again within the test (an hour): a token minted after
        # that read is one the API has not seen, looked up in the store (session 21: minted before the API
        # started, it was in the mirror, and answered 200 whenever the outage began between two reads)
        with api_process(PORT, "api", STEWARD_STORE_URL=store_test_urls()[0], STEWARD_LOG_FORMAT="text",
                         STEWARD_API_AUTH_CACHE_S="3600"):
            assert ask(admin, VERIFY).status_code == 200
            unseen = tokens.create(role="auditor", scopes=[], subject="outage-auditor", created_by="test")[0]
            infra("postgres", "stop")
            stopped = True
            assert_clean_503(httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=30))
            assert_clean_503(ask(admin, VERIFY))  # a resolver that reads the store
            assert_clean_503(ask(unseen, "{ me { role } }"))  # authentication of a token not cached yet
            infra("postgres", "start")
            stopped = False
            deadline = time.monotonic() + 60
            while (answer := ask(admin, VERIFY)).status_code != 200:
                assert_clean_503(answer)  # a pool still holding dead connections may need a try or two
                assert time.monotonic() < deadline, answer.text
                time.sleep(0.5)
            assert answer.json()["data"]["verify"]["ok"] is True
            assert ask(unseen, "{ me { role } }").status_code == 200
            assert httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=30).status_code == 200
            with log.open("rb") as fh:
                fh.seek(start)
                text = fh.read().decode(errors="replace")
            assert "Traceback" not in text, text[-4000:]
            assert "the store is unavailable" in text
    finally:
        if stopped:
            infra("postgres", "start")
