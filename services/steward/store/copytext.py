"""The data of a `COPY ... FROM STDIN` (text format) built in one piece, for the ledger's writer.

The writer sends each table's rows as one `bytes` (`copy.write`) instead of handing psycopg one tuple per
row (`write_row`): the rows are built here, in compiled code (ADR 0020), without a Python tuple per row or
the json module's encoder object per job, so the writer thread holds the GIL for less of each batch while
the ledger decides the next one (ADR 0022).

The bytes are exactly what psycopg's own text formatter (`psycopg.copy`'s `format_row_text` with the
default adapters) writes for the same row, so PostgreSQL reads the same values (property-tested in
tests/property/test_copytext.py against psycopg's C and Python formatters):

- None is `\\N`; a bool is `t` / `f`; an int its decimal digits; a float its `repr` (shortest round trip,
  `1e+300`, `-0.0`, `inf`, `nan`); a str its UTF-8 with backslash, backspace, tab, newline, vertical tab,
  form feed and carriage return escaped as `\\\\`, `\\b`, `\\t`, `\\n`, `\\v`, `\\f`, `\\r`.
- A str holding NUL cannot be stored in a text column (psycopg refuses it too): `CopyTextError`, naming
  the column. So does a str that is not UTF-8 encodable (a lone surrogate).

How it stays cheap: every str field has its backslashes doubled as it is placed (one C `replace`, which
returns the same string when there is none), and the table's text is joined once. Control characters are
then rare, and their absence is checked on the whole text at once: it holds exactly one tab per column
separator and one newline per row, and no carriage return, backspace, vertical tab, form feed or NUL. Only
when that check fails is the table built again with every field fully escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring  # what `json` (ensure_ascii=False) writes a str with: C
from typing import Final

from steward.domain.state import Job
from steward.store.encoding import RecordedEvent

NULL: Final = "\\N"
# the escapes of COPY's text format, backslash first (the others insert backslashes of their own)
_ESCAPES: Final = (("\\", "\\\\"), ("\b", "\\b"), ("\t", "\\t"), ("\n", "\\n"), ("\v", "\\v"), ("\f", "\\f"),
                   ("\r", "\\r"))
_RARE: Final = ("\r", "\b", "\v", "\f", "\x00")  # absent from a table's text on the fast path
EVENT_COLUMNS: Final = ("position", "stream_id", "version", "type", "schema_version", "payload", "metadata",
                        "message_id", "recorded_at", "prev_hash", "hash")
PROCESSED_COLUMNS: Final = ("message_id", "position")
JOB_COLUMNS: Final = ("job_id", "project", "state", "gpus", "min_runtime_s", "resumable", "job_class", "priority",
                      "command", "submitted_at", "attempt", "assignments", "funded", "started_at", "ended_at",
                      "exit_code", "position", "protected_until", "session_cap_at", "session_warnings_at",
                      "session_address")


class CopyTextError(ValueError):
    """A value PostgreSQL's COPY text format cannot carry (NUL in a string, a string that is not UTF-8, an
    unsupported type); the message names the column."""


def escape(text: str, column: str = "") -> str:
    """`text` as one field of COPY's text format (every escape; `CopyTextError` on NUL)."""
    if "\x00" in text:
        raise CopyTextError(f"column {column or '?'}: PostgreSQL text fields cannot contain NUL (0x00) characters")
    for raw, escaped in _ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def _str(text: str, full: bool, column: str) -> str:
    """A str field: backslashes doubled (the fast path), or every escape (`full`)."""
    return escape(text, column) if full else text.replace("\\", "\\\\")


def field(value: object, full: bool = True, column: str = "") -> str:
    """Any supported value as one field, as psycopg's default text dumpers and escaping write it."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return _str(value, full, column)
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise CopyTextError(f"column {column or '?'}: no COPY text form for a {type(value).__name__} ({value!r})")


def _clean(text: str, rows: int, columns: int) -> bool:
    """No field of a table's text (built with backslashes doubled) holds a character that needs escaping."""
    if text.count("\t") != rows * (columns - 1) or text.count("\n") != rows:
        return False
    return all(c not in text for c in _RARE)


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CopyTextError(f"COPY data is not UTF-8 encodable: {exc.reason} at {text[exc.start:exc.end]!r}") from exc


def _data(build: Callable[[bool], tuple[str, int]], columns: int) -> bytes:
    """The text `build(full)` makes (and its number of rows) as UTF-8: built with backslashes doubled and
    checked whole, or built again with every field fully escaped when a field holds anything else COPY
    escapes (`full`)."""
    text, rows = build(False)
    if not rows:
        return b""
    if not _clean(text, rows, columns):
        text, rows = build(True)
    return _encode(text)


def _columns_error(row: Sequence[object], columns: Sequence[str]) -> CopyTextError:
    return CopyTextError(f"a row of {len(row)} values for {len(columns)} columns ({', '.join(columns)})")


def _rows_text(rows: Sequence[Sequence[object]], columns: Sequence[str], full: bool) -> str:
    lines: list[str] = []
    n = len(columns)
    for row in rows:
        if len(row) != n:
            raise _columns_error(row, columns)
        lines.append("\t".join([field(v, full, columns[i]) for i, v in enumerate(row)]))
    lines.append("")
    return "\n".join(lines)


def rows_data(rows: Sequence[Sequence[object]], columns: Sequence[str]) -> bytes:
    """Any rows (None, bool, int, float and str values) for a COPY of `columns`."""
    return _data(lambda full: (_rows_text(rows, columns, full), len(rows)), len(columns))


