"""The auditor guide's commands as it writes them, on an SQLite log (issue 19: `audit verify --independent`
and `audit prove --first 1000` failed): `verify --independent`, a consistency proof from a checkpoint to the
newest one with `--first` alone, and a size that is no checkpoint's named with the nearest ones, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steward.audit.checkpoints import checkpoint_rows, load_or_create_key, make_checkpoint
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.unit.store.contract import run_history


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    key = tmp_path / "keys" / "cp.pem"
    run_history(store, jobs=12)
    assert store.head() > 40
    make_checkpoint(store, load_or_create_key(key), upto=20)
    make_checkpoint(store, load_or_create_key(key), upto=37)
    make_checkpoint(store, load_or_create_key(key))
    return os.environ | {"STEWARD_STORE_URL": url, "STEWARD_CHECKPOINT_KEY": str(key)}


def audit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "audit", *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_verify_independent(env: dict[str, str]) -> None:
    proc = audit(env, "verify", "--independent", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["engine"] == "python" and report["checkpoints_checked"] == 3
    refused = audit(env, "verify", "--independent", "--api")
    assert refused.returncode == 2 and "--independent reads the store; without --api" in refused.stderr


def test_prove_first_alone_proves_up_to_the_newest_checkpoint(env: dict[str, str]) -> None:
    store = EventStore.from_url(env["STEWARD_STORE_URL"])
    newest = checkpoint_rows(store)[-1]["tree_size"]
    proc = audit(env, "prove", "--first", "20")
    assert proc.returncode == 0, proc.stderr
    proof = json.loads(proc.stdout)
    assert (proof["kind"], proof["first"]["tree_size"], proof["second"]["tree_size"]) == ("consistency", 20, newest)
    path = Path(env["STEWARD_CHECKPOINT_KEY"]).parent / "proof.json"
    path.write_text(proc.stdout)
    checked = audit(env, "check-proof", str(path), "-o", "json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout


def test_a_size_that_is_no_checkpoint_is_named_with_the_nearest(env: dict[str, str]) -> None:
    proc = audit(env, "prove", "--first", "30")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("no checkpoint of size 30; the nearest are of size 20 and 37 (3 checkpoints, "
                                        "sizes 20 to " + str(EventStore.from_url(env["STEWARD_STORE_URL"]).head())
                                        + ")"), proc.stderr
    backwards = audit(env, "prove", "--first", "37", "--second", "20")
    assert backwards.returncode == 2 and "smaller than --first" in backwards.stderr


def test_a_usage_error_is_one_line_of_usage_not_an_internal_error(env: dict[str, str]) -> None:
    proc = audit(env, "prove", "--first")
    assert proc.returncode == 2 and "Option '--first' requires an argument" in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr


def test_time_travel_takes_a_position_or_a_date(env: dict[str, str]) -> None:
    by_position = audit(env, "state", "--position", "10", "--json")
    assert by_position.returncode == 0, by_position.stderr
    state = json.loads(by_position.stdout)
    assert state["position"] == 10 and state["recorded_at"] is not None
    by_date = audit(env, "state", "--at", "1970-01-01T00:20:00", "--json")  # the history starts at 1,000 s
    assert by_date.returncode == 0 and json.loads(by_date.stdout)["position"] > 0, by_date.stderr
    table = audit(env, "state", "--position", "10")
    assert table.returncode == 0 and "recorded at" in table.stdout and "1970-01-01T00:" in table.stdout, table.stdout
    for args, why in ((("--position", "10", "--at", "5"), "give --at TIME or --position N"), ((), "give --at"),
                      (("--position", "99999"), "past the log's head")):
        refused = audit(env, "state", *args)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr
