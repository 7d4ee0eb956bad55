"""`steward why JOB` for a preempted job, against a real API server (issue 19): who gained, by how much, the
requester's note, and every time as a date in the viewer's zone (TZ), never an epoch float."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.domain.commands import PlaceJob, ReportJobPreempted, ReportJobStarted, RequestPreemption, SubmitJob
from tests.unit.api.harness import Server, serve

SCHEDULER = {"waiting": {"job_id": "a1-wait", "project": "a1", "gpus": 8},
             "churn": {"rule": "preemption_worth_its_cost", "gain_gpu_s": 28800.0, "cost_gpu_s": 3600.0},
             "lost_gpu_s": 3600.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("why"))) as s:
        started = time.time() - 50
        s.record([SubmitJob("v1", "a2", 2, 0, ["sleep", "9"]), PlaceJob("v1", {"n1": [4, 5]}, False, {}),
                  ReportJobStarted("v1", 1, 1, started_at=started),
                  SubmitJob("v2", "a2", 1, 0, ["sleep", "9"]), PlaceJob("v2", {"n1": [6]}, False, {}),
                  ReportJobStarted("v2", 1, 1, started_at=started)], actor="scheduler")
        s.record([RequestPreemption("v1", "fair_share", 1, 30.0, True, "a1-wait", SCHEDULER),
                  ReportJobPreempted("v1", 1, "fair_share", 143)], actor="scheduler")
        s.record([RequestPreemption("v2", "operator", 1, 30.0, True, "",
                                    {"requested_by": "maria", "role": "manager", "note": "room for the review"}),
                  ReportJobPreempted("v2", 1, "operator", 143)], actor="maria")
        yield s


def steward(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_TOKEN": server.tokens["manager"], "STEWARD_API_URL": server.url,
                        "TZ": "Asia/Tokyo", "STEWARD_STORE_URL": "sqlite:////nonexistent/not-used.db"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize(("job", "lines"), [
    ("v1", ["to make room for job a1-wait in allocation a1, 8 GPUs",
            "gained: job a1-wait (allocation a1), 8 GPUs",
            "by how much: 8.00 GPU-h of earlier start against 1.00 GPU-h of work lost here"]),
    ("v2", ['asked by maria (manager): "room for the review"', "asked by: maria (manager)",
            "note: room for the review"]),
])
def test_why_a_preempted_job_says_who_gained_by_how_much_and_the_note(server: Server, job: str,
                                                                     lines: list[str]) -> None:
    out = steward(server, "why", job).stdout
    for line in lines:
        assert line in out, out
    assert re.search(r"requested: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d JST", out), out
    assert re.search(r"stopped: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d JST", out), out
    assert not re.search(r"\b1[789]\d{8}\.\d+", out), out  # no epoch floats anywhere in the words or evidence


def test_why_json_keeps_the_api_answer(server: Server) -> None:
    data = json.loads(steward(server, "why", "v1", "--output", "json").stdout)
    story = data["whyPreempted"]["evidence"]["preemption"]
    assert (story["beneficiary_job_id"], story["gain_gpu_s"], story["cost_gpu_s"]) == ("a1-wait", 28800.0, 3600.0)
    assert isinstance(story["stopped_at"], float)
