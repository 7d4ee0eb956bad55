"""The infra/ scripts start Kafka, PostgreSQL and Temporal for real, and each answers.

Uses the same environment as the scripts (STEWARD_RUN_DIR, STEWARD_KAFKA_PORT, STEWARD_PG_PORT,
STEWARD_TEMPORAL_PORT, ...). Services that were not running before this module are stopped after it,
unless STEWARD_KEEP_SERVICES=1.
"""

from __future__ import annotations

import os
import subprocess
import time
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


def test_second_up_is_a_quick_no_op(services_up: None) -> None:
    started = time.monotonic()
    res = run("services.sh", "up", timeout=60)
    elapsed = time.monotonic() - started
    assert res.returncode == 0, res.stdout + res.stderr
    assert "already running" in res.stderr
    assert elapsed < 10, f"second 'up' took {elapsed:.1f}s"


def test_unknown_command_is_a_usage_error() -> None:
    res = run("kafka.sh", "bogus", timeout=30)
    assert res.returncode == 2
    assert "usage:" in res.stderr


def test_kafka_round_trip_on_commands_topic(services_up: None) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bootstrap = f"{HOST}:{KAFKA_PORT}"
    key = uuid.uuid4().hex.encode()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        meta = producer.send("steward.commands", key=key, value=b"infra-check").get(timeout=15)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
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
