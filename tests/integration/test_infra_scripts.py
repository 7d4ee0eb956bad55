"""The infra/ scripts start Kafka, PostgreSQL and Temporal for real, and each answers.

Uses the same environment as the scripts (STEWARD_RUN_DIR, STEWARD_KAFKA_PORT, STEWARD_PG_PORT,
STEWARD_TEMPORAL_PORT, ...). Services that were not running before this module are stopped after it,
unless STEWARD_KEEP_SERVICES=1.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
SERVICES = ("kafka", "postgres", "temporal")
HOST = "127.0.0.1"
KAFKA_PORT = int(os.environ.get("STEWARD_KAFKA_PORT", "9092"))
PG_PORT = int(os.environ.get("STEWARD_PG_PORT", "55432"))
TEMPORAL_PORT = int(os.environ.get("STEWARD_TEMPORAL_PORT", "7233"))


def run(script: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(INFRA / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def services_up() -> Iterator[None]:
    was_running = {svc: run(f"{svc}.sh", "status").returncode == 0 for svc in SERVICES}
    up = run("services.sh", "up")
    assert up.returncode == 0, f"services.sh up failed:\n{up.stdout}\n{up.stderr}"
    yield
    if os.environ.get("STEWARD_KEEP_SERVICES") == "1":
        return
    for svc in reversed(SERVICES):
        if not was_running[svc]:
            run(f"{svc}.sh", "stop")


@pytest.mark.parametrize("svc", SERVICES)
def test_status_reports_running_with_version(services_up: None, svc: str) -> None:
    res = run(f"{svc}.sh", "status", timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{svc} " in res.stdout and "running" in res.stdout
    assert HOST in res.stdout


def _pids() -> dict[str, str]:
    run_dir = Path(os.environ.get("STEWARD_RUN_DIR", REPO / ".run"))
    return {svc: (run_dir / "pids" / f"{svc}.pid").read_text().strip() for svc in SERVICES}


def test_second_up_keeps_the_running_services(services_up: None) -> None:
    before = _pids()
    res = run("services.sh", "up", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stderr.count("already running") == len(SERVICES), res.stderr
    assert _pids() == before


def test_unknown_command_is_a_usage_error() -> None:
    res = run("kafka.sh", "bogus", timeout=30)
    assert res.returncode == 2
    assert "usage:" in res.stderr


def test_kafka_round_trip_on_commands_topic(services_up: None) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from tests.integration.conftest import kafka_options

    key = uuid.uuid4().hex.encode()
    producer = KafkaProducer(**kafka_options(), acks="all")
    try:
        meta = producer.send("steward.commands", key=key, value=b"infra-check").get(timeout=15)
    finally:
        producer.close()
    consumer = KafkaConsumer(**kafka_options(), enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        tp = TopicPartition("steward.commands", meta.partition)
        assert consumer.partitions_for_topic("steward.commands") == set(range(6))
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        record = next(iter(consumer))
    finally:
        consumer.close()
    assert record.key == key
    assert record.value == b"infra-check"


def test_postgres_app_role_connects_over_tcp(services_up: None) -> None:
    import psycopg

    password = os.environ.get("STEWARD_PG_APP_PASSWORD", "steward_app")
    for db in ("steward", "steward_test"):
        with psycopg.connect(
            host=HOST, port=PG_PORT, user="steward_app", password=password, dbname=db, connect_timeout=5
        ) as conn:
            row = conn.execute(
                "SELECT current_user, current_database(), pg_get_userbyid(datdba) "
                "FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        assert row == ("steward_app", db, "steward_owner")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host=HOST, port=PG_PORT, user="steward_app", password="wrong", dbname="steward")


def test_temporal_lists_the_default_namespace(services_up: None) -> None:
    binary = REPO / ".venv" / "bin" / "temporal"
    res = subprocess.run(
        [
            str(binary) if binary.exists() else "temporal",
            "operator",
            "namespace",
            "list",
            "--address",
            f"{HOST}:{TEMPORAL_PORT}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "default" in res.stdout


# -- infra/lib.sh: the stop and wait logic every service script shares ---------------------------------


def lib(script: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `script` in bash with infra/lib.sh sourced, in a run folder of its own."""
    env = os.environ | {"STEWARD_RUN_DIR": str(tmp_path), "STEWARD_SVC": "t"}
    return subprocess.run(["bash", "-c", f'source "{INFRA}/lib.sh"\n{script}'], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def test_stop_escalates_to_sigkill_for_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    res = lib("""start_daemon "$PID_DIR/stubborn.pid" "$LOG_DIR/stubborn.log" \\
  bash -c 'trap "" TERM; sleep 300; : stubborn'
pid=$(pid_from_file "$PID_DIR/stubborn.pid")
stop_pid stubborn "$PID_DIR/stubborn.pid" stubborn 1
if kill -0 "$pid" 2>/dev/null; then echo ALIVE; else echo GONE; fi
[[ -e "$PID_DIR/stubborn.pid" ]] && echo PIDFILE || echo NOPIDFILE""", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["GONE", "NOPIDFILE"]
    assert "still running after 1s; sending SIGKILL" in res.stderr and "stubborn stopped" in res.stderr


def test_stop_with_sigterm_needs_no_sigkill_and_a_second_stop_is_a_no_op(tmp_path: Path) -> None:
    res = lib("""start_daemon "$PID_DIR/polite.pid" "$LOG_DIR/polite.log" bash -c 'sleep 300; : polite'
stop_pid polite "$PID_DIR/polite.pid" polite 20
stop_pid polite "$PID_DIR/polite.pid" polite 20""", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "SIGKILL" not in res.stderr
    assert "polite stopped" in res.stderr and "polite is not running" in res.stderr


def test_a_service_own_stop_command_is_used_first(tmp_path: Path) -> None:
    res = lib("""start_daemon "$PID_DIR/own.pid" "$LOG_DIR/own.log" \\
  bash -c 'trap "exit 0" USR1; while :; do sleep 0.1; done'
pid=$(pid_from_file "$PID_DIR/own.pid")
graceful() { echo "graceful $1" >&2; kill -USR1 "$1"; }
stop_service own "$PID_DIR/own.pid" "$pid" 20 graceful "$pid"
""", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "graceful " in res.stderr and "SIGKILL" not in res.stderr and "own stopped" in res.stderr


def test_wait_until_fails_with_the_log_when_the_process_dies(tmp_path: Path) -> None:
    res = lib("""echo "boom: the reason" >"$LOG_DIR/dying.log"
bash -c 'exit 1' & pid=$!
wait "$pid" || true
wait_until dying 30 "$pid" "$LOG_DIR/dying.log" "ready" false""", tmp_path)
    assert res.returncode == 1
    assert "dying exited during startup" in res.stderr and "boom: the reason" in res.stderr


def test_wait_until_names_what_did_not_happen_in_time(tmp_path: Path) -> None:
    res = lib("""sleep 30 & pid=$!
: >"$LOG_DIR/slow.log"
wait_until slow 1 "$pid" "$LOG_DIR/slow.log" "serving on 127.0.0.1:1" false
""", tmp_path)
    assert res.returncode == 1
    assert "slow not serving on 127.0.0.1:1 within 1s" in res.stderr


@pytest.mark.parametrize(("pid", "ready", "want", "code"), [
    ("123", 0, "svc 1.0 running (pid 123); log L", 0),
    ("123", 1, "svc starting or unhealthy (pid 123, H:1 not answering); log L", 3),
    ("", 1, "svc not running", 3),
])
def test_service_status_lines(tmp_path: Path, pid: str, ready: int, want: str, code: int) -> None:
    res = lib(f"""line() {{ echo "1.0 running (pid $1)"; }}
service_status svc "{pid}" {ready} H:1 L line""", tmp_path)
    assert (res.stdout.strip(), res.returncode) == (want, code)
