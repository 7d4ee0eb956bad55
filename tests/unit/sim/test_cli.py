"""`main(argv)`: exit codes, one-line errors on stderr, JSON keys, outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steward.sim.cli import EXIT_BAD_INPUT, EXIT_OK, main
from tests.unit.sim.builders import job, write_scenario

KEYS = {
    "policy", "scenario", "jobs", "occupancy", "owed_delivered_mean", "owed_delivered_min", "wait_p50_s",
    "wait_p90_s", "preemptions", "lost_gpu_hours_fraction", "protection_violations", "fragmentation_mean",
    "wall_s", "debug_qualified_fraction",
}


def small(tmp_path: Path) -> Path:
    jobs = [job("j1", duration=7200, gpus=4, min_runtime=0),
            job("j2", submit=2000, duration=3600, gpus=4, tenant="b", min_runtime=3600),
            job("j3", submit=10, duration=300, gpus=1, klass="debug", resumable=0)]
    return write_scenario(tmp_path, jobs, nodes=2)


def test_json_has_exactly_the_documented_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", str(small(tmp_path)), "--policy", "steward", "--json"]) == EXIT_OK
    figs = json.loads(capsys.readouterr().out)
    assert set(figs) == KEYS
    assert set(figs["wait_p50_s"]) == set(figs["wait_p90_s"]) == {"debug", "batch", "large", "debug_qualified",
                                                                   "debug_over_quota"}
    assert figs["policy"] == "steward" and figs["jobs"] == 3 and figs["scenario"] == "small"


def test_compare_writes_one_table_and_the_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["--scenario", str(small(tmp_path)), "--compare", "steward,ai2,fair-tree,fifo-priority",
                 "--out", str(out)])
    assert code == EXIT_OK
    assert "fifo-priority" in capsys.readouterr().out
    for name in ("summary.json", "summary.csv", "summary.md", "allocations.csv", "daily.csv",
                 "owed_delivered.png", "occupancy.png", "wait_cdf.png", "diagnostics.json"):
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    assert [f["policy"] for f in summary] == ["steward", "ai2", "fair-tree", "fifo-priority"]


def test_from_events_what_if_applies_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small(tmp_path)
    assert main(["--from-events", str(path), "--policy", "steward", "--json",
                 "--set", "share.a=0.9", "--set", "share.b=0.1", "--set", "window_days=14"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["jobs"] == 3


@pytest.mark.parametrize(("argv", "message"), [
    (["--scenario", "nope.yaml", "--policy", "steward"], "cannot read"),
    (["--scenario", "{small}", "--policy", "lottery"], "unknown policy 'lottery'"),
    (["--scenario", "{small}", "--compare", "steward,ai2"], "--compare needs --out"),
    (["--scenario", "{small}", "--policy", "steward", "--set", "share.zz=1"], "no allocation named 'zz'"),
    (["--scenario", "{small}", "--policy", "steward", "--set", "colour=blue"], "colour: not a scenario key"),
    (["--scenario", "{small}", "--policy", "steward", "--set", "reservations=maybe"], "expected true or false"),
    (["--scenario", "{small}", "--policy", "steward", "--set", "window_days=-1"], "must be >= 0"),
    (["--from-events", "log.ndjson", "--policy", "steward"], "no such file"),
    (["--from-events", "{small}.txt", "--policy", "steward"], "unknown history format"),
    (["--policy", "steward"], "one of the arguments --scenario --from-events is required"),
])
def test_bad_input_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    path = small(tmp_path)
    argv = [a.replace("{small}", str(path)) for a in argv]
    assert main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_ndjson_file_that_is_not_an_audit_export_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "history.ndjson"
    log.write_text('{"type": "JobSubmitted"}\n')
    assert main(["--from-events", str(log), "--policy", "steward"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "steward audit export" in err and "history.ndjson line 1" in err


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "steward.sim", "--scenario", str(small(tmp_path)),
                           "--policy", "ai2", "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["policy"] == "ai2"
