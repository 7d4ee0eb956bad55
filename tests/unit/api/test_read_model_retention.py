"""The read model's retention (ADR 0070): ended jobs beyond `keep_ended` leave memory and are answered from
the store's projections, the same rows as before; the model's size stays bounded while jobs keep ending;
and the API's copy of the scheduler's view drops its ended jobs too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steward.api.live import LiveModel
from steward.api.queue import PolicyQueue, order_now
from steward.api.readmodel import ReadModel, stored_job, stored_jobs_page
from steward.audit.snapshots import events_for_fold
from steward.bench.readmodel import Log, job_batch
from steward.domain.commands import CancelJob, PlaceJob, ReportJobExited, ReportJobStarted, SubmitJob
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import evolve
from steward.scheduler.service import SchedulerState
from steward.store.eventstore import EventStore

from .test_live_model import PROJECTS, TREE, _record, _store, _store_answer


def _live(store: EventStore, keep: int | None) -> LiveModel:
    return LiveModel(lambda after: events_for_fold(store, after), keep_ended=keep,
                     stored_job=lambda job_id: stored_job(store, job_id),
                     stored_page=lambda **page: stored_jobs_page(store, **page))


def _workload(store: EventStore) -> None:
    """12 jobs: 6 ended (in the order j0, j3, j5, j1, j7, j9), 2 running, 4 waiting."""
    _record(store, TREE)
    _record(store, [SubmitJob(f"j{k}", PROJECTS[k % 3], 1, 60, ["true"]) for k in range(12)])
    _record(store, [PlaceJob(f"j{k}", {"n1" if k < 8 else "n2": [k % 8]}, True, {}) for k in (0, 1, 2, 3, 7, 9)])
    _record(store, [ReportJobStarted(f"j{k}", 1, 5) for k in (0, 1, 2, 3, 7, 9)])
    _record(store, [ReportJobExited("j0", 1, 0), ReportJobExited("j3", 1, 1), CancelJob("j5", "x")])
    _record(store, [ReportJobExited("j1", 1, 0), ReportJobExited("j7", 1, 0), ReportJobExited("j9", 1, 0)])


RETENTION_CASES: dict[str, tuple[int | None, set[str]]] = {
    # keep_ended -> the ended jobs still in memory (the newest ended)
    "all kept (no retention)": (None, {"j0", "j3", "j5", "j1", "j7", "j9"}),
    "six kept: none leaves": (6, {"j0", "j3", "j5", "j1", "j7", "j9"}),
    "three kept": (3, {"j1", "j7", "j9"}),
    "one kept": (1, {"j9"}),
    "none kept": (0, set()),
}


@pytest.mark.parametrize("name", list(RETENTION_CASES))
def test_ended_jobs_beyond_the_retention_leave_memory_and_are_read_from_the_store(tmp_path: Path, name: str) -> None:
    keep, in_memory = RETENTION_CASES[name]
    store = _store(tmp_path)
    _workload(store)
    live = _live(store, keep)
    live.catch_up()
    ended = {"j0", "j3", "j5", "j1", "j7", "j9"}
    assert set(live.proj.jobs) == (set(f"j{k}" for k in range(12)) - ended) | in_memory
    assert live.evicted == len(ended - in_memory)
    answer = _store_answer(store)
    every = {r["job_id"]: r for r in answer["every"]}
    # counts stay cluster-wide (an ended job's state never changes again); every job answers, from memory or store
    assert live.published.counts == answer["counts"]
    assert {j: live.job(j) for j in every} == every
    assert live.job("nope") is None


PAGE_CASES: dict[str, dict[str, Any]] = {
    "everything": {},
    "ended states": {"states": ["COMPLETED", "FAILED", "CANCELLED"]},
    "waiting": {"states": ["QUEUED"]},
    "visible projects": {"projects": frozenset({"a1", "b1"})},
    "one project": {"project": "a2"},
    "mine": {"job_ids": frozenset({"j0", "j4", "j9", "j11"})},
    "submitted window": {"submitted_after": 0.0, "submitted_before": 1e12},
}


@pytest.mark.parametrize("keep", [None, 0, 2])
@pytest.mark.parametrize("name", list(PAGE_CASES))
def test_jobs_pages_across_the_horizon_are_the_store_s_pages(tmp_path: Path, name: str, keep: int | None) -> None:
    store = _store(tmp_path)
    _workload(store)
    live = _live(store, keep)
    live.catch_up()
    f = PAGE_CASES[name]
    args: dict[str, Any] = {"projects": None, "states": None, "project": None, "job_class": None,
                            "submitted_after": None, "submitted_before": None, "job_ids": None} | f
    expected = [r for r in _store_answer(store)["every"]
                if (args["projects"] is None or r["project"] in args["projects"])
                and (not args["states"] or r["state"] in args["states"])
                and (not args["project"] or r["project"] == args["project"])
                and (args["job_ids"] is None or r["job_id"] in args["job_ids"])]
    assert expected, "the case selects some jobs"
    pages: list[dict[str, Any]] = []
    after = None
    while True:  # pages of 2, as a client pages through them
        page = live.jobs_page(**args, after=after, limit=2)
        pages += page
        if len(page) < 2:
            break
        after = (page[-1]["submitted_at"], page[-1]["job_id"])
    assert pages == expected


def test_the_model_s_size_stays_bounded_while_jobs_keep_ending() -> None:
    log = Log()
    for k in range(5):  # waiting throughout: never dropped
        log.record(SubmitJob(f"w{k}", "a1", 64, 60, ["true"]))
    live = LiveModel(log.after, keep_ended=20, stored_job=lambda job_id: None, stored_page=lambda **page: [])
    sizes = []
    for first in range(0, 400, 10):
        job_batch(log, first, 10)
        live.catch_up()
        sizes.append(live.size())
    # 400 jobs ended, 20 kept: every per-job table holds at most the kept ones and the waiting ones
    for size in sizes[2:]:
        assert size["jobs"] == size["positions"] == size["order"] == size["known"] == 25
        assert size["ended"] == 20 and size["active_rows"] == 5
    assert live.evicted == 380
    assert sum(live.published.counts.values()) == 405  # the counts still count every job
    assert live.horizon is not None and live.horizon[1] == "j0000379"


def test_a_retention_needs_the_store_s_answers() -> None:
    with pytest.raises(ValueError, match="stored_job and stored_page"):
        LiveModel(lambda after: iter(()), keep_ended=10)
    with pytest.raises(ValueError, match="0 or more"):
        LiveModel(lambda after: iter(()), keep_ended=-1, stored_job=lambda j: None, stored_page=lambda **p: [])


def test_a_read_model_started_from_a_stored_state_keeps_the_newest_ended(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _workload(store)
    full = _live(store, None)
    full.catch_up()
    started = LiveModel(full.read_after, start=full.proj, keep_ended=2,
                        stored_job=lambda job_id: stored_job(store, job_id),
                        stored_page=lambda **page: stored_jobs_page(store, **page))
    assert {"j7", "j9"} <= set(started.proj.jobs) and not {"j0", "j3", "j5"} & set(started.proj.jobs)
    assert started.job("j0") == _store_answer(store)["every"][-1]  # j0: the oldest submitted, from the store


def test_read_your_writes_holds_with_a_retention(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _workload(store)
    read = ReadModel(store, head_ttl_s=3600, keep_ended=0)
    assert read.view().head == store.head()
    _record(store, [ReportJobExited("j2", 1, 0)])
    assert read.reach(store.head())
    row = read.job("j2")  # it ended and left memory at once: the store answers, at the write or newer
    assert row is not None and row["state"] == "COMPLETED" and row["position"] == store.head()
    assert "j2" not in read.live.proj.jobs


WITHOUT_ENDED_CASES: dict[str, tuple[int, int, bool]] = {
    # jobs recorded (all ended), size after the last drop -> dropped now?
    "small table": (10, 0, False),
    "past twice the last size and 64": (80, 0, True),
    "not yet twice the last size": (80, 50, False),
}


@pytest.mark.parametrize("name", list(WITHOUT_ENDED_CASES))
def test_the_policy_view_drops_its_ended_jobs_once_it_doubled(name: str) -> None:
    jobs, last, dropped = WITHOUT_ENDED_CASES[name]
    log = Log()
    log.record(SubmitJob("waiting", "a1", 64, 60, ["true"]))
    job_batch(log, 0, jobs)
    view = SchedulerState(PolicySettings.steward())
    for _, event, at, _ in log.events:
        view.state = evolve(view.state, event, at)
    before = order_now(view, log.now)
    view.kept = last
    size = view.drop_ended()
    assert (len(view.state.jobs) == 1) is dropped
    assert size == (1 if dropped else last)
    after = order_now(view, log.now)
    assert (after.jobs, after.position) == (before.jobs, before.position) == (("waiting",), {"waiting": 1})


def test_the_api_s_policy_queue_holds_no_ended_jobs(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _record(store, TREE)
    for first in range(0, 200, 50):
        _record(store, [SubmitJob(f"j{k}", "a1", 1, 60, ["true"]) for k in range(first, first + 50)])
        _record(store, [CancelJob(f"j{k}", "x") for k in range(first, first + 50)])
    _record(store, [SubmitJob("left", "a1", 1, 60, ["true"])])
    queue = PolicyQueue(store)
    assert queue.order().jobs == ("left",)
    assert len(queue._view.state.jobs) < 100
