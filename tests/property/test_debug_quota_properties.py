"""Invariants of the debug quota (ADR 0029): qualification is monotone, and the whole-queue form
agrees with the one-job rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.debug_quota import is_debug_work, qualify, qualify_all
from steward.policy.model import PendingJob, RunningJob

S = PolicySettings.steward()
EXAMPLES = settings(deadline=None)
PROJECTS = ("a", "b")


def _pending(draw: Callable[[st.SearchStrategy[Any]], Any], id: str, at: float) -> PendingJob:
    return PendingJob(
        id=id, project=draw(st.sampled_from(PROJECTS)), gpus=draw(st.sampled_from([1, 1, 2, 4])), submitted_at=at,
        min_runtime_s=draw(st.sampled_from([0.0, 600.0, 600.0, 3600.0])),
        klass=draw(st.sampled_from(["debug", "debug", "interactive", "batch"])),
    )


def _start(job: PendingJob) -> RunningJob:
    return RunningJob(job.id, job.project, job.gpus, (("n0", job.gpus),), 1e6, 1e6 + 600.0, True,
                      klass=job.klass, submitted_at=job.submitted_at, min_runtime_s=job.min_runtime_s)


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[RunningJob], list[PendingJob]]:
    """Debug and batch work of two projects, some running (a few leaving), some waiting; submit
    times drawn from a small set so that ties (ordered by id) happen."""
    jobs = [_pending(draw, f"j{i:02d}", float(draw(st.integers(0, 20)))) for i in range(draw(st.integers(0, 14)))]
    running: list[RunningJob] = []
    waiting: list[PendingJob] = []
    for job in jobs:
        if draw(st.booleans()):
            r = _start(job)
            running.append(replace(r, preemption_requested_at=1e6) if draw(st.integers(0, 4)) == 0 else r)
        else:
            waiting.append(job)
    return running, waiting


@EXAMPLES
@given(queues(), st.integers(0, 8))
def test_the_whole_queue_form_is_the_one_job_rule(queue: tuple[list[RunningJob], list[PendingJob]], quota: int) -> None:
    running, waiting = queue
    quotas = {"a": quota, "b": max(0, quota - 2)}
    every = qualify_all(quotas, running, waiting, S)
    for job in waiting:
        if is_debug_work(job.klass, job.min_runtime_s, job.gpus, S):
            assert every[job.id] == qualify(job, quotas[job.project], running, waiting, S)
        else:
            assert job.id not in every


@EXAMPLES
@given(queues(), st.integers(0, 8), st.data())
def test_a_job_qualified_at_submit_stays_qualified_while_nothing_is_added_ahead_of_it(
    queue: tuple[list[RunningJob], list[PendingJob]], quota: int, data: st.DataObject,
) -> None:
    """ADR 0029: a job qualified at submit (the last submitted) stays qualified through any events
    that add nothing ahead of it: work ahead starts, finishes or is preempted (leaving); later work
    is submitted, and starts."""
    running, waiting = queue
    job = PendingJob("new", "a", data.draw(st.sampled_from([1, 2])), 21.0, 600.0, klass="debug")
    q = qualify(job, quota, running, waiting, S)
    if not q.qualified:
        return
    later = 0
    for _ in range(data.draw(st.integers(1, 12))):
        event = data.draw(st.sampled_from(["start", "finish", "preempt", "submit_later", "start_later"]))
        if event == "start" and waiting:
            started = waiting.pop(data.draw(st.integers(0, len(waiting) - 1)))
            running.append(_start(started))
        elif event == "finish" and running:
            running.pop(data.draw(st.integers(0, len(running) - 1)))
        elif event == "preempt" and running:
            i = data.draw(st.integers(0, len(running) - 1))
            running[i] = replace(running[i], preemption_requested_at=1e6)
        elif event in ("submit_later", "start_later"):
            later += 1
            behind = replace(_pending(data.draw, f"later{later}", 30.0 + later), project="a")
            if event == "start_later":
                running.append(_start(behind))
            else:
                waiting.append(behind)
        now = qualify(job, quota, running, waiting, S)
        assert now.qualified, (event, now)
        assert now.in_use_gpus + now.ahead_gpus <= q.in_use_gpus + q.ahead_gpus
