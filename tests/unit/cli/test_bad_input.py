"""Bad input to the commands that run without the stack gets one line naming the problem and exit code 2, never
a traceback, an "internal error" or a silent pass (the project's rule for outside users): a file that is not
UTF-8, a folder that cannot be made, numbers past what the simulator can hold, options out of range, a store
that is not one."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from steward.cli.main import main
from tests.unit.sim.builders import job, write_scenario

Files = Callable[[Path], list[str]]


def steward(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`steward ARGS` through the console entry point: its exit code and its standard error."""
    monkeypatch.setattr(sys, "argv", ["steward", *args])
    with pytest.raises(SystemExit) as done:
        main()
    code = done.value.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().err


def scenario(tmp_path: Path, **doc: object) -> Path:
    path = write_scenario(tmp_path, [job("j1"), job("j2", submit=10, tenant="b")])
    if doc:
        path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **doc}))
    return path


def not_utf8_yaml(tmp_path: Path) -> list[str]:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    return ["sim", "--scenario", str(path), "--policy", "steward"]


def not_utf8_trace(tmp_path: Path) -> list[str]:
    path = scenario(tmp_path)
    trace = path.with_suffix(".csv")
    trace.write_bytes(trace.read_bytes() + "j3,20,60,1,caf\xe9,batch,60,1\n".encode("latin-1"))
    return ["sim", "--scenario", str(path), "--policy", "steward"]


def not_utf8_history(tmp_path: Path) -> list[str]:
    path = tmp_path / "log.ndjson"
    path.write_bytes(b'\xff\xfe\n')
    return ["sim", "--from-events", str(path), "--policy", "steward"]


def not_utf8_cluster(tmp_path: Path) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"cluster: {nodes: 1, gpus_per_node: 4, gpu_model: \xff}\n")
    return ["cluster", "apply", str(path)]


def huge_cluster(tmp_path: Path) -> list[str]:
    path = scenario(tmp_path, cluster={"nodes": 10**12, "gpus_per_node": 8})
    return ["sim", "--scenario", str(path), "--policy", "steward"]


def huge_submit_time(tmp_path: Path) -> list[str]:
    path = scenario(tmp_path)
    trace = path.with_suffix(".csv")
    trace.write_text(trace.read_text() + "j3,1e300,60,1,a,batch,60,1\n")
    return ["sim", "--scenario", str(path), "--policy", "steward"]


def long_trace(tmp_path: Path) -> list[str]:
    path = scenario(tmp_path)
    trace = path.with_suffix(".csv")
    trace.write_text(trace.read_text() + f"j3,{11 * 365 * 86_400},60,1,a,batch,60,1\n")
    return ["sim", "--scenario", str(path), "--policy", "steward"]


def out_is_a_file(tmp_path: Path) -> list[str]:
    (tmp_path / "taken").write_text("")
    return ["sim", "generate", "--family", "short-1gpu", "--out", str(tmp_path / "taken")]


def suite_out_is_a_file(tmp_path: Path) -> list[str]:
    (tmp_path / "taken").write_text("")
    return ["sim", "suite", "--quick", "--no-philly", "--policies", "steward", "--scenarios", "short-1gpu-n4-l1.5",
            "--out", str(tmp_path / "taken")]


def compare_workers(n: int) -> Files:
    def files(tmp_path: Path) -> list[str]:
        return ["sim", "--scenario", str(scenario(tmp_path)), "--compare", "steward,ai2", "--out",
                str(tmp_path / "out"), "--no-plots", "--workers", str(n)]
    return files


def cluster_file(text: str) -> Files:
    def files(tmp_path: Path) -> list[str]:
        (tmp_path / "c.yaml").write_text(text)
        return ["cluster", "apply", str(tmp_path / "c.yaml")]
    return files


def trace_not_a_path(tmp_path: Path) -> list[str]:
    return ["sim", "--scenario", str(scenario(tmp_path, trace=5)), "--policy", "steward"]


def deep(name: str, args: list[str]) -> Files:
    """A file nested 100,000 levels deep (the readers recursed past Python's limit)."""
    def files(tmp_path: Path) -> list[str]:
        (tmp_path / name).write_text("[" * 100_000 + "]" * 100_000 + "\n")
        return [a.format(file=tmp_path / name) for a in args]
    return files


