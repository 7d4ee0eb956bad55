"""Readable evidence in the CLI (issue 19): times as dates in the viewer's zone, never epoch floats; the
allocation history as rows (share and debug quota before -> after); a preemption's story in lines."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from typing import Any

import pytest

from steward.cli.readable import contract_times, history_rows, local_time, preemption_lines, readable_evidence

PARIS = timezone(timedelta(hours=1), "CET")
T = 1_764_651_600.0  # 2025-12-02 05:00:00 UTC


@pytest.mark.parametrize(("epoch", "tz", "shown"), [
    (T, UTC, "2025-12-02 05:00:00 UTC"),
    (T, PARIS, "2025-12-02 06:00:00 CET"),
    (T + 0.7, PARIS, "2025-12-02 06:00:00 CET"),
    (None, PARIS, "-"),
])
def test_local_time(epoch: float | None, tz: timezone, shown: str) -> None:
    assert local_time(epoch, tz) == shown


@pytest.mark.parametrize(("evidence", "shown"), [
    ({"started_at": T, "gpus": 8}, {"started_at": "2025-12-02 06:00:00 CET", "gpus": 8}),
    ({"victim": {"protected_until": T, "lost_gpu_s": 3600.0}},
     {"victim": {"protected_until": "2025-12-02 06:00:00 CET", "lost_gpu_s": 3600.0}}),
    ({"now": T, "start_without": None, "funded": True}, {"now": "2025-12-02 06:00:00 CET", "start_without": None,
                                                         "funded": True}),
    ({"rooms": [{"ready_at": T}]}, {"rooms": [{"ready_at": "2025-12-02 06:00:00 CET"}]}),
    ({"submitted_at": float("inf")}, {"submitted_at": float("inf")}),
])
def test_readable_evidence_turns_times_into_dates(evidence: dict[str, Any], shown: dict[str, Any]) -> None:
    assert readable_evidence(evidence, PARIS) == shown


@pytest.mark.parametrize(("job", "shown"), [
    ({"id": "s1", "protectedUntil": T, "sessionCapAt": T, "sessionWarningsAt": [T - 1800, T - 300]},
     {"id": "s1", "protectedUntil": "2025-12-02 06:00:00 CET", "sessionCapAt": "2025-12-02 06:00:00 CET",
      "sessionWarningsAt": "2025-12-02 05:30:00 CET, 2025-12-02 05:55:00 CET"}),
    ({"id": "j1", "protectedUntil": T, "sessionCapAt": None, "sessionWarningsAt": None},
     {"id": "j1", "protectedUntil": "2025-12-02 06:00:00 CET", "sessionCapAt": "-", "sessionWarningsAt": "-"}),
    ({"id": "s2", "sessionWarningsAt": []}, {"id": "s2", "sessionWarningsAt": "-"}),
    ({"id": "j2", "submittedAt": T}, {"id": "j2", "submittedAt": T}),  # only the contract times
])
def test_job_show_prints_the_contract_times_as_local_dates(job: dict[str, Any], shown: dict[str, Any]) -> None:
    """`steward job show` / `session show`: the API's Job.protectedUntil, sessionCapAt, sessionWarningsAt."""
    assert contract_times(job, PARIS) == shown


def entry(**kw: Any) -> dict[str, Any]:
    return {"position": 12, "recordedAt": T, "actor": "maria", "reason": "deadline", "parent": "team-a",
            "allocation": "a1", "shareBefore": 0.6, "shareAfter": 0.7, "debugQuotaBefore": None,
            "debugQuotaAfter": None, "debugQuotaSet": False} | kw


@pytest.mark.parametrize(("e", "row"), [
    (entry(), ["2025-12-02 06:00:00 CET", "a1", "team-a", "0.600 -> 0.700", "default", "maria", "deadline", "12"]),
    (entry(shareBefore=None, shareAfter=0.25, actor=""),
     ["2025-12-02 06:00:00 CET", "a1", "team-a", "new -> 0.250", "default", "-", "deadline", "12"]),
    (entry(shareBefore=0.7, debugQuotaAfter=4, debugQuotaSet=True),
     ["2025-12-02 06:00:00 CET", "a1", "team-a", "0.700 -> 0.700", "default -> 4", "maria", "deadline", "12"]),
    (entry(debugQuotaBefore=4, debugQuotaAfter=None, debugQuotaSet=True),
     ["2025-12-02 06:00:00 CET", "a1", "team-a", "0.600 -> 0.700", "4 -> default", "maria", "deadline", "12"]),
    (entry(debugQuotaBefore=2, debugQuotaAfter=2), ["2025-12-02 06:00:00 CET", "a1", "team-a", "0.600 -> 0.700",
                                                    "2", "maria", "deadline", "12"]),
])
def test_history_rows(e: dict[str, Any], row: list[str]) -> None:
    assert history_rows([e], PARIS) == [[*row[:2], "-", *row[2:5], "-", *row[5:]]]


@pytest.mark.parametrize(("e", "name"), [
    (entry(displayNameBefore=None, displayNameAfter="Vision", displayNameSet=True), "(id) -> Vision"),
    (entry(displayNameBefore="Vision", displayNameAfter=None, displayNameSet=True), "Vision -> (id)"),
    (entry(displayNameBefore="Vision", displayNameAfter="Vision Lab", displayNameSet=True), "Vision -> Vision Lab"),
    (entry(displayNameBefore="Vision", displayNameAfter="Vision", displayNameSet=False), "Vision"),
])
def test_history_rows_show_display_names(e: dict[str, Any], name: str) -> None:
    assert history_rows([e], PARIS)[0][2] == name


@pytest.mark.parametrize(("e", "pin"), [
    (entry(pinBefore=None, pinAfter="ceres", pinSet=True), "any -> ceres"),
    (entry(pinBefore="ceres", pinAfter=None, pinSet=True), "ceres -> any"),
    (entry(pinBefore="ceres", pinAfter="ceres", pinSet=False), "ceres"),
    (entry(), "-"),
])
def test_history_rows_show_pins(e: dict[str, Any], pin: str) -> None:
    assert history_rows([e], PARIS)[0][6] == pin


STORY: dict[str, Any] = {"reason": "fair_share", "beneficiary_job_id": "y", "beneficiary_allocation": "a2",
                         "beneficiary_gpus": 8, "gain_gpu_s": 28800.0, "cost_gpu_s": 3600.0, "lost_gpu_s": 3600.0,
                         "requested_by": None, "requested_role": None, "note": None, "requested_at": T,
                         "grace_s": 120.0, "stopped_at": T + 120, "requeued": True}


@pytest.mark.parametrize(("story", "lines"), [
    (STORY, ["gained: job y (allocation a2), 8 GPUs",
             "by how much: 8.00 GPU-h of earlier start against 1.00 GPU-h of work lost here",
             "requested: 2025-12-02 06:00:00 CET", "stopped: 2025-12-02 06:02:00 CET"]),
    (STORY | {"beneficiary_job_id": None, "gain_gpu_s": None, "cost_gpu_s": None, "requested_by": "maria",
              "requested_role": "manager", "note": "room for the review", "stopped_at": None},
     ["work lost: 1.00 GPU-h since the last checkpoint", "asked by: maria (manager)", "note: room for the review",
      "requested: 2025-12-02 06:00:00 CET"]),
    ({"beneficiary_job_id": "y"}, ["gained: job y"]),
])
def test_preemption_lines(story: dict[str, Any], lines: list[str]) -> None:
    assert preemption_lines(story, PARIS) == lines
