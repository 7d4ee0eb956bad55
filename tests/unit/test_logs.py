"""Correlation ids: chosen or made per API request, remembered per job by the scheduler, written into
every JSON log line, and carried in Temporal headers."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from steward.logs import (
    HEADER,
    CorrelationMiddleware,
    JobCorrelations,
    JsonFormatter,
    TextFormatter,
    correlation,
    current,
    log_recorded,
    logger_levels,
    valid_id,
)
from steward.logs_temporal import from_args, from_headers, with_header
from steward.store.eventstore import RecordedEvent


def capture(name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("test"))
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_every_line_written_inside_a_correlation_carries_it() -> None:
    logger, stream = capture("test.logs.inside")
    logger.info("before")
    with correlation("c-1"):
        logger.info("inside")
        with correlation("c-2"):
            logger.info("nested")
        logger.info("inside again")
    logger.info("after", extra={"correlation_id": "explicit"})
    got = [(x["msg"], x.get("correlation_id")) for x in lines(stream)]
    assert got == [("before", None), ("inside", "c-1"), ("nested", "c-2"), ("inside again", "c-1"),
                   ("after", "explicit")]


def run_asgi(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, list[tuple[bytes, bytes]]]:
    seen: list[str | None] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(current())
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    asyncio.run(CorrelationMiddleware(app)({"type": "http", "headers": headers}, receive, send))
    return seen[0], sent[0]["headers"]


def test_the_api_keeps_a_valid_client_id_and_answers_with_it() -> None:
    seen, headers = run_asgi([(b"x-correlation-id", b"client-42")])
    assert seen == "client-42"
    assert (HEADER.encode(), b"client-42") in headers


@pytest.mark.parametrize("sent", [b"", b"has space", b"x" * 200, "caf\u00e9".encode("latin-1")])
def test_an_unusable_client_id_is_replaced_by_a_fresh_one(sent: bytes) -> None:
    seen, headers = run_asgi([(b"x-correlation-id", sent)])
    assert seen and seen != sent.decode("latin-1") and valid_id(seen)
    assert (HEADER.encode(), seen.encode()) in headers


def test_each_request_without_an_id_gets_its_own() -> None:
    assert run_asgi([])[0] != run_asgi([])[0]


def test_the_scheduler_remembers_the_submissions_id_until_the_job_ends() -> None:
    ids = JobCorrelations()
    ids.observe("JobSubmitted", {"job_id": "j1"}, {"correlation_id": "c1"})
    ids.observe("JobSubmitted", {"job_id": "j2"}, {})
    ids.observe("JobPreempted", {"job_id": "j1"}, {"correlation_id": "other"})  # requeued: still the submit's
    assert (ids.of("j1"), ids.of("j2"), ids.of(None)) == ("c1", None, None)
    for ending in ("JobCompleted", "JobFailed", "JobCancelled"):
        ids.observe("JobSubmitted", {"job_id": "j"}, {"correlation_id": "c"})
        ids.observe(ending, {"job_id": "j"}, {})
        assert ids.of("j") is None
    assert len(ids) == 1


def rec(position: int, message_id: str, type_: str, cid: str, command: str) -> RecordedEvent:
    return RecordedEvent(position, f"job-{position}", 1, type_, 1, {}, {"correlation_id": cid, "command": command},
                         message_id, 0.0, "", "")


def test_the_ledger_logs_one_line_per_command_under_its_id() -> None:
    logger, stream = capture("test.logs.ledger")
    log_recorded(logger, [rec(1, "m1", "JobSubmitted", "c1", "SubmitJob"),
                          rec(2, "m2", "JobPlaced", "c2", "PlaceJob"),
                          *[rec(3 + i, "m3", "JobDeferred", "c3", "ExplainWaiting") for i in range(7)]])
    got = lines(stream)
    assert [(x["correlation_id"], x["msg"].split(" ->")[0]) for x in got] == [
        ("c1", "SubmitJob"), ("c2", "PlaceJob"), ("c3", "ExplainWaiting")]
    assert "(+2 more)" in got[2]["msg"]


def test_log_levels_per_logger_and_a_clear_error_for_a_bad_one() -> None:
    assert logger_levels(" steward.ledger.commands=warning , a=DEBUG") == {"steward.ledger.commands": "WARNING",
                                                                         "a": "DEBUG"}
    assert logger_levels("") == {}
    with pytest.raises(ValueError, match="'steward=LOUD' is not LOGGER=LEVEL"):
        logger_levels("steward=LOUD")


@dataclass
class Input:
    job_id: str
    correlation_id: str = ""


def test_temporal_headers_carry_the_id_and_inputs_are_the_fallback() -> None:
    headers = with_header({}, "c9")
    assert from_headers(headers) == "c9"
    assert with_header(headers, "other") is headers  # an id already there is kept
    assert with_header({}, None) == {}
    assert from_headers({}) is None
    assert from_args([Input("j", "c7")]) == "c7"
    assert from_args([Input("j"), object()]) is None


def test_the_text_format_shows_the_id_too() -> None:
    record = logging.LogRecord("x", logging.INFO, "f", 1, "placed %s", ("j1",), None)
    with correlation("c5"):
        assert TextFormatter().format(record).endswith("INFO x placed j1 [c5]")
    assert TextFormatter().format(record).endswith("INFO x placed j1")