FILE_CASES: list[tuple[str, Files, str]] = [
    ("a scenario nested too deeply", deep("deep.yaml", ["sim", "--scenario", "{file}", "--policy", "steward"]),
     "deep.yaml: nested too deeply to read"),
    ("a tree file nested too deeply", deep("deep.yaml", ["tree", "apply", "{file}"]),
     "deep.yaml: nested too deeply to read"),
    ("an event log nested too deeply", deep("deep.ndjson", ["sim", "--from-events", "{file}", "--policy", "steward"]),
     "deep.ndjson line 1: JSON nested too deeply to read"),
    ("an export nested too deeply", deep("deep.ndjson", ["audit", "replay", "--export", "{file}"]),
     "deep.ndjson: maximum recursion depth exceeded"),
    ("a proof nested too deeply", deep("deep.json", ["audit", "check-proof", "{file}"]),
     "cannot read the proof"),
    ("a misspelt section of a cluster file", cluster_file("cluster: {nodes: 1, gpus_per_node: 4}\nclustre: {}\n"),
     "c.yaml: unknown field 'clustre' (known: cluster, clusters,"),
    ("a list as a GPU model", cluster_file("cluster: {nodes: 1, gpus_per_node: 4, gpu_model: [H100]}\n"),
     "c.yaml: cluster.gpu_model: expected a GPU model name, got ['H100']"),
    ("a mapping as a node's GPU model", cluster_file("cluster: {nodes: [{name: a, gpus: 4, gpu_model: {x: 1}}]}\n"),
     "c.yaml: cluster.nodes[0].gpu_model: expected a GPU model name, got {'x': 1}"),
    ("a number as the trace", trace_not_a_path, "small.yaml: trace: expected the path of the trace CSV, got 5"),
    ("a list as the name", lambda p: ["sim", "--scenario", str(scenario(p, name=[1])), "--policy", "steward"],
     "small.yaml: name: expected text, got [1]"),
    ("scenario YAML not UTF-8", not_utf8_yaml, "latin1.yaml: not UTF-8 text (byte 0xe9 at offset"),
    ("trace CSV not UTF-8", not_utf8_trace, "small.csv line 4: not UTF-8 text (byte 0xe9 at offset"),
    ("event log not UTF-8", not_utf8_history, "log.ndjson line 1: not UTF-8 text (byte 0xff at offset"),
    ("cluster file not UTF-8", not_utf8_cluster, "c.yaml: not UTF-8 text (byte 0xff at offset"),
    ("a trillion nodes", huge_cluster, "cluster.nodes: a cluster has at most 100,000 nodes"),
    ("a submit time of 1e300 s", huge_submit_time, "line 4: submit_s is past the simulator's bound of 1e13 s"),
    ("one cycle in 31 years", lambda p: ["sim", "--scenario", str(scenario(p, sim={"cycle_interval_s": 1e9})),
                                         "--policy", "steward"],
     "small.yaml: sim.cycle_interval_s: at most 86,400 s (a day), got 1e+09"),
    ("a trace spanning eleven years", long_trace, "small.csv: the trace spans 4,015 days (line 2 submits at 0 s, "
     "line 4 at 3.46896e+08 s), past the simulator's bound of ten years"),
    ("generate --out a file", out_is_a_file, "taken: a file, not a folder"),
    ("suite --out a file", suite_out_is_a_file, "taken: a file, not a folder"),
    ("compare --workers 0", compare_workers(0), "--workers must be >= 1, got 0"),
    ("compare --workers -1", compare_workers(-1), "--workers must be >= 1, got -1"),
]


@pytest.mark.parametrize(("what", "args", "problem"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_a_bad_file_or_option_is_one_line_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], what: str, args: Files,
        problem: str) -> None:
    code, err = steward(monkeypatch, capsys, *args(tmp_path))
    assert problem in err, err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    assert len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------------------------------ audit, on a store file


