"""The events of a batch as the store records them: numbered, versioned, canonically encoded and chained
by hash (`encode_events`), and the record types (`RecordedEvent`, `PendingAppend`). The ledger runs this
for every event, so the module is compiled with mypyc (ADR 0020); it holds no IO."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from steward.domain.events import Event
from steward.store.hashing import REDACTED_KEY, fast_canonical_bytes, fast_canonical_text, json_string, payload_digest
from steward.store.upcasting import upcast


@dataclass(frozen=True, slots=True, init=False)
class RecordedEvent:
    position: int
    stream_id: str
    version: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: dict[str, Any]
    message_id: str | None
    recorded_at: float
    prev_hash: str
    hash: str

    def __init__(self, position: int, stream_id: str, version: int, type: str, schema_version: int,
                 payload: dict[str, Any], metadata: dict[str, Any], message_id: str | None, recorded_at: float,
                 prev_hash: str, hash: str) -> None:
        """The frozen dataclass's `__init__` written out: compiled (ADR 0020), each `object.__setattr__` is a
        native slot write instead of the generated `__init__` run as Python code (one record per event)."""
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "stream_id", stream_id)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "schema_version", schema_version)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "metadata", metadata)
        object.__setattr__(self, "message_id", message_id)
        object.__setattr__(self, "recorded_at", recorded_at)
        object.__setattr__(self, "prev_hash", prev_hash)
        object.__setattr__(self, "hash", hash)

    def as_event(self) -> Event:
        """The event as the domain folds it today: older schema versions are upcast on the way."""
        return Event(self.stream_id, self.type, upcast(self.type, self.schema_version, self.payload))

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "stream_id": self.stream_id,
            "version": self.version,
            "type": self.type,
            "schema_version": self.schema_version,
            "payload": self.payload,
            "metadata": self.metadata,
            "message_id": self.message_id,
            "recorded_at": self.recorded_at,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(slots=True, init=False)
class PendingAppend:
    """Events decided for one message, with the message's metadata."""

    events: Sequence[Event]
    metadata: dict[str, Any]
    message_id: str | None = None
    expected_versions: dict[str, int] = field(default_factory=dict)

    def __init__(self, events: Sequence[Event], metadata: dict[str, Any], message_id: str | None = None,
                 expected_versions: dict[str, int] | None = None) -> None:
        """The dataclass's `__init__` written out (a native one when compiled; one per message)."""
        self.events = events
        self.metadata = metadata
        self.message_id = message_id
        self.expected_versions = {} if expected_versions is None else expected_versions


def encode_events(batch: Sequence[PendingAppend], position: int, prev: str, versions: dict[str, int],
                  recorded_at: float) -> tuple[list[RecordedEvent], list[tuple[str, str]]]:
    """Number, version and hash the events of `batch` after (`position`, `prev`), updating `versions`
    (stream -> last version) as it goes; returns the records and their (payload, metadata) canonical texts.

    Each payload and each message's metadata is encoded once (RFC 8785, `fast_canonical_text`: the
    verifier's bytes) and that text is both hashed and stored. The body text is `event_body_text`'s, built
    here from the parts that stay the same across a message (its id and metadata) or a batch (the time,
    the types): equal to it (tests/property/test_fast_canonical.py)."""
    out: list[RecordedEvent] = []
    texts: list[tuple[str, str]] = []
    sha256 = hashlib.sha256
    at = f'"{float(recorded_at)!r}"'
    types: dict[str, str] = {}  # type -> its JSON string (a batch has a few types)
    for pending in batch:
        meta_text = fast_canonical_text(pending.metadata)
        mid = pending.message_id
        head = f'{{"message_id":{"null" if mid is None else json_string(mid)},"metadata":{meta_text},"payload_sha256":"'
        for ev in pending.events:
            position += 1
            stream = ev.stream
            version = versions.get(stream, 0) + 1
            versions[stream] = version
            payload = ev.payload
            payload_bytes = fast_canonical_bytes(payload)
            texts.append((payload_bytes.decode("utf-8"), meta_text))
            digest = (payload_digest(payload) if REDACTED_KEY in payload else sha256(payload_bytes).hexdigest())
            etype = ev.type
            jtype = types.get(etype)
            if jtype is None:
                jtype = types[etype] = json_string(etype)
            body = (f'{head}{digest}","position":{position},"recorded_at":{at},'
                    f'"schema_version":{int(ev.schema_version)},"stream_id":{json_string(stream)},"type":{jtype},'
                    f'"version":{version}}}')
            h = sha256((prev + body).encode("utf-8")).hexdigest()
            out.append(RecordedEvent(
                position, stream, version, etype, ev.schema_version, payload,
                pending.metadata, mid, recorded_at, prev, h,
            ))
            prev = h
    return out, texts
