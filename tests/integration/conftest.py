"""Integration tier: the real services (Kafka, PostgreSQL, Temporal) started by the project's own
infra scripts, on test ports and in a test run folder that starts clean every session.

Where a Docker engine answers, testcontainers could run the same services; this machine kind has no
engine, so the local processes are what CI exercises (see docs/adr/0001-real-services-locally.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# STEWARD_TEST_SLOT=N gives a session its own run folder and ports, so that several sessions (several
# engineers on one machine) can run the integration tier at once.
SLOT = int(os.environ.get("STEWARD_TEST_SLOT", "0"))
TEST_RUN_DIR = REPO / ".run" / ("test" if SLOT == 0 else f"test-{SLOT}")
_OFF = SLOT * 20

TEST_ENV = {
    "STEWARD_RUN_DIR": str(TEST_RUN_DIR),
    "STEWARD_KAFKA_PORT": str(19092 + _OFF),
    "STEWARD_KAFKA_CONTROLLER_PORT": str(19093 + _OFF),
    "STEWARD_KAFKA_BOOTSTRAP": f"127.0.0.1:{19092 + _OFF}",
    "STEWARD_PG_PORT": str(55433 + _OFF),
    "STEWARD_TEMPORAL_PORT": str(17233 + _OFF),
    "STEWARD_TEMPORAL_ADDRESS": f"127.0.0.1:{17233 + _OFF}",
    "STEWARD_API_PORT": str(18000 + _OFF),
}
# Set at import so that every module of this tier (and the processes it starts) sees the test stack.
os.environ.update(TEST_ENV)
for leftover in ("STEWARD_STORE_URL", "STEWARD_STORE_OWNER_URL", "STEWARD_API_URL", "STEWARD_SETTINGS_FILE"):
    os.environ.pop(leftover, None)

KEEP = os.environ.get("STEWARD_KEEP_SERVICES") == "1"


def services(*args: str) -> None:
    proc = subprocess.run(["bash", str(REPO / "infra" / "services.sh"), *args], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"infra/services.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def kill_leftover_jobs(run_dir: Path) -> None:
    """Jobs the local executor started outlive it by design (it re-attaches after its own restart), so a
    test session ends the ones it started with its stack: each job runs under a shim that leads its own
    process group (steward.executor.shim), found by the run folder in its command line."""
    marker = f"{run_dir}/executor/"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "steward.executor.shim" in cmdline and any(arg.startswith(marker) for arg in cmdline):
            try:
                os.killpg(int(entry.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue


def clean_run_dir() -> None:
    """Everything but the downloaded software goes, so each session starts from empty stores. Steward's
    own processes left by an earlier session (STEWARD_KEEP_SERVICES=1) are stopped first: deleting
    their PID files alone would leave them bound to the test ports."""
    from steward.infra.processes import DEMO_PROCESSES, OWN_PROCESSES, Paths, stop_own

    for name in (*DEMO_PROCESSES, *reversed(OWN_PROCESSES)):
        stop_own(name, Paths(TEST_RUN_DIR))
    kill_leftover_jobs(TEST_RUN_DIR)
    services("down")
    for name in ("kafka/data", "kafka/cluster.id", "postgres", "temporal", "steward.db", "executor", "stack.env",
                 "pids"):
        path = TEST_RUN_DIR / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def real_services() -> Iterator[None]:
    clean_run_dir()
    services("up")
    yield
    if not KEEP:
        services("down")


@pytest.fixture(scope="session")
def stack(real_services: None) -> Iterator[dict[str, object]]:
    """The whole stack as `steward up` starts it (PostgreSQL store), and stopped after the session."""
    from steward.cli.stack import bring_up
    from steward.config import Settings
    from steward.infra.processes import OWN_PROCESSES, Paths, stop_own

    settings = Settings()
    info = bring_up(settings, postgres=True)
    yield info
    for name in reversed(OWN_PROCESSES):
        stop_own(name, Paths(settings.run_dir))
    kill_leftover_jobs(Path(settings.run_dir))


def steward(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would."""
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"steward {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc
