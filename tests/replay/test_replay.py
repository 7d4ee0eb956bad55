"""Replay the histories checked into tests/replay/histories/ with today's workflow code: a change that
breaks determinism (a running workflow could not resume after a deploy) fails here, not in production."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from steward_workflows.job_run import JobRunWorkflow
from steward_workflows.payloads import JobRunInput, JobRunResult
from steward_workflows.worker import WORKFLOWS

HISTORIES = sorted((Path(__file__).resolve().parent / "histories").glob("*.json"))

pytestmark = pytest.mark.timeout(120)


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_there_are_histories_of_every_workflow() -> None:
    names = {p.stem for p in HISTORIES}
    assert {"job_run_preempted", "job_run_session_cap", "session_cap_with_idle", "node_drain",
            "period_close"} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_history_replays_with_todays_code(path: Path) -> None:
    result = asyncio.run(Replayer(workflows=WORKFLOWS).replay_workflow(load(path)))
    assert result.replay_failure is None


def test_the_histories_of_both_start_paths_are_kept() -> None:
    """ADR 0069 changed how a start waits under `workflow.patched`: the histories recorded before it (a start
    with a schedule-to-start loss) and after it (the patch marker, then looks at the executor) both replay."""
    from temporalio.api.enums.v1 import EventType

    from steward_workflows.job_run import START_WAITS_FOR_A_SILENT_EXECUTOR

    def patches(stem: str) -> list[str]:
        history = load(next(p for p in HISTORIES if p.stem == stem))
        return [p.data.decode() for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
                for p in e.marker_recorded_event_attributes.details["patch-data"].payloads]

    def activities(stem: str) -> list[str]:
        history = load(next(p for p in HISTORIES if p.stem == stem))
        return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]

    assert patches("job_run_lost") == [] and patches("job_run_exited") == []
    for stem in ("job_run_start_waited", "job_run_start_lost_silent"):
        (patch,) = patches(stem)
        assert START_WAITS_FOR_A_SILENT_EXECUTOR in patch
        assert activities(stem)[:2] == ["start_job", "executor_liveness"]


@workflow.defn(name="JobRun")
class ReorderedJobRun:
    """A "harmless" refactor: sleep through the protection before watching the process."""

    @workflow.run
    async def run(self, job: JobRunInput) -> JobRunResult:
        await workflow.sleep(job.protection_s)
        return JobRunResult(job.job_id, job.attempt, "exited", 0)


def test_a_determinism_breaking_change_fails_replay() -> None:
    history = load(next(p for p in HISTORIES if p.stem == "job_run_preempted"))
    replayer = Replayer(workflows=[ReorderedJobRun], workflow_runner=UnsandboxedWorkflowRunner())
    with pytest.raises(NondeterminismError):
        asyncio.run(replayer.replay_workflow(history))


def test_dropping_the_protection_timer_from_the_real_workflow_fails_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Today's JobRun, edited: protection as a flag instead of a durable timer."""

    async def no_timer(self: JobRunWorkflow) -> None:
        self._protection_over = True

    monkeypatch.setattr(JobRunWorkflow, "_protection_timer", no_timer)
    history = load(next(p for p in HISTORIES if p.stem == "job_run_preempted"))
    replayer = Replayer(workflows=[JobRunWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    with pytest.raises(NondeterminismError):
        asyncio.run(replayer.replay_workflow(history))


def test_the_histories_of_both_ways_of_publishing_are_kept() -> None:
    """ADR 0074 publishes a workflow's commands through a local activity under `workflow.patched`: the histories
    recorded before it (an activity task `publish_command` on the worker's queue) and after it (the patch marker,
    the commands as local-activity markers, no activity task) both replay (`test_history_replays_with_todays_code`)."""
    from temporalio.api.enums.v1 import EventType

    from steward_workflows.publishing import PUBLISH_LOCALLY

    def history(stem: str) -> WorkflowHistory:
        return load(next(p for p in HISTORIES if p.stem == stem))

    def scheduled(stem: str) -> list[str]:
        return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history(stem).events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]

    def markers(stem: str) -> list[str]:
        return [e.marker_recorded_event_attributes.marker_name for e in history(stem).events
                if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]

    for old in ("job_run_exited", "job_run_preempted", "job_run_session_cap", "node_drain", "period_close"):
        assert "publish_command" in scheduled(old), old
        new = f"{old}_publish_local"
        assert "publish_command" not in scheduled(new), new
        assert "core_local_activity" in markers(new), new
        patches = [p.data.decode() for e in history(new).events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
                   and "patch-data" in e.marker_recorded_event_attributes.details
                   for p in e.marker_recorded_event_attributes.details["patch-data"].payloads]
        assert any(PUBLISH_LOCALLY in p for p in patches), new
