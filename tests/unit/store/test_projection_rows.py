"""The ledger's direct COPY tuple for a job row equals what `insert_rows` writes for `job_row` (so live
and rebuilt projection tables keep equal text and equal server-side checksums)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from steward.domain.state import Job
from steward.store import schema
from steward.store.projections import JOB_COLUMNS, job_copy_row, job_row

_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_JSON_COLUMNS = {c.name for c in schema.proj_jobs.columns if c.type.__class__.__name__ == "JSON"}

maybe_float = st.none() | st.floats(allow_nan=False)
jobs = st.builds(
    Job, job_id=st.text(min_size=1), project=st.text(), gpus=st.integers(0, 64), min_runtime_s=st.floats(0, 1e5),
    command=st.lists(st.text(), max_size=4).map(tuple), resumable=st.booleans(),
    job_class=st.sampled_from(["batch", "interactive", "debug"]), priority=st.integers(-5, 5),
    submitted_at=st.floats(0, 2e9), state=st.sampled_from(["QUEUED", "RUNNING", "COMPLETED"]),
    attempt=st.integers(0, 9),
    assignments=st.lists(st.tuples(st.text(min_size=1), st.lists(st.integers(0, 7), max_size=4).map(tuple)),
                         max_size=3).map(tuple),
    funded=st.booleans(), started_at=maybe_float, ended_at=maybe_float, exit_code=st.none() | st.integers(-9, 255),
)


@given(jobs, st.integers(1, 10**9))
def test_job_copy_row_is_the_row_insert_rows_writes(job: Job, position: int) -> None:
    row = job_row(job, position)
    expected = tuple(_DUMPS(row[c]) if c in _JSON_COLUMNS else row[c] for c in JOB_COLUMNS)
    assert tuple(row) == JOB_COLUMNS
    assert job_copy_row(job, position) == expected
