"""The hash chain: each event's hash covers the previous hash and a canonical (RFC 8785) encoding of the
event, in which the payload appears only as its digest (so a payload can be redacted later without
breaking the chain).

The definitions live in the standalone verifier (`steward.audit.verifier`), so that the code an auditor
runs on an export is the very code the store hashes with. `fast_canonical_text` is the ledger's encoder:
orjson where its output is provably the verifier's (plain values of exact builtin types, floats that print
without an exponent, 64-bit integers, keys whose UTF-16 order is their code point order), the verifier's
own `canonical_text` for anything else (property-tested equal in tests/property/test_fast_canonical.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from steward.audit.verifier import (
    GENESIS,
    REDACTED_KEY,
    canonical_json,
    canonical_text,
    event_body_text,
    event_hash,
    json_string,
    payload_digest,
)

_SORT_KEYS = orjson.OPT_SORT_KEYS
_INT_LIMIT = 2**63  # orjson writes 64-bit integers; larger ones go to the reference
_EXACT_FLOAT = 2**53  # integral floats below this print as the integer (ES6); above, the reference decides


class _Reference(Exception):
    """The value needs the reference encoder (orjson would print it differently, or cannot)."""


def _float(x: float) -> float | int:
    """A float as orjson must be given it to print RFC 8785's text, or `_Reference`."""
    if x.is_integer():  # also -0.0 -> 0, as ES6 prints it
        if -_EXACT_FLOAT < x < _EXACT_FLOAT:
            return int(x)
        raise _Reference
    # Python's repr (and orjson) print without an exponent exactly when 1e-4 <= |x| < 1e16, and ES6
    # prints those positionally with the same shortest digits; the exponent forms differ (1e-07 / 1e-7).
    if 1e-4 <= x < 1e16 or -1e16 < x <= -1e-4:
        return x
    raise _Reference  # NaN and Infinity land here too (the reference names them)


def _plain(obj: Any) -> Any:
    """`obj` with integral floats as ints, checked to print under orjson exactly as RFC 8785 (the verifier)
    prints it; raises `_Reference` otherwise. Exact builtin types only (subclasses go to the reference)."""
    t = type(obj)
    if t is dict:
        out = {}
        for k, v in obj.items():
            if type(k) is not str or not (k.isascii() or max(k) < "\ud800"):
                raise _Reference  # non-str keys (the reference names them) or UTF-16 order questions
            tv = type(v)
            if tv is str or v is None or tv is bool:
                out[k] = v
            elif tv is int:
                if not -_INT_LIMIT < v < _INT_LIMIT:
                    raise _Reference
                out[k] = v
            elif tv is float:
                out[k] = _float(v)
            else:
                out[k] = _plain(v)
        return out
    if t is str or t is bool or obj is None:
        return obj
    if t is int:
        if -_INT_LIMIT < obj < _INT_LIMIT:
            return obj
        raise _Reference
    if t is float:
        return _float(obj)
    if t is list or t is tuple:
        return [v if type(v) is str else _plain(v) for v in obj]
    raise _Reference  # subclasses and anything else: the reference's careful path (or its error)


def fast_canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 of `obj` as UTF-8, byte-identical to `canonical_json` (orjson when provably equal)."""
    try:
        return orjson.dumps(_plain(obj), option=_SORT_KEYS)
    except (_Reference, orjson.JSONEncodeError):  # e.g. a lone surrogate: the reference's behaviour
        return canonical_text(obj).encode("utf-8")


def fast_canonical_text(obj: Any) -> str:
    """RFC 8785 of `obj` as text, identical to `canonical_text` (orjson when provably equal)."""
    try:
        return orjson.dumps(_plain(obj), option=_SORT_KEYS).decode("utf-8")
    except (_Reference, orjson.JSONEncodeError):
        return canonical_text(obj)


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
    "fast_canonical_bytes",
    "fast_canonical_text",
    "hash_recorded",
    "json_string",
    "payload_digest",
]
