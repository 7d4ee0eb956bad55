"""The hash chain: each event's hash covers the previous hash and a canonical (RFC 8785) encoding of the
event, in which the payload appears only as its digest (so a payload can be redacted later without
breaking the chain)."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

GENESIS = "0" * 64


def payload_digest(payload: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(payload)).hexdigest()


def event_hash(
    prev_hash: str,
    *,
    position: int,
    stream_id: str,
    version: int,
    type: str,
    schema_version: int,
    payload: Any,
    metadata: Any,
    recorded_at: float,
) -> str:
    body = {
        "position": position,
        "stream_id": stream_id,
        "version": version,
        "type": type,
        "schema_version": schema_version,
        "payload_sha256": payload_digest(payload),
        "metadata": metadata,
        "recorded_at": repr(float(recorded_at)),
    }
    return hashlib.sha256(prev_hash.encode() + rfc8785.dumps(body)).hexdigest()
