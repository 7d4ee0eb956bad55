"""The API's `stateAt` answers from `StateAt` (the snapshot chain's counts, the first `jobsFirst` jobs
only): the same answer as the reference fold from the start of the log, at
positions with tails of every kind after snapshots (bases and deltas), on a real SQLite store with snapshots in row
blocks of 4 jobs (so the first jobs span blocks and tails change jobs in several)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.audit.snapshots import state_at_position, take_snapshots
from steward.domain.state import JOB_STATES, Job, LedgerState
from steward.store import snapshotparts
from tests.unit.api.harness import Server, serve
from tests.unit.store.contract import fold_upto, run_history

QUERY = """query($p: BigInt!, $n: Int!) { stateAt(position: $p, jobsFirst: $n) { position recordedAt
  allocations { name parent share } nodes { id gpus gpuModel path state } jobCounts { state count }
  jobs { id project state gpus attempt } jobsTruncated } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshotparts, "SNAPSHOT_BLOCK", 4)
        mp.setattr(snapshotparts, "FIRST_ROWS", 8)
        with serve(Path(tmp_path_factory.mktemp("stateat")), seeded=False) as s:
            run_history(s.store, jobs=25, batch=5, start=1_000.0)
            assert take_snapshots(s.store, every=11, base_every=33) >= 3
            yield s


def expected(state: LedgerState, position: int, recorded_at: float | None, n: int) -> dict[str, Any]:
    """The answer as the resolver gave it before `StateAt`: every job folded, sorted, the first n."""
    counts: dict[str, int] = {}
    for j in state.jobs.values():
        counts[j.state] = counts.get(j.state, 0) + 1
    jobs = sorted(state.jobs.values(), key=lambda j: (j.submitted_at, j.job_id))
    return {
        "position": position, "recordedAt": recorded_at,
        "allocations": [{"name": a.name, "parent": a.parent, "share": a.share}
                        for a in sorted(state.allocations.values(), key=lambda a: a.name)],
        "nodes": [{"id": x.node_id, "gpus": x.gpus, "gpuModel": x.gpu_model, "path": list(x.path), "state": x.state}
                  for x in sorted(state.nodes.values(), key=lambda x: x.node_id)],
        "jobCounts": [{"state": s, "count": counts[s]} for s in JOB_STATES if s in counts],
        "jobs": [{"id": j.job_id, "project": j.project, "state": j.state, "gpus": j.gpus, "attempt": j.attempt}
                 for j in jobs[:n]],
        "jobsTruncated": len(jobs) > n,
    }


def test_state_at_equals_the_reference_fold_at_many_positions(server: Server) -> None:
    records = list(server.store.read())
    head = records[-1].position
    assert head > 60
    positions = [0, *range(1, head + 1, 5), head - 1, head]
    checked_pages = 0
    for i, position in enumerate(positions):
        n = (1, 3, 7, 200)[i % 4]
        body = server.gql(QUERY, {"p": position, "n": n}, server.tokens["auditor"])
        assert not body.get("errors"), body
        at = next((r.recorded_at for r in reversed(records) if r.position <= position), None)
        want = expected(fold_upto(server.store, position), position, at if position else None, n)
        assert body["data"]["stateAt"] == want, position
        checked_pages += bool(want["jobsTruncated"])
    assert checked_pages > 5  # pages shorter than the jobs, not only whole lists


def test_first_jobs_orders_snapshot_rows_and_tail_jobs_together(server: Server) -> None:
    """`StateAt.first_jobs` against the reference fold directly, for every page size up to all jobs."""
    head = server.store.head()
    for position in (head // 3, head // 2 + 1, head):
        reference = sorted(fold_upto(server.store, position).jobs.values(), key=lambda j: (j.submitted_at, j.job_id))
        st = state_at_position(server.store, position)
        for n in (0, 1, 2, 5, len(reference) - 1, len(reference), len(reference) + 3):
            got: list[Job] = st.first_jobs(n)
            assert got == reference[:max(n, 0)], (position, n)