def _events_text(records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]], full: bool) -> str:
    lines: list[str] = []
    last_at, at_text = 0.0, "0.0"
    for i, r in enumerate(records):
        payload, metadata = texts[i]
        at = r.recorded_at
        if at != last_at or at == 0.0 or not lines:  # a batch shares one time (0.0 and -0.0 print apart)
            last_at, at_text = at, repr(at)
        mid = r.message_id
        lines.append("\t".join([
            str(r.position), _str(r.stream_id, full, "stream_id"), str(r.version), _str(r.type, full, "type"),
            str(r.schema_version), _str(payload, full, "payload"), _str(metadata, full, "metadata"),
            NULL if mid is None else _str(mid, full, "message_id"), at_text, _str(r.prev_hash, full, "prev_hash"),
            _str(r.hash, full, "hash")]))
    lines.append("")
    return "\n".join(lines)


def events_data(records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]]) -> bytes:
    """The `events` rows of `records` (EVENT_COLUMNS order) with their payload and metadata canonical texts:
    what psycopg writes for the tuples `EventRecorder.insert_recorded` wrote before (tests/property)."""
    if len(records) != len(texts):
        raise CopyTextError(f"{len(records)} events but {len(texts)} payload and metadata texts")
    return _data(lambda full: (_events_text(records, texts, full), len(records)), len(EVENT_COLUMNS))


def _processed_text(items: Sequence[tuple[str, int | None]], full: bool) -> str:
    lines: list[str] = []
    for mid, position in items:
        lines.append(_str(mid, full, "message_id") + "\t" + (NULL if position is None else str(position)))
    lines.append("")
    return "\n".join(lines)


def processed_data(items: Sequence[tuple[str, int | None]]) -> bytes:
    """The `processed_messages` rows (message id, first position or None)."""
    return _data(lambda full: (_processed_text(items, full), len(items)), len(PROCESSED_COLUMNS))


def _json_ints(values: Sequence[object]) -> str | None:
    """`[1,2]` for ints (None for anything else)."""
    parts: list[str] = []
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        parts.append(str(v))
    return "[" + ",".join(parts) + "]"


def command_json(command: Sequence[object]) -> str:
    """A job's command as `insert_rows` writes the `command` column: the json module's compact text
    (ensure_ascii=False), its strings written by the very function the module uses."""
    parts: list[str] = []
    for s in command:
        if not isinstance(s, str):
            return _json_fallback(list(command))
        parts.append(encode_basestring(s))
    return "[" + ",".join(parts) + "]"


def assignments_json(assignments: Sequence[tuple[object, Sequence[object]]]) -> str:
    """A job's assignments as `insert_rows` writes the `assignments` column: the json module's compact
    text of `{node: [gpu, ...]}` (a repeated node keeps its first place and its last GPUs, as a dict does)."""
    if not assignments:
        return "{}"
    by_node: dict[object, Sequence[object]] = {}
    for node, gpus in assignments:
        by_node[node] = gpus
    parts: list[str] = []
    for name, values in by_node.items():
        ints = _json_ints(values)
        if not isinstance(name, str) or ints is None:
            return _json_fallback({n: list(g) for n, g in assignments})
        parts.append(encode_basestring(name) + ":" + ints)
    return "{" + ",".join(parts) + "}"


def _json_fallback(value: object) -> str:
    """Anything unusual (not the record's declared types) through the json module itself."""
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _opt_float(x: float | None) -> str:
    return NULL if x is None else repr(x)


def floats_json(values: Sequence[float] | None) -> str:
    """A job's session warnings as `insert_rows` writes the JSON `session_warnings_at` column: SQL NULL for
    None, else the json module's compact text of the list (a finite float is its `repr`, as there)."""
    if values is None:
        return NULL
    parts: list[str] = []
    for v in values:
        if not isinstance(v, float) or not math.isfinite(v):
            return _json_fallback(list(values))
        parts.append(repr(v))
    return "[" + ",".join(parts) + "]"


def _jobs_text(jobs: Sequence[tuple[str, Job | None, int]], full: bool) -> tuple[str, int]:
    lines: list[str] = []
    for _, job, position in jobs:
        if job is None:
            continue
        exit_code = job.exit_code
        lines.append("\t".join([
            _str(job.job_id, full, "job_id"), _str(job.project, full, "project"), _str(job.state, full, "state"),
            str(job.gpus), repr(job.min_runtime_s), str(int(job.resumable)), _str(job.job_class, full, "job_class"),
            str(job.priority), _str(command_json(job.command), full, "command"), repr(job.submitted_at),
            str(job.attempt), _str(assignments_json(job.assignments), full, "assignments"), str(int(job.funded)),
            _opt_float(job.started_at), _opt_float(job.ended_at), NULL if exit_code is None else str(exit_code),
            str(position), _opt_float(job.protected_until), _opt_float(job.session_cap_at),
            floats_json(job.session_warnings_at),
            NULL if job.session_address is None else _str(job.session_address, full, "session_address")]))
    rows = len(lines)
    lines.append("")
    return "\n".join(lines), rows


def jobs_data(jobs: Sequence[tuple[str, Job | None, int]]) -> bytes:
    """The `proj_jobs` rows (JOB_COLUMNS order) of the present jobs among `jobs` ((key, job or None when
    gone, position), as `ChangedRows.jobs` holds them): what psycopg writes for `job_copy_row`'s tuples."""
    return _data(lambda full: _jobs_text(jobs, full), len(JOB_COLUMNS))
