"""The ledger's fast canonical encoder (orjson where provably equal) is byte-identical to the verifier's
RFC 8785 encoder on every value, so stored hash chains keep verifying; where they cannot agree the fast
one defers to the reference (same text, or the same error)."""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.store.hashing import fast_canonical_bytes, fast_canonical_text
from steward.store.verifier import canonical_text

# floats of every magnitude, including the exponent boundaries of repr (1e-4, 1e16) and ES6 (1e21)
floats = (st.floats(allow_nan=False, allow_infinity=False)
          | st.builds(lambda m, e: m * 10.0 ** e, st.floats(-10, 10, allow_nan=False), st.integers(-30, 30))
          | st.sampled_from([1e-4, -1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 1e21, 1e20, 2.0**53,
                             2.0**53 - 1, -(2.0**53), 2.0**63, 0.0, -0.0, 5e-324, 1.7976931348623157e308, 0.1,
                             0.30000000000000004, 1764511382.123456]))
ints = st.integers() | st.sampled_from([2**53, 2**63 - 1, 2**63, -(2**63), -(2**63) + 1, 2**64, 10**30])
texts = (st.text()
         | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F))  # control chars, quotes, \
         | st.text(alphabet=st.sampled_from(["\u2028", "\u2029", "\ufeff", "\U0001f600", "\ud800", "\udfff", "é",
                                             "\x7f", "\x00", "\\", '"', "\n", "\t", "\ufffd", "\ue000"])))
keys = texts | st.sampled_from(["\U0001f600", "\ue000", "\uffff", "a", "A", "\ud7ff"])
scalars = st.none() | st.booleans() | ints | floats | texts
values = st.recursive(
    scalars,
    lambda children: (st.lists(children, max_size=5) | st.tuples(children, children)
                      | st.dictionaries(keys, children, max_size=6)),
    max_leaves=30,
)


def reference(value: Any) -> str | type[BaseException]:
    try:
        return canonical_text(value)
    except Exception as err:  # the same error class from both is agreement too
        return type(err)


def assert_same_text_or_error(value: Any) -> None:
    """The fast encoder prints the reference's text, or raises the reference's error."""
    expected = reference(value)
    if isinstance(expected, str):
        assert fast_canonical_text(value) == expected
    else:
        with pytest.raises(expected):
            fast_canonical_text(value)


@settings(max_examples=3000)
@given(values)
def test_fast_canonical_text_is_the_reference_text(value: Any) -> None:
    assert_same_text_or_error(value)


@settings(max_examples=1000)
@given(values)
def test_fast_canonical_bytes_are_the_reference_bytes(value: Any) -> None:
    expected = reference(value)
    if isinstance(expected, str):
        try:
            want = expected.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: neither has UTF-8 bytes for it
            with pytest.raises(UnicodeEncodeError):
                fast_canonical_bytes(value)
            return
        assert fast_canonical_bytes(value) == want


@given(st.dictionaries(st.sampled_from(["job_id", "project", "gpus", "min_runtime_s", "command", "submitted_at",
                                        "resumable", "priority", "sent_at", "actor", "role"]),
                       scalars | st.lists(texts, max_size=4), max_size=11))
def test_command_shaped_payloads(payload: dict[str, Any]) -> None:
    expected = reference(payload)
    if isinstance(expected, str):
        assert fast_canonical_text(payload) == expected


@settings(max_examples=500)
@given(values)
def test_the_encoders_leave_their_input_as_it_was(value: Any) -> None:
    """The fast path hands a dict or list that needs no change to orjson itself and copies only where a
    value changes (an integral float): what it was given is never written to."""
    before = copy.deepcopy(value)
    for encode in (fast_canonical_text, fast_canonical_bytes):
        with contextlib.suppress(Exception):
            encode(value)
        assert repr(value) == repr(before)  # repr: NaN != NaN, and -0.0 == 0 would hide a change


@pytest.mark.parametrize("value", [
    {"b": "\ue000", "\U0001f600": 1}, {"x": [{"\ue000": 1, "\U0001f600": 2}]}, {"é": 1.0, "e": 2},
    {"a": [1.0, "x"], "b": ("y", -0.0)}, {"t": 2.0**53 - 1, "u": 2.0**53}, {"s": ["a", "b"], "n": None},
])
def test_keys_and_values_the_fast_path_checks_on_its_output(value: Any) -> None:
    """Keys whose UTF-16 order differs from code point order, found on a non-ASCII output; values changed
    inside nested containers; the integral floats at 2**53."""
    assert_same_text_or_error(value)


class Flag(int):
    pass


@pytest.mark.parametrize("value", [
    {"n": math.nan}, {"n": math.inf}, {1: "x"}, {"f": Flag(1)}, {"s": {1, 2}}, {"b": b"x"}, [object()],
])
def test_what_the_reference_refuses_or_prints_carefully_goes_to_the_reference(value: Any) -> None:
    assert_same_text_or_error(value)


# -- the ledger's event encoding: the verifier's hash chain, built from parts per message and batch ---

from steward.domain.events import Event  # noqa: E402
from steward.store.eventstore import PendingAppend, encode_events  # noqa: E402
from steward.store.verifier import REDACTED_KEY, event_hash  # noqa: E402

names = texts.filter(lambda s: s.isascii() or max(s) < "\ud800") | st.sampled_from(
    ["job-j1", "Job\"Submitted", "a\\b", "é", "\u2028", "", "JobSubmitted"])
plain = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(-1e6, 1e6) | names,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(names, c, max_size=3), max_leaves=8)
digests = st.text("0123456789abcdef", min_size=64, max_size=64)
payloads = st.dictionaries(names, plain, max_size=4) | st.builds(lambda d: {REDACTED_KEY: d}, digests)
events = st.builds(Event, st.sampled_from(["s1", "s2", "job-\"q\"", "é"]) | names, names, payloads)
pendings = st.builds(PendingAppend, st.lists(events, max_size=3), st.dictionaries(names, plain, max_size=3),
                     st.none() | names)


@settings(max_examples=500)
@given(st.lists(pendings, max_size=5), st.integers(0, 10**6), floats.filter(lambda f: not math.isinf(f)),
       st.dictionaries(st.sampled_from(["s1", "s2"]), st.integers(0, 5)))
def test_encode_events_hashes_exactly_as_the_verifier(batch: list[PendingAppend], start: int, at: float,
                                                       versions: dict[str, int]) -> None:
    """`encode_events` numbers, versions and chains every event as `event_hash` (the verifier's
    reference) does, and returns the canonical texts it hashed."""
    before = dict(versions)
    records, texts_ = encode_events(batch, start, "f" * 64, versions, at)
    prev, position, seen = "f" * 64, start, dict(before)
    expected = [(p, e) for p in batch for e in p.events]
    assert len(records) == len(texts_) == len(expected)
    for rec, (payload_text, meta_text), (pending, ev) in zip(records, texts_, expected, strict=True):
        position += 1
        seen[ev.stream] = seen.get(ev.stream, 0) + 1
        assert (rec.position, rec.stream_id, rec.version, rec.type) == (position, ev.stream, seen[ev.stream], ev.type)
        assert (payload_text, meta_text) == (canonical_text(ev.payload), canonical_text(pending.metadata))
        assert rec.prev_hash == prev
        assert rec.hash == event_hash(prev, position=position, stream_id=ev.stream, version=seen[ev.stream],
                                      type=ev.type, schema_version=ev.schema_version, payload=ev.payload,
                                      metadata=pending.metadata, message_id=pending.message_id, recorded_at=at)
        prev = rec.hash
    assert versions == seen
