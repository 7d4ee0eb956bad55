"""The read model in memory (steward.api.live) is the store's answer: folding the log in order, in any
split into catch-ups, gives the same rows, counts, deferrals and jobs pages as the projections the
ledger wrote to the store and the queries the API made on them before (issue 22)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from steward.api.live import LiveModel
from steward.api.readmodel import ReadModel, stored_deferrals, stored_job, stored_jobs_page
from steward.audit.snapshots import events_for_fold
from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    CancelJob,
    Command,
    ExplainWaiting,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    SubmitJob,
)
from steward.ledger.ledger import Ledger
from steward.store import schema
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from steward.store.projector import fold_events

PROJECTS = ("a1", "a2", "b1")
TREE = [SetAllocations("cluster", {"a": 0.5, "b": 0.5}, "setup"), SetAllocations("a", {"a1": 0.5, "a2": 0.5}, "setup"),
        SetAllocations("b", {"b1": 1.0}, "setup"), RegisterNode("n1", 8, "h100", ["z", "n1"]),
        RegisterNode("n2", 8, "h100", ["z", "n2"])]


def _store(tmp: Path) -> EventStore:
    url = f"sqlite:///{tmp / 'live.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def _record(store: EventStore, commands: list[Command]) -> None:
    Ledger(store, consumer_name="test").process(
        [("test", command_envelope(c, actor="t", role="admin").encode()) for c in commands], {})


# One step of the workload: an action on job k (refused ones are refused by the ledger, as in life).
step = st.tuples(st.sampled_from(["submit", "place", "start", "exit", "cancel", "explain"]),
                 st.integers(0, 7), st.sampled_from(PROJECTS), st.integers(1, 4))


def _command(action: str, k: int, project: str, gpus: int) -> Command:
    job = f"j{k}"
    if action == "submit":
        return SubmitJob(job, project, gpus, 60, ["true"], priority=k % 3)
    if action == "place":
        return PlaceJob(job, {f"n{1 + k % 2}": list(range(gpus))}, True, {"policy": "test"})
    if action == "start":
        return ReportJobStarted(job, 1, 100 + k)
    if action == "exit":
        return ReportJobExited(job, 1, k % 2)
    if action == "cancel":
        return CancelJob(job, "test")
    return ExplainWaiting({job: {"reason": f"reason-{gpus}", "blocking": gpus}})


def _store_answer(store: EventStore) -> dict[str, Any]:
    """What the API read from the store before the read model was in memory."""
    jobs = schema.proj_jobs
    with store.engine.connect() as conn:
        allocations = [dict(r._mapping) for r in conn.execute(
            select(schema.proj_allocations).order_by(schema.proj_allocations.c.name))]
        nodes = [dict(r._mapping) for r in conn.execute(
            select(schema.proj_nodes).order_by(schema.proj_nodes.c.node_id))]
        active = {r.job_id: dict(r._mapping) for r in conn.execute(
            select(schema.proj_jobs).where(schema.proj_jobs.c.state.in_(("QUEUED", "PREEMPTED", "PLACED", "RUNNING"))))}
        counts = {r[0]: int(r[1]) for r in conn.execute(
            select(schema.proj_jobs.c.state, func.count()).group_by(schema.proj_jobs.c.state))}
        every = [dict(r._mapping) for r in conn.execute(
            select(jobs).order_by(jobs.c.submitted_at.desc(), jobs.c.job_id.desc()))]
        deferred: dict[str, tuple[int, dict[str, Any]]] = {}
        for row in conn.execute(select(schema.events.c.stream_id, schema.events.c.position, schema.events.c.payload)
                                .where(schema.events.c.type == "JobDeferred").order_by(schema.events.c.position)):
            deferred[str(row.stream_id).removeprefix("job-")] = (int(row.position), row.payload["explanation"])
    return {"allocations": allocations, "nodes": nodes, "active": active, "counts": counts, "every": every,
            "deferred": {j: d for j, d in deferred.items() if j in active}}


def _live(store: EventStore, keep: int | None, start: Any = None,
          deferred: Callable[[list[str], int], dict[str, tuple[int, dict[str, Any]]]] | None = None) -> LiveModel:
    return LiveModel(lambda after: events_for_fold(store, after), start=start, deferred=deferred, keep_ended=keep,
                     stored_job=lambda job_id: stored_job(store, job_id),
                     stored_page=lambda **page: stored_jobs_page(store, **page))


def _fold_answer(live: LiveModel) -> dict[str, Any]:
    p = live.published
    every = live.jobs_page(projects=None, states=None, project=None, job_class=None, submitted_after=None,
                           submitted_before=None, after=None, limit=10_000)
    return {"allocations": p.allocations, "nodes": p.nodes, "active": {r["job_id"]: r for r in p.active_jobs},
            "counts": p.counts, "every": every, "deferred": p.deferrals}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(step, min_size=1, max_size=8), min_size=1, max_size=6),
       fold_after=st.lists(st.booleans(), min_size=6, max_size=6), restart_at=st.integers(0, 6),
       keep=st.sampled_from([None, 0, 2]))
def test_folding_the_log_in_order_is_the_store_s_answer(tmp_path_factory: pytest.TempPathFactory,
                                                         batches: list[list[tuple[str, int, str, int]]],
                                                         fold_after: list[bool], restart_at: int,
                                                         keep: int | None) -> None:
    """Also with a retention (ADR 0070): the ended jobs that left memory answer from the store's projections."""
    store = _store(tmp_path_factory.mktemp("live"))
    _record(store, TREE)
    live = _live(store, keep)
    for i, batch in enumerate(batches):
        if i == restart_at:  # a process starting from a stored state (as from a snapshot) then following the log
            stored = fold_events((p, e, at) for p, e, at, _ in events_for_fold(store, 0))
            live = _live(store, keep, start=stored,
                         deferred=lambda job_ids, upto: stored_deferrals(store, job_ids, upto))
        _record(store, [_command(*s) for s in batch])
        if fold_after[i]:  # caught up at some batches only: catch-ups of any size give the same answer
            live.catch_up()
    live.catch_up()
    assert live.position == store.head()
    assert _fold_answer(live) == _store_answer(store)


