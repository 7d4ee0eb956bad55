"""Logs written by an earlier release replay with today's code (issue 19: "logs written by the previous
release"). `logs/demo-before-input.ndjson.gz` is the live log of the demo (`python -m steward.demo --hours 5
--speed 120`, the real stack, two and a half minutes of the Philly slice, then its teardown) recorded by the
ledger of release 0.1.0 before it stored the input of decisions whose events do not give their command
back: `steward audit replay` of that release called 45 of its 1,155 decisions unreplayable
("ExplainWaiting: missing field 'explanations'", "field 'checkpoint_path' must be str, got None").
Today's replay reads every one of them back from its events and reproduces all 1,155."""

from __future__ import annotations

import gzip
import re
import subprocess
from collections import Counter
from pathlib import Path

from steward.audit.replay import records_from_export, replay_records

LOGS = Path(__file__).resolve().parent / "logs"
DEMO = LOGS / "demo-before-input.ndjson.gz"
REPO = Path(__file__).resolve().parents[2]


def test_the_previous_releases_demo_log_replays_every_decision() -> None:
    records = records_from_export(DEMO)
    # what made it unreplayable: accepted decisions without their input, whose events alone must give
    # the command back (one JobDeferred per job for ExplainWaiting, a None checkpoint of a preemption)
    without_input = Counter(r.metadata["command"] for r in records
                            if r.message_id and "input" not in r.metadata and r.type != "CommandRejected")
    assert without_input["ExplainWaiting"] > 300 and without_input["ReportJobPreempted"] > 50
    assert any(r.type == "JobPreempted" and r.payload["checkpoint_path"] is None and "input" not in r.metadata
               for r in records)

    report = replay_records(records)
    assert (report["events"], report["decisions"]) == (1544, 1155)
    assert report["reproduced"] == 1155 and report["ok"], report


def test_the_cli_replays_an_export_without_the_store(tmp_path: Path) -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(DEMO)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^reproduced +1155$", proc.stdout, re.M), proc.stdout
    cut = tmp_path / "cut.ndjson"
    lines = gzip.decompress(DEMO.read_bytes()).decode().splitlines()
    cut.write_text("\n".join([lines[0], *lines[10:20]]) + "\n")
    refused = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(cut)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "starts at position 10" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
