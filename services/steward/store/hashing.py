"""The hash chain: each event's hash covers the previous hash and a canonical (RFC 8785) encoding of the
event, in which the payload appears only as its digest (so a payload can be redacted later without
breaking the chain).

The definitions live in the standalone verifier (`steward.audit.verifier`), so that the code an auditor
runs on an export is the very code the store hashes with."""

from __future__ import annotations

from typing import Any

from steward.audit.verifier import (
    GENESIS,
    REDACTED_KEY,
    canonical_json,
    canonical_text,
    event_body_text,
    event_hash,
    payload_digest,
)


def hash_recorded(prev_hash: str, rec: Any) -> str:
    """The hash of a recorded event (anything with the `RecordedEvent` fields) after `prev_hash`."""
    return event_hash(prev_hash, position=rec.position, stream_id=rec.stream_id, version=rec.version, type=rec.type,
                      schema_version=rec.schema_version, payload=rec.payload, metadata=rec.metadata,
                      message_id=rec.message_id, recorded_at=rec.recorded_at)


__all__ = [
    "GENESIS",
    "REDACTED_KEY",
    "canonical_json",
    "canonical_text",
    "event_body_text",
    "event_hash",
    "hash_recorded",
    "payload_digest",
]
