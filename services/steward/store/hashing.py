"""The hash chain: each event's hash covers the previous hash and a canonical (RFC 8785) encoding of the
event, in which the payload appears only as its digest (so a payload can be redacted later without
breaking the chain).

The definitions live in the standalone verifier (`steward.store.verifier`), so that the code an auditor
runs on an export is the very code the store hashes with. `fast_canonical_text` is the ledger's encoder:
orjson where its output is provably the verifier's (plain values of exact builtin types, floats that print
without an exponent, 64-bit integers, keys whose UTF-16 order is their code point order), the verifier's
own `canonical_text` for anything else (property-tested equal in tests/property/test_fast_canonical.py).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from steward.store.verifier import (
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
_INT_LIMIT: Final = 2**63  # orjson writes 64-bit integers; larger ones go to the reference
# integral floats below 2**53 print as the integer (ES6); above, the reference decides (a float, compared
# with floats without a conversion)
_EXACT_FLOAT: Final = 9007199254740992.0


class _Reference(Exception):
    """The value needs the reference encoder (orjson would print it differently, or cannot)."""


def _float(x: float) -> float | int:
    """A float as orjson must be given it to print RFC 8785's text, or `_Reference`."""
    if -_EXACT_FLOAT < x < _EXACT_FLOAT:  # NaN fails every comparison; every float beyond 2**53 is integral
        i = int(x)
        if float(i) == x:  # integral (also -0.0 -> 0, as ES6 prints it)
            return i
        # Python's repr (and orjson) print without an exponent exactly when 1e-4 <= |x| < 1e16, and ES6
        # prints those positionally with the same shortest digits; the exponent forms differ (1e-07 / 1e-7).
        if x >= 1e-4 or x <= -1e-4:
            return x
    raise _Reference  # integral beyond 2**53, tiny, NaN and Infinity: the reference decides (or names them)


def _plain_dict(obj: dict[Any, Any]) -> dict[Any, Any]:
    """`_plain` of a dict: the dict itself when every value prints as it is (strings, booleans, None,
    64-bit integers), else a copy with the values that must change changed. Keys must be exact `str`
    (`_keys_ordered` checks their UTF-16 order on the output)."""
    out: dict[Any, Any] | None = None
    for k, v in obj.items():
        if type(k) is not str:
            raise _Reference  # non-str keys and subclasses: the reference names them or decides
        tv = type(v)
        if tv is str or tv is bool or v is None:
            continue
        if tv is int:
            if not -_INT_LIMIT < v < _INT_LIMIT:
                raise _Reference
            continue
        if out is None:
            out = dict(obj)
        if tv is float:
            out[k] = _float(v)
        elif tv is list:
            out[k] = _plain_list(v)
        elif tv is dict:
            out[k] = _plain_dict(v)
        else:
            out[k] = _plain(v)
    return obj if out is None else out


def _plain_list(obj: list[Any]) -> list[Any]:
    """`_plain` of a list: the list itself when it holds only strings, else a converted copy."""
    for v in obj:
        if type(v) is not str:
            return [w if type(w) is str else _plain(w) for w in obj]
    return obj


def _plain(obj: Any) -> Any:
    """`obj` as orjson must be given it to print RFC 8785's text (integral floats as ints; containers
    copied only where a value changes: the result is only printed), checked to print under orjson exactly
    as RFC 8785 (the verifier) prints it, but for the UTF-16 order of keys, which `_keys_ordered` checks on
    the printed text; raises `_Reference` otherwise. Exact builtin types only (subclasses go to the
    reference)."""
    t = type(obj)
    if t is dict:
        return _plain_dict(obj)
    if t is str or t is bool or obj is None:
        return obj
    if t is int:
        if -_INT_LIMIT < obj < _INT_LIMIT:
            return obj
        raise _Reference
    if t is float:
        return _float(obj)
    if t is list:
        return _plain_list(obj)
    if t is tuple:
        return [v if type(v) is str else _plain(v) for v in obj]
    raise _Reference  # subclasses and anything else: the reference's careful path (or its error)


def _keys_ordered(obj: Any) -> bool:
    """Whether every key in `obj` sorts the same by code point (orjson) as by UTF-16 code unit (RFC 8785):
    true unless a key holds a character from U+D800 up (surrogates, U+E000-U+FFFF, or beyond)."""
    if type(obj) is dict:
        for k, v in obj.items():
            if not (k.isascii() or max(k) < "\ud800") or not _keys_ordered(v):
                return False
    elif type(obj) is list:
        for v in obj:
            if not _keys_ordered(v):
                return False
    return True


def _dumps(obj: Any) -> bytes:
    """orjson's RFC 8785 text of `obj`, or `_Reference` / orjson's error where it may differ from it. An
    ASCII text has ASCII keys; otherwise the keys' order is checked."""
    plain = _plain(obj)
    out = orjson.dumps(plain, option=_SORT_KEYS)
    if out.isascii() or _keys_ordered(plain):
        return out
    raise _Reference


def fast_canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 of `obj` as UTF-8, byte-identical to `canonical_json` (orjson when provably equal)."""
    try:
        return _dumps(obj)
    except (_Reference, orjson.JSONEncodeError):  # e.g. a lone surrogate: the reference's behaviour
        return canonical_text(obj).encode("utf-8")


def fast_canonical_text(obj: Any) -> str:
    """RFC 8785 of `obj` as text, identical to `canonical_text` (orjson when provably equal)."""
    try:
        return _dumps(obj).decode("utf-8")
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