@pytest.fixture()
def store_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Point the audit commands at a store URL (and the signing key into tmp_path)."""
    from steward.config import get_settings

    def point(url: str) -> None:
        monkeypatch.setenv("STEWARD_STORE_URL", url)
        monkeypatch.setenv("STEWARD_RUN_DIR", str(tmp_path / "run"))
        monkeypatch.setenv("STEWARD_CHECKPOINT_KEY", str(tmp_path / "run" / "cp.pem"))
        get_settings.cache_clear()

    yield point
    get_settings.cache_clear()


def good_store(tmp_path: Path) -> str:
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade
    from tests.unit.store.contract import run_history

    url = f"sqlite:///{tmp_path / 'good.db'}"
    upgrade(url)
    run_history(EventStore.from_url(url), jobs=2)
    return url


def older_store(tmp_path: Path) -> str:
    from alembic import command

    from steward.store.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0003_audit")
    return url


def newer_store(tmp_path: Path) -> str:
    """A store a newer steward migrated: at a migration this one's scripts do not hold."""
    url = good_store(tmp_path)
    con = sqlite3.connect(tmp_path / "good.db")
    con.execute("UPDATE alembic_version SET version_num = '0099_from_the_future'")
    con.commit()
    con.close()
    return url


def not_a_store(tmp_path: Path) -> str:
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE t (x)")
    con.close()
    return f"sqlite:///{tmp_path / 'other.db'}"


def not_a_database(tmp_path: Path) -> str:
    (tmp_path / "notes.db").write_text("not a database\n")
    return f"sqlite:///{tmp_path / 'notes.db'}"


AUDIT_CASES: list[tuple[str, Callable[[Path], str], list[str], str]] = [
    ("no file there", lambda p: f"sqlite:///{p / 'none.db'}", ["verify"], "none.db (no such file): `steward migrate`"),
    ("a folder", lambda p: f"sqlite:///{p}", ["replay"], "(a folder): `steward migrate` creates one"),
    ("not a URL", lambda p: "not a url", ["checkpoint"], "the store URL (STEWARD_STORE_URL) is not a database URL"),
    ("not a database", not_a_database, ["verify"], "notes.db is not a database (file is not a database)"),
    ("not a store", not_a_store, ["replay"], "other.db is not a Steward store (no migration applied)"),
    ("an older migration", older_store, ["checkpoint"], "old.db is at migration 0003_audit, this steward reads"),
    ("a newer migration", newer_store, ["verify"], "good.db is at migration 0099_from_the_future, which this "
     "steward does not know (it reads"),
    ("--to before --from", good_store, ["verify", "--from", "10", "--to", "3"], "--to 3 is before --from 10"),
    ("verify --from past the head", good_store, ["verify", "--from", "99"],
     "--from 99 is past the log's head (13): no position to check"),
    ("export --from past the head", good_store, ["export", "--from", "15", "--to", "20"],
     "--from 15 is past the log's head (13)"),
    ("--from 0", good_store, ["export", "--from", "0"], "--from must be 1 or more (the first position), got 0"),
    ("--at inf", good_store, ["state", "--at", "1e400"], "--at '1e400' is not a time"),
    ("export --out a folder", good_store, ["export", "--out", "."], "--out .: cannot write (Is a directory)"),
]


@pytest.mark.parametrize(("what", "url", "args", "problem"), AUDIT_CASES, ids=[c[0] for c in AUDIT_CASES])
def test_bad_audit_input_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str],
                                               store_at: Callable[[str], None], what: str,
                                               url: Callable[[Path], str], args: list[str], problem: str) -> None:
    store_at(url(tmp_path))
    before = files(tmp_path)
    code, err = steward(monkeypatch, capsys, "audit", *args)
    assert problem in err, err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    assert files(tmp_path) == before  # nothing created where the URL pointed (a reader made an empty SQLite file)