PAGE_CASES: dict[str, dict[str, Any]] = {
    "everything": {},
    "one state": {"states": ["QUEUED"]},
    "two states": {"states": ["RUNNING", "COMPLETED"]},
    "visible projects": {"projects": frozenset({"a1", "b1"})},
    "one project": {"project": "a2"},
    "class": {"job_class": "batch"},
    "submitted window": {"submitted_after": 0.0, "submitted_before": 1e12},
}


@pytest.mark.parametrize("name", list(PAGE_CASES))
def test_jobs_pages_are_the_store_s_pages(tmp_path: Path, name: str) -> None:
    store = _store(tmp_path)
    _record(store, TREE)
    _record(store, [SubmitJob(f"j{k}", PROJECTS[k % 3], 1 + k % 4, 60, ["true"]) for k in range(12)])
    _record(store, [PlaceJob("j0", {"n1": [0]}, True, {}), PlaceJob("j3", {"n2": [0, 1, 2, 3]}, True, {})])
    _record(store, [ReportJobStarted("j0", 1, 5), ReportJobStarted("j3", 1, 6), CancelJob("j5", "x")])
    _record(store, [ReportJobExited("j0", 1, 0)])
    live = LiveModel(lambda after: events_for_fold(store, after))
    live.catch_up()
    f = PAGE_CASES[name]
    page: Callable[..., list[dict[str, Any]]] = live.jobs_page
    args = {"projects": None, "states": None, "project": None, "job_class": None, "submitted_after": None,
            "submitted_before": None} | f
    expected = [r for r in _store_answer(store)["every"]
                if (args["projects"] is None or r["project"] in args["projects"])
                and (not args["states"] or r["state"] in args["states"])
                and (not args["project"] or r["project"] == args["project"])
                and (not args["job_class"] or r["job_class"] == args["job_class"])]
    assert expected, "the case selects some jobs"
    first = page(**args, after=None, limit=5)
    rest = page(**args, after=(first[-1]["submitted_at"], first[-1]["job_id"]), limit=100)
    assert first + rest == expected


def test_a_mutation_s_position_is_read_at_once(tmp_path: Path) -> None:
    """Read-your-writes: `reach` catches up when the feeder has not, and nothing older is served after."""
    store = _store(tmp_path)
    _record(store, TREE)
    read = ReadModel(store, head_ttl_s=3600)  # a feeder that never comes
    assert read.view().head == store.head()
    _record(store, [SubmitJob("mine", "a1", 1, 60, ["true"])])
    assert "mine" not in {j["job_id"] for j in read.view().active_jobs}  # stale within the TTL, as allowed
    assert read.reach(store.head())
    assert "mine" in {j["job_id"] for j in read.view().active_jobs}
    assert read.job("mine") is not None and read.job_counts() == {"QUEUED": 1}
