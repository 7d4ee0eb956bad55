"""Structured JSON logs with a correlation id that follows a command from the API through Kafka, the
ledger and Temporal: each process sets `correlation` around the work it does for one command, and
every log line written meanwhile carries it.

How the id travels (docs/operations.md "Following one command"):
- api: `CorrelationMiddleware` takes the request's `X-Correlation-Id` (or makes one), answers with it,
  and the command gateway puts it into the envelope's `meta.correlation_id` on Kafka;
- ledger: copies the envelope's meta into each event's metadata and logs one line per command with it;
- scheduler: remembers the correlation id of each job's submission (`JobCorrelations`) and publishes its
  placements and preemptions of that job under it;
- worker (dispatcher): sets it from the event's metadata; the workflow input carries it, and Temporal
  headers carry it to every activity, child workflow, signal and update (`steward.logs_temporal`);
- executor: its activities run under the id from those headers, and its reports carry it back.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


@contextlib.contextmanager
def correlation(cid: str | None) -> Iterator[None]:
    token = correlation_id.set(cid)
    try:
        yield
    finally:
        correlation_id.reset(token)


def current() -> str | None:
    """The correlation id of the work this task or thread is doing (None outside one)."""
    return correlation_id.get()


HEADER = "x-correlation-id"
_VALID_ID = re.compile(r"^[A-Za-z0-9._:@/-]{1,128}$")


def valid_id(value: str | None) -> bool:
    """A correlation id a client may choose: 1-128 characters of letters, digits and `._:@/-`."""
    return bool(value) and _VALID_ID.match(value or "") is not None


class CorrelationMiddleware:
    """ASGI middleware: every HTTP request and websocket runs under a correlation id, the client's
    `X-Correlation-Id` when it sends a valid one, a fresh one otherwise; HTTP answers carry it back."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        sent = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == HEADER.encode()), None)
        cid = sent if sent is not None and valid_id(sent) else uuid.uuid4().hex
        header = (HEADER.encode(), cid.encode())

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        with correlation(cid):
            await self.app(scope, receive, send_with_id)


def log_recorded(logger: logging.Logger, recorded: Any) -> None:
    """One line per decided command (not per event: a command may record many), under the command's
    correlation id: "SubmitJob -> JobSubmitted job/j1 @12". `recorded` is the ledger's batch of
    `RecordedEvent`s, grouped by message id in log order."""
    if not logger.isEnabledFor(logging.INFO):
        return
    groups: dict[str, list[Any]] = {}
    for rec in recorded:
        groups.setdefault(rec.message_id or f"@{rec.position}", []).append(rec)
    for recs in groups.values():
        meta = recs[0].metadata or {}
        shown = ", ".join(f"{r.type} {r.stream_id} @{r.position}" for r in recs[:5])
        more = f" (+{len(recs) - 5} more)" if len(recs) > 5 else ""
        logger.info("%s -> %s%s", meta.get("command", "?"), shown, more,
                    extra={"correlation_id": meta.get("correlation_id"), "actor": meta.get("actor")})


TERMINAL_EVENTS = frozenset({"JobCompleted", "JobFailed", "JobCancelled"})


class JobCorrelations:
    """job id -> the correlation id of its submission, folded from recorded events, so that the decisions
    about a job (placements, preemptions) travel under the id of the command that submitted it. Ended
    jobs are forgotten, so it holds only live jobs."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}

    def observe(self, event_type: str, payload: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        if event_type == "JobSubmitted":
            cid = metadata.get("correlation_id")
            if isinstance(cid, str) and cid:
                self._ids[str(payload.get("job_id", ""))] = cid
        elif event_type in TERMINAL_EVENTS:
            self._ids.pop(str(payload.get("job_id", "")), None)

    def of(self, job_id: str | None) -> str | None:
        return self._ids.get(job_id or "")

    def __len__(self) -> int:
        return len(self._ids)


class JsonFormatter(logging.Formatter):
    def __init__(self, process_name: str) -> None:
        super().__init__()
        self.process_name = process_name

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "process": self.process_name,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        cid = getattr(record, "correlation_id", None) or correlation_id.get()
        if cid:
            entry["correlation_id"] = cid
        for key, value in vars(record).items():
            if key not in _RESERVED and key != "correlation_id" and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """For people reading a terminal: one line, the correlation id in brackets when there is one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        cid = getattr(record, "correlation_id", None) or correlation_id.get()
        return f"{line} [{cid}]" if cid else line


def logger_levels(spec: str) -> dict[str, str]:
    """`STEWARD_LOG_LEVELS`, e.g. "steward.ledger.commands=WARNING,steward.executor=DEBUG"."""
    levels: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, level = part.partition("=")
        if not sep or not name.strip() or level.strip().upper() not in logging.getLevelNamesMapping():
            raise ValueError(f"STEWARD_LOG_LEVELS: '{part}' is not LOGGER=LEVEL with a level such as INFO")
        levels[name.strip()] = level.strip().upper()
    return levels


def configure(process_name: str) -> None:
    """JSON lines on stderr (STEWARD_LOG_FORMAT=text for people reading a terminal); the root level is
    STEWARD_LOG_LEVEL (INFO) and STEWARD_LOG_LEVELS sets single loggers."""
    handler = logging.StreamHandler(sys.stderr)
    if os.environ.get("STEWARD_LOG_FORMAT", "json") == "text":
        handler.setFormatter(TextFormatter())
    else:
        handler.setFormatter(JsonFormatter(process_name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("STEWARD_LOG_LEVEL", "INFO"))
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("temporalio").setLevel(logging.WARNING)
    for name, level in logger_levels(os.environ.get("STEWARD_LOG_LEVELS", "")).items():
        logging.getLogger(name).setLevel(level)
