"""Denials are audit events in the hash chain, and a flood of them cannot flood the log.

The limiter (steward.auth.denials.DenialAuditor) is tested on its own with a clock we move, then end to
end: a real server, a real HTTP client, the ledger in process, and the log read back and verified."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.api.settings import ApiSettings
from steward.auth.denials import Denial, DenialAuditor
from steward.auth.principal import Principal, Role
from steward.domain.commands import RecordAccessDenial
from steward.domain.decide import decide_or_reject
from steward.domain.state import LedgerState
from steward.store.eventstore import RecordedEvent
from tests.unit.api.harness import Server, serve

ALICE = Principal("alice", Role.researcher, ("a1",), token_id="t-alice")
BOB = Principal("bob", Role.researcher, ("b1",), token_id="t-bob")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


@pytest.mark.parametrize(("burst", "window", "denials", "expected"), [
    # (burst, window s, [(at, who)], [(subject, count) of each event, in order, after a final flush])
    (3, 60, [(0, ALICE)] * 2, [("alice", 1), ("alice", 1)]),
    (3, 60, [(0, ALICE)] * 10, [("alice", 1)] * 3 + [("alice", 7)]),
    (2, 60, [(0, ALICE), (0, BOB), (1, ALICE), (2, ALICE), (3, BOB), (4, BOB)],
     [("alice", 1), ("bob", 1), ("alice", 1), ("bob", 1), ("alice", 1), ("bob", 1)]),
    # the window closes: its summary first, then the new window's first denial one by one
    (1, 10, [(0, ALICE), (1, ALICE), (2, ALICE), (11, ALICE)], [("alice", 1), ("alice", 2), ("alice", 1)]),
    (1, 10, [(0, None), (0, None), (0, None)], [("anonymous", 1), ("anonymous", 2)]),
], ids=["under-burst", "flood-one-summary", "keys-apart", "window-rolls", "anonymous-by-address"])
def test_each_key_gets_at_most_burst_plus_one_events_per_window_and_every_denial_is_counted(
        burst: int, window: float, denials: list[tuple[float, Principal | None]],
        expected: list[tuple[str, int]]) -> None:
    sent: list[RecordAccessDenial] = []
    clock = Clock()

    async def publish(cmd: RecordAccessDenial) -> None:
        sent.append(cmd)

    auditor = DenialAuditor(publish, burst=burst, window_s=window, clock=clock)

    async def go() -> None:
        for at, who in denials:
            clock.now = 1000.0 + at
            await auditor.record(who, Denial("job", "job:x", "outside the principal's scopes"), "10.0.0.1")
        await auditor.flush(everything=True)

    run(go())
    assert [(c.subject, c.count) for c in sent] == expected
    assert sum(c.count for c in sent) == len(denials)
    for c in sent:  # every command is one the ledger records (not rejects)
        (event,) = decide_or_reject(LedgerState(), c, 0.0)
        assert event.type == "AccessDenied" and event.stream == f"access-{c.subject}"


def test_a_summary_says_how_many_per_operation_and_when() -> None:
    sent: list[RecordAccessDenial] = []
    clock = Clock()

    async def publish(cmd: RecordAccessDenial) -> None:
        sent.append(cmd)

    auditor = DenialAuditor(publish, burst=1, window_s=60, clock=clock)

    async def go() -> None:
        for i, op in enumerate(["job", "job", "cancelJob", "job"]):
            clock.now = 1000.0 + i
            await auditor.record(ALICE, Denial(op, "job:x", "outside"), "")
        clock.now = 1061.0
        assert await auditor.flush() == 1

    run(go())
    summary = sent[-1]
    assert (summary.count, summary.operations, summary.first_at, summary.last_at) == \
        (3, {"job": 2, "cancelJob": 1}, 1001.0, 1003.0)
    assert (summary.operation, summary.target, summary.token_id) == ("*", "*", "t-alice")


def test_the_number_of_keys_is_bounded() -> None:
    sent: list[RecordAccessDenial] = []

    async def publish(cmd: RecordAccessDenial) -> None:
        sent.append(cmd)

    auditor = DenialAuditor(publish, burst=1, window_s=60, clock=Clock(), max_keys=3)

    async def go() -> None:
        for i in range(50):
            await auditor.record(None, Denial("authenticate", "*", "bad token"), f"10.0.0.{i}")
        await auditor.flush(everything=True)

    run(go())
    assert len(auditor._windows) == 0
    assert len(sent) == 3 + 1 + 1  # three keys, the overflow key's first denial and its summary
    assert sum(c.count for c in sent) == 50
    assert sent[-1].subject == "*"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("count", 0, "at least 1 denial"),
    ("reason", " ", "names its 'reason'"),
    ("target", "x" * 301, "at most 300"),
    ("last_at", 1.0, "before its first_at"),
    ("operations", {"job": 2}, "add up to its count"),
])
def test_the_ledger_rejects_a_denial_record_that_does_not_say_what_happened(field: str, value: object,
                                                                            message: str) -> None:
    base = RecordAccessDenial(subject="bob", role="researcher", operation="job", target="job:x", reason="outside",
                              first_at=2.0, last_at=2.0)
    changes: dict[str, Any] = {field: value}
    cmd = dataclasses.replace(base, **changes)
    (event,) = decide_or_reject(LedgerState(), cmd, 0.0)
    assert event.type == "CommandRejected" and message in event.payload["reason"]


# -- end to end ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("denials"))
    api = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, api_denial_burst=5,
                      api_denial_window_s=2.0)
    with serve(tmp, api) as s:
        yield s


def denied_events(server: Server, after: int = 0) -> list[RecordedEvent]:
    return [e for e in server.store.read(after) if e.type == "AccessDenied"]


def test_a_denial_is_an_event_in_the_hash_chain_with_who_what_and_why(server: Server) -> None:
    head = server.store.head()
    server.gql('query { job(id: "a1-run") { id } }', token=server.tokens["other"])
    (ev,) = denied_events(server, head)
    assert ev.stream_id == "access-bob" and ev.metadata["actor"] == "bob" and ev.metadata["role"] == "researcher"
    assert {k: ev.payload[k] for k in ("subject", "role", "operation", "target", "reason", "count")} == {
        "subject": "bob", "role": "researcher", "operation": "job", "target": "job:a1-run",
        "reason": "outside the principal's scopes", "count": 1}
    verified = server.gql("{ verify { ok checked } }", token=server.tokens["auditor"])["data"]["verify"]
    assert verified["ok"] and verified["checked"] >= ev.position
    rows = server.gql("{ accessDenials(first: 500, subject: \"bob\") { edges { id subject operation target count } } }",
                      token=server.tokens["auditor"])["data"]["accessDenials"]["edges"]
    assert {"id": ev.position, "subject": "bob", "operation": "job", "target": "job:a1-run", "count": 1} in rows


def test_a_flood_of_denials_adds_a_bounded_number_of_events_and_answers_stay_the_same(server: Server) -> None:
    window, burst = server.services.settings.api_denial_window_s, server.services.settings.api_denial_burst
    time.sleep(window + 0.1)  # a fresh window for bob
    head = server.store.head()
    q = "query($id: ID!) { job(id: $id) { id } }"
    started = time.monotonic()
    answers = {str(server.gql(q, {"id": "a1-run" if i % 2 else "no-such-job"}, server.tokens["other"]))
               for i in range(300)}
    elapsed = time.monotonic() - started
    assert len(answers) == 1  # foreign and missing look the same, flood or not
    time.sleep(window + 0.1)
    server.gql(q, {"id": "a1-run"}, server.tokens["other"])  # a new window: the last summary is recorded
    events = denied_events(server, head)
    windows = math.ceil(elapsed / window) + 1
    assert len(events) <= (burst + 1) * windows + 1, (len(events), elapsed)
    # a foreign job is a denial; a missing one is not (nothing was refused), though both read the same
    assert sum(e.payload["count"] for e in events) == 150 + 1, "every denial is counted"
    summaries = [e for e in events if e.payload["count"] > 1]
    assert summaries and all(e.payload["operations"] == {"job": e.payload["count"]} for e in summaries)
