"""The writer's COPY text (steward.store.copytext, ADR 0022) is byte for byte what psycopg's own text
formatter writes for the same rows: its C formatter (the one the writer used before) and its Python one,
with the default adapters (a connection starts from these; the store registers none of its own)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

# psycopg's own formatters, the reference: a psycopg release that moves them fails this import, on purpose
# (the writer's COPY text is only known to equal psycopg's while this test runs)
from psycopg._copy_base import _format_row_text as python_format_row_text
from psycopg._copy_base import format_row_text
from psycopg.adapt import Transformer

from steward.domain.state import Job
from steward.store import copytext, schema
from steward.store.encoding import RecordedEvent
from steward.store.projections import JOB_COLUMNS, job_row

FORMATTERS: dict[str, Callable[[Sequence[Any], Any, bytearray], None]] = {
    "psycopg C": format_row_text, "psycopg Python": python_format_row_text}


def psycopg_bytes(rows: Sequence[Sequence[Any]], formatter: str = "psycopg C") -> bytes:
    out = bytearray()
    tx = Transformer()
    for row in rows:
        FORMATTERS[formatter](row, tx, out)
    return bytes(out)


# every character COPY escapes, the ones next to them, quotes and JSON escapes, non-ASCII incl. non-BMP,
# and the separators of Unicode that are not COPY's (no NUL: PostgreSQL text cannot hold it, tested below)
SPECIAL = "\\\b\t\n\v\f\r\x01\x1f\x7f\"'{},[]N é\u00a0\u2028\u2029😀\U0010fffd"
texts = st.text(alphabet=st.sampled_from(SPECIAL) | st.characters(codec="utf-8", exclude_characters="\x00"))
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [-0.0, 0.0, 1e-300, 1e300, 5e-324, 1.0, 600.0, 1e16, 1e22, -2.5, 1.7976931348623157e308, 1754000000.123456])
ints = st.integers(-(2**80), 2**80) | st.sampled_from([0, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**64])
values = st.none() | st.booleans() | ints | floats | texts


@settings(max_examples=400)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(st.lists(values, min_size=n, max_size=n), max_size=6)),
       st.sampled_from(sorted(FORMATTERS)))
@example([["a\\b\tc\nd\re\bf\vg\fh", None, True, False, -0.0, 1e-300, 1e300, 2**70, "😀\\N"]], "psycopg C")
@example([["\\N", "", "\\", "\t"]], "psycopg C")
def test_any_rows_are_what_psycopg_writes(rows: list[list[Any]], formatter: str) -> None:
    columns = [f"c{i}" for i in range(len(rows[0]))] if rows else []
    assert copytext.rows_data(rows, columns) == psycopg_bytes(rows, formatter)


def test_nul_and_lone_surrogates_are_refused_by_name_as_psycopg_refuses_them() -> None:
    for bad, psycopg_error in (("a\x00b", Exception), ("a\ud800b", UnicodeEncodeError)):
        with pytest.raises(psycopg_error):
            psycopg_bytes([[bad]])
        with pytest.raises(copytext.CopyTextError, match=r"NUL|UTF-8"):
            copytext.rows_data([["ok", bad]], ["c0", "c1"])
    with pytest.raises(copytext.CopyTextError, match=r"column payload: .*NUL"):
        copytext.events_data([record(1, "s", None, 1.0)], [("{\"a\":\"\x00\"}", "{}")])
    with pytest.raises(copytext.CopyTextError, match="column c0: no COPY text form for a bytes"):
        copytext.rows_data([[b"raw"]], ["c0"])
    with pytest.raises(copytext.CopyTextError, match="a row of 1 values for 2 columns"):
        copytext.rows_data([["a"]], ["c0", "c1"])
    with pytest.raises(copytext.CopyTextError, match="2 events but 1 payload"):
        copytext.events_data([record(1, "s", None, 1.0)] * 2, [("{}", "{}")])


def record(position: int, stream: str, message_id: str | None, at: float, kind: str = "JobSubmitted",
           prev: str = "0" * 64, h: str = "f" * 64, version: int = 1, schema_version: int = 1) -> RecordedEvent:
    return RecordedEvent(position, stream, version, kind, schema_version, {}, {}, message_id, at, prev, h)


json_texts = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                          max_leaves=8).map(lambda v: json.dumps(v, ensure_ascii=False))
events = st.lists(st.tuples(texts, st.none() | texts, texts, st.integers(1, 2**40), st.integers(1, 3), texts,
                            json_texts, json_texts), max_size=8)


@settings(max_examples=300)
@given(st.integers(0, 2**62), events, floats, st.booleans())
@example(1, [("job-j1", "m-1", "JobSubmitted", 1, 1, "a" * 64, '{"a":"x\\\\y\\n"}', '{"actor":"é"}')], 0.0, False)
def test_event_rows_are_the_tuples_insert_recorded_wrote(start: int, evs: list[tuple[Any, ...]], at: float,
                                                         one_time: bool) -> None:
    """The old writer handed psycopg (position, stream_id, version, type, schema_version, payload text,
    metadata text, message_id, recorded_at, prev_hash, hash) per event; a batch shares one time (`one_time`),
    but any times must come out right (0.0 and -0.0 too)."""
    records, texts_, tuples = [], [], []
    for i, (stream, mid, kind, version, sv, h, payload, meta) in enumerate(evs):
        t = at if one_time else at * (i % 3) - (0.0 if i % 2 else -0.0)
        r = RecordedEvent(start + i, stream, version, kind, sv, {}, {}, mid, t, h[::-1], h)
        records.append(r)
        texts_.append((payload, meta))
        tuples.append((r.position, r.stream_id, r.version, r.type, r.schema_version, payload, meta, r.message_id,
                       r.recorded_at, r.prev_hash, r.hash))
    assert copytext.events_data(records, texts_) == psycopg_bytes(tuples)


@given(st.lists(st.tuples(texts, st.none() | st.integers(1, 2**62)), max_size=8))
def test_processed_rows_are_the_tuples_mark_processed_wrote(items: list[tuple[str, int | None]]) -> None:
    assert copytext.processed_data(items) == psycopg_bytes(items)


_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_JSON_COLUMNS = {c.name for c in schema.proj_jobs.columns if c.type.__class__.__name__ == "JSON"}
maybe_float = st.none() | floats.filter(lambda x: x == x)
jobs = st.builds(
    Job, job_id=texts.filter(bool), project=texts, gpus=st.integers(0, 2**40), min_runtime_s=floats,
    command=st.lists(texts, max_size=4).map(tuple), resumable=st.booleans(),
    job_class=st.sampled_from(["batch", "interactive", "debug"]) | texts, priority=st.integers(-(2**40), 2**40),
    submitted_at=floats, state=st.sampled_from(["QUEUED", "RUNNING", "COMPLETED"]),
    attempt=st.integers(0, 9),
    assignments=st.lists(st.tuples(texts, st.lists(st.integers(0, 2**33), max_size=4).map(tuple)),
                         max_size=3).map(tuple),
    funded=st.booleans(), started_at=maybe_float, ended_at=maybe_float, exit_code=st.none() | st.integers(-9, 2**40),
    protected_until=maybe_float, session_cap_at=maybe_float,
    session_warnings_at=st.none() | st.lists(floats, max_size=3).map(tuple),
)


def insert_rows_tuple(job: Job, position: int) -> tuple[Any, ...]:
    """What `insert_rows` (the rebuild's writer) hands psycopg for `job_row`: JSON columns as the json
    module's compact text, None as NULL."""
    row = job_row(job, position)
    return tuple(_DUMPS(row[c]) if c in _JSON_COLUMNS and row[c] is not None else row[c] for c in JOB_COLUMNS)


@settings(max_examples=300)
@given(st.lists(st.tuples(jobs | st.none(), st.integers(1, 2**62)), max_size=6))
def test_job_rows_are_what_the_rebuild_writes_for_the_same_jobs(jobs_: list[tuple[Job | None, int]]) -> None:
    """Live rows (`write_rows`) and rebuilt rows (`insert_rows`) carry the same text, so `steward audit
    rebuild`'s server-side checksums compare equal; a job gone from the state (None) has no row."""
    assert tuple(c.name for c in schema.proj_jobs.columns) == JOB_COLUMNS
    for job, p in jobs_:
        if job is not None:
            assert tuple(job_row(job, p)) == JOB_COLUMNS
    changed = [(job.job_id if job else f"gone{i}", job, p) for i, (job, p) in enumerate(jobs_)]
    expected = psycopg_bytes([insert_rows_tuple(j, p) for _, j, p in changed if j is not None])
    assert copytext.jobs_data(changed) == expected


@given(st.lists(st.tuples(st.one_of(texts, st.integers(0, 5)), st.lists(st.integers(0, 7) | st.booleans(),
                                                                         max_size=3)), max_size=4))
def test_unusual_assignments_fall_back_to_the_json_module(assignments: list[tuple[Any, list[Any]]]) -> None:
    """Keys that are not str or GPUs that are not int (outside the record's declared types), and repeated
    nodes, come out as the json module writes the dict `job_row` builds."""
    expected = _DUMPS({n: list(g) for n, g in assignments})
    assert copytext.assignments_json([(n, tuple(g)) for n, g in assignments]) == expected
    assert copytext.command_json(["a", 1, None]) == _DUMPS(["a", 1, None])
