"""Structured JSON logs with a correlation id that follows a command from the API through Kafka, the
ledger and Temporal: each process sets `correlation` around the work it does for one command, and
every log line written meanwhile carries it."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import sys
import time
from collections.abc import Iterator

correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


@contextlib.contextmanager
def correlation(cid: str | None) -> Iterator[None]:
    token = correlation_id.set(cid)
    try:
        yield
    finally:
        correlation_id.reset(token)


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


def configure(process_name: str) -> None:
    """JSON lines on stderr (STEWARD_LOG_FORMAT=text for people reading a terminal)."""
    handler = logging.StreamHandler(sys.stderr)
    if os.environ.get("STEWARD_LOG_FORMAT", "json") == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    else:
        handler.setFormatter(JsonFormatter(process_name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("STEWARD_LOG_LEVEL", "INFO"))
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("temporalio").setLevel(logging.WARNING)
