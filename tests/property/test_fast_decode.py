"""The ledger reads messages through orjson where it gives exactly what `json.loads` gives (same value,
same types, or the same error class), so dedup, decisions and dead letters are unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.bus.envelope import loads

scalars = (st.none() | st.booleans() | st.integers() | st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**40])
           | st.floats(allow_nan=False, allow_infinity=False) | st.text())
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=5),
                      max_leaves=25)


def same(a: Any, b: Any) -> bool:
    """Equal with equal types all the way down (1 == 1.0 would hide an int read as a float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return bool(b != b)
    return bool(a == b)


def check(raw: bytes) -> None:
    try:
        expected: Any = json.loads(raw)
    except Exception as err:
        with pytest.raises(type(err)):
            loads(raw)
        return
    assert same(loads(raw), expected)


@settings(max_examples=2000)
@given(values, st.booleans())
def test_what_json_writes_is_read_as_json_reads_it(value: Any, ascii_only: bool) -> None:
    check(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@settings(max_examples=2000)
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?", fullmatch=True))
def test_number_literals_are_read_to_the_same_value(literal: str) -> None:
    check(literal.encode())
    check(f'{{"n":{literal}}}'.encode())


@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":2}', b"NaN", b'{"x":Infinity}', b'"\\ud800"', b'"\\udc00\\ud800"', b"\xff\xfe{\x00}\x00",
    '{"a":"é"}'.encode("utf-16"), b"", b"{", b"[1,]", b'{"a":1}x', b"\xc3\x28", b"  {} ", b"123456789012345678901",
    b'{"big":-123456789012345678901234}', b'{"t":"\\u0000\\n\\/"}',
])
def test_edge_messages_read_the_same(raw: bytes) -> None:
    check(raw)


@given(st.binary(max_size=40))
def test_arbitrary_bytes_read_the_same_or_fail_the_same(raw: bytes) -> None:
    check(raw)


# -- the envelope around the value: every refusal names its problem ---------------------------------------

from steward.bus.envelope import Envelope, MalformedMessage  # noqa: E402


@pytest.mark.parametrize(("raw", "problem"), [
    (None, "empty message"),
    (b"[1]", "message is not a JSON object"),
    (b'{"type":"T","key":"k","payload":{}}', "missing field(s) id"),
    (b'{"id":"i","payload":{}}', "missing field(s) type, key"),
    (b"{}", "missing field(s) id, type, key, payload"),
    (b'{"id":"i","type":"T","key":"k","payload":[]}', "payload and meta must be objects"),
    (b'{"id":"i","type":"T","key":"k","payload":{},"meta":null}', "payload and meta must be objects"),
    (b'{"id":"i","type":"T","key":"k","payload":{},"meta":"x"}', "payload and meta must be objects"),
])
def test_an_envelope_that_is_not_one_is_refused_by_name(raw: bytes | None, problem: str) -> None:
    with pytest.raises(MalformedMessage) as err:
        Envelope.decode(raw)
    assert str(err.value) == problem


@pytest.mark.parametrize(("raw", "meta"), [
    (b'{"id":"i","type":"T","key":"k","payload":{"a":1}}', {}),
    (b'{"id":"i","type":"T","key":"k","payload":{"a":1},"meta":{"actor":"x"}}', {"actor": "x"}),
])
def test_an_envelope_without_meta_has_an_empty_one(raw: bytes, meta: dict[str, Any]) -> None:
    env = Envelope.decode(raw)
    assert (env.id, env.type, env.key, env.payload, env.meta) == ("i", "T", "k", {"a": 1}, meta)
