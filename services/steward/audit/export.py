"""`steward audit export`: events and signed checkpoints, as one JSON document or NDJSON lines, that the
standalone verifier checks without the database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from steward.audit.checkpoints import checkpoint_rows, public_checkpoint
from steward.store.eventstore import EventStore
from steward.store.verifier import EXPORT_FORMAT


def export_lines(store: EventStore, start: int = 1, to: int | None = None) -> Iterator[dict[str, Any]]:
    head = store.head()
    last = head if to is None else min(to, head)
    yield {"kind": "header", "format": EXPORT_FORMAT, "from": max(1, start), "to": last, "head": head}
    for rec in store.iterate(after=max(1, start) - 1):
        if rec.position > last:
            break
        yield {"kind": "event", **rec.to_dict()}
    for cp in checkpoint_rows(store):
        if cp["tree_size"] <= last:
            yield {"kind": "checkpoint", **public_checkpoint(cp)}


def write_ndjson(store: EventStore, out: Any, start: int = 1, to: int | None = None) -> int:
    n = 0
    for item in export_lines(store, start, to):
        out.write(json.dumps(item, separators=(",", ":"), sort_keys=True) + "\n")
        n += item["kind"] == "event"
    return n


def as_document(store: EventStore, start: int = 1, to: int | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"header": {}, "events": [], "checkpoints": []}
    for item in export_lines(store, start, to):
        kind = item.pop("kind")
        if kind == "header":
            doc["header"] = item
        else:
            doc[kind + "s"].append(item)
    return doc
