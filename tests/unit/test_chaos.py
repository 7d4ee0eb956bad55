"""The chaos benchmark's own arithmetic (gaps in service, the fate of each job), its choice of victims and
its refusal of bad options; the run itself needs the whole stack (tests/integration/test_chaos.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from steward.bench.chaos import Gaps, fates, kill_one, longest_between, main
from steward.infra.processes import Paths

# probe answers (t, ok) -> the longest gap: from the last answer before failures to the first after them
GAP_CASES: list[tuple[str, list[tuple[float, bool]], float]] = [
    ("always up", [(0.0, True), (1.0, True), (2.0, True)], 0.0),
    ("one outage", [(0.0, True), (1.0, False), (2.0, False), (3.0, True)], 3.0),
    ("the longer of two", [(0, True), (1, False), (2, True), (3, False), (4, False), (5, False), (6, True)], 4.0),
    ("still down at the end", [(0.0, True), (1.0, False), (5.0, False)], 10.0),  # closed at t=10
    ("never up: no gap to measure", [(0.0, False), (1.0, False)], 0.0),
]


@pytest.mark.parametrize(("name", "answers", "longest"), GAP_CASES, ids=[c[0] for c in GAP_CASES])
def test_the_longest_gap_runs_from_the_last_answer_to_the_next(name: str, answers: list[tuple[float, bool]],
                                                                longest: float) -> None:
    gaps = Gaps()
    for t, ok in answers:
        gaps.answer("api", ok, float(t))
    gaps.close(10.0)
    assert gaps.longest["api"] == longest


def test_the_longest_time_between_events() -> None:
    assert longest_between([5.0, 1.0, 2.0, 9.5]) == 4.5
    assert longest_between([1.0]) == 0.0


def test_each_accepted_job_ended_runs_or_is_stranded_and_doubles_are_counted() -> None:
    found = {"submitted": {"a": 1, "b": 2, "c": 1, "d": 1},
             "last": {"a": "JobCompleted", "b": "JobCancelled", "c": "JobStarted", "d": "JobRequeued"}}
    assert fates(["a", "b", "c", "d", "e"], found) == {"ended": 2, "still_running": 1, "stranded": 2, "doubled": 1}


def test_victims_are_what_the_supervisor_keeps_and_only_those_running(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    assert kill_one(paths, random.Random(1)) is None  # nothing started: nothing to kill
    paths.pids.mkdir()
    for name in ("ledger", "scheduler"):  # PID files of processes long gone, with their specs
        paths.pid_file(name).write_text("999999999")
        paths.spec_file(name).write_text("{}")
    assert kill_one(paths, random.Random(1)) is None


@pytest.mark.parametrize(("argv", "message"), [(["--minutes", "0"], "--minutes must be positive"),
                                               (["--kill-every-s", "-1"], "--kill-every-s must be positive"),
                                               (["--drain-s", "-1"], "--drain-s must be 0 or more")])
def test_bad_options_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err