def files(folder: Path) -> set[str]:
    """The files of `folder` (SQLite's -wal and -shm files and the key folder aside)."""
    return {p.name for p in folder.iterdir() if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_a_proof_that_is_no_object_or_misses_a_field_does_not_verify_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for text, why in [("[1, 2]", "not a proof: a JSON list, expected an object with a 'kind'"),
                      ('{"kind": "inclusion"}', "a malformed inclusion proof: no field 'event'")]:
        (tmp_path / "proof.json").write_text(text)
        code, err = steward(monkeypatch, capsys, "audit", "check-proof", str(tmp_path / "proof.json"))
        assert code == 1 and f"the proof does not verify: {why}" in err, err
        assert "internal error" not in err


# ------------------------------------------------------------------------------------- bench options, submit


OPTION_CASES: list[tuple[list[str], str]] = [
    (["bench", "cycle", "--nodes", "0"], "argument --nodes: must be 1 or more, got 0"),
    (["bench", "cycle", "--pending", "-5"], "argument --pending: must be 0 or more, got -5"),
    (["bench", "cycle", "--projects", "0"], "argument --projects: must be 1 or more, got 0"),
    (["bench", "cycle", "--repeat", "-1"], "argument --repeat: must be 1 or more, got -1"),
    (["bench", "cycle", "--policy", "nope"], "--policy: setting 'preset': unknown preset 'nope'"),
    (["bench", "outlook", "--jobs", "0"], "argument --jobs: must be 1 or more, got 0"),
    (["bench", "outlook", "--repeat", "0"], "argument --repeat: must be 1 or more, got 0"),
    (["bench", "suite", "--workers", "-1", "--quick"], "--workers must be >= 1, got -1"),
    (["submit", "-p", "p", "-g", "1", "--min-runtime", "nan", "--", "x"], "--min-runtime must be 0 or more seconds "
                                                                          "(a finite number), got nan"),
    (["submit", "-p", "p", "-g", "1", "--min-runtime", "inf", "--", "x"], "(a finite number), got inf"),
    (["gpu-models", "set", "H100=nan", "--reason", "r"], "the weight of 'H100' must be a finite number, got nan"),
    (["gpu-models", "set", "H100=0", "--reason", "r"], "the weight of 'H100' must be > 0 (budget units per GPU-hour)"),
]


@pytest.mark.parametrize(("args", "problem"), OPTION_CASES, ids=[" ".join(c[0][:4]) for c in OPTION_CASES])
def test_an_option_out_of_range_is_refused_by_name_before_anything_runs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], problem: str) -> None:
    code, err = steward(monkeypatch, capsys, *args)
    assert problem in err, err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err


def test_bench_sim_max_jobs_0_is_refused_not_read_as_every_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, err = steward(monkeypatch, capsys, "bench", "sim", "--scenario", str(scenario(tmp_path)), "--max-jobs", "0")
    assert code == 2 and "sim.max_jobs: must be >= 1, got 0" in err, err


# ------------------------------------------------------------------------------------------------------ Ctrl-C


def _interrupt_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(10)


def test_a_worker_process_ends_quietly_on_ctrl_c(capfd: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C reaches the workers of `sim --compare --workers N` and of the suite too: each ends without a
    traceback of its own (a worker waiting on its queue printed one), the parent says it once."""
    from concurrent.futures.process import BrokenProcessPool

    from steward.sim.workers import process_pool

    with process_pool(1) as pool, pytest.raises(BrokenProcessPool):
        pool.submit(_interrupt_self).result(timeout=60)
    assert "Traceback" not in capfd.readouterr().err


# ------------------------------------------------------------------------- files read before anything is sent


@pytest.mark.parametrize(("args", "problem"), [
    (["policy", "set", "{file}", "--reason", "r"], "the policy file {file} is not UTF-8 text (byte 0xff at offset 0)"),
    (["policy", "set", "{dir}", "--reason", "r"], "cannot read the policy file {dir}: Is a directory"),
    (["token", "enroll", "--role", "admin", "--subject", "s", "--token-file", "{file}"],
     "the token file {file} is not UTF-8 text"),
    (["whoami"], "the token file {file} is not UTF-8 text"),
], ids=["policy set latin-1", "policy set a folder", "token enroll latin-1", "a latin-1 token file"])
def test_a_file_that_is_no_utf8_text_is_named_before_anything_is_sent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str],
        problem: str) -> None:
    from steward.config import get_settings

    bad = tmp_path / "latin1"
    bad.write_bytes(b"\xff{}")
    monkeypatch.delenv("STEWARD_TOKEN", raising=False)
    monkeypatch.setenv("STEWARD_TOKEN_FILE", str(bad))
    monkeypatch.setenv("STEWARD_API_URL", "http://127.0.0.1:9/graphql")  # nothing is sent: nothing listens
    get_settings.cache_clear()
    try:
        code, err = steward(monkeypatch, capsys, *[a.format(file=bad, dir=tmp_path) for a in args])
    finally:
        get_settings.cache_clear()
    assert problem.format(file=bad, dir=tmp_path) in err, err
    assert code == 2 and "internal error" not in err, err
