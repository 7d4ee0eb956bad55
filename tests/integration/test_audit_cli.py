"""`steward audit ...` as an auditor runs it, on SQLite and on PostgreSQL: verify, checkpoint, export and
the standalone verifier (copied out of the repository), proofs, replay, rebuild, time travel, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.integration.pg import pg_owner, pg_store, pg_tamper, store_test_urls
from tests.unit.store.contract import Tamper, run_history, sql_tamper

pytestmark = pytest.mark.integration
__all__ = ["pg_owner", "pg_store", "pg_tamper"]

REPO = Path(__file__).resolve().parents[2]
VERIFIER = REPO / "services" / "steward" / "store" / "verifier.py"


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, Tamper, str]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        upgrade(url)
        store = EventStore.from_url(url)
        yield store, sql_tamper(store.engine.connect), url
    else:
        store = request.getfixturevalue("pg_store")
        yield store, request.getfixturevalue("pg_tamper"), store_test_urls()[0]


def audit(url: str, key: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_STORE_URL": url, "STEWARD_CHECKPOINT_KEY": str(key)}
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"steward audit {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def test_the_audit_commands_end_to_end(backend: tuple[EventStore, Tamper, str], tmp_path: Path) -> None:
    store, tamper, url = backend
    key = tmp_path / "keys" / "cp.pem"
    run_history(store, jobs=12, start=1_700_000_000.0)
    head = store.head()
    small = json.loads(audit(url, key, "checkpoint", "-o", "json").stdout)
    assert small["tree_size"] == head
    report = json.loads(audit(url, key, "verify", "--json").stdout)
    assert report["ok"] and report["events"] == head and report["checkpoints_checked"] == 1
    ranged = json.loads(audit(url, key, "verify", "--from", "3", "--to", "9", "--output", "json").stdout)
    assert ranged["ok"] and ranged["events"] == 7
    assert "ok" in audit(url, key, "verify").stdout  # the table

    # export, then verify with the verifier file alone, outside the repository
    (tmp_path / "auditor").mkdir()
    shutil.copy(VERIFIER, tmp_path / "auditor" / "verify.py")
    export = tmp_path / "auditor" / "log.ndjson"
    audit(url, key, "export", "--ndjson", "--out", str(export))
    (tmp_path / "auditor" / "key.pem").write_text(audit(url, key, "key").stdout)
    proof = tmp_path / "auditor" / "proof.json"
    proof.write_text(audit(url, key, "prove", "--position", "7").stdout)
    standalone = subprocess.run(
        [sys.executable, "-I", "verify.py", "log.ndjson", "--public-key", "key.pem", "--proof", "proof.json", "--json"],
        cwd=tmp_path / "auditor", capture_output=True, text=True, timeout=60)
    assert standalone.returncode == 0, standalone.stderr
    result = json.loads(standalone.stdout)
    assert result["ok"] and result["events"] == head and result["proofs"][0]["ok"]
    doc = json.loads(audit(url, key, "export", "--json", "--from", "5", "--to", "8").stdout)
    assert [e["position"] for e in doc["events"]] == [5, 6, 7, 8]
    checked = json.loads(audit(url, key, "check-proof", str(proof), "--public-key",
                               str(tmp_path / "auditor" / "key.pem"), "-o", "json").stdout)
    assert checked["ok"]

    # replay, rebuild, time travel
    replayed = json.loads(audit(url, key, "replay", "--json").stdout)
    assert replayed["ok"] and replayed["reproduced"] == replayed["decisions"] > 40
    saved = json.loads(audit(url, key, "snapshot", "--every", "10", "--base-every", "30", "-o", "json").stdout)
    assert saved["saved"] >= 3
    rebuilt = json.loads(audit(url, key, "rebuild", "--json").stdout)  # nothing checked yet: from the first event
    assert rebuilt["ok"] and all(t["equal"] for t in rebuilt["tables"].values())
    assert rebuilt["mode"] == "full" and rebuilt["snapshot_check"]["recorded"]
    again = json.loads(audit(url, key, "rebuild", "--json").stdout)  # from the snapshot that one checked
    assert again["ok"] and again["mode"] == "snapshot" and again["tail_events"] == 0
    assert json.loads(audit(url, key, "rebuild", "--full", "--json").stdout)["mode"] == "full"
    early = json.loads(audit(url, key, "state", "--at", "2023-11-14T22:13:25Z", "--json").stdout)
    late = json.loads(audit(url, key, "state", "--at", str(1_700_000_000.0 + 10_000), "--json").stdout)
    assert 0 < early["position"] < late["position"] == head
    assert len(early["jobs"]) < len(late["jobs"]) == 12

    # the same history after tampering: non-zero exit, the first bad position named
    tamper("DELETE FROM events WHERE position = 20", None)
    proc = audit(url, key, "verify", "--json", check=False)
    assert proc.returncode == 1 and proc.stderr.strip() == "steward: the log does not verify: missing at position 20"
    bad = json.loads(proc.stdout)
    assert bad["ok"] is False and bad["first_bad_position"] == 20 and bad["problem"] == "missing"


@pytest.mark.parametrize(("args", "message"), [
    (["state", "--at", "yesterday"], "neither epoch seconds nor an ISO 8601 time"),
    (["prove", "--position", "999"], "no checkpoint covers position 999"),
    (["prove"], "give --position N"),
    (["export", "--json", "--ndjson"], "choose one of --json and --ndjson"),
])
def test_errors_are_one_line_on_stderr_with_a_non_zero_exit(tmp_path: Path, args: list[str], message: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    proc = audit(url, tmp_path / "k.pem", *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_unreachable_store_is_one_line(tmp_path: Path) -> None:
    proc = audit("postgresql+psycopg://nobody:x@127.0.0.1:1/none", tmp_path / "k.pem", "verify", check=False)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
