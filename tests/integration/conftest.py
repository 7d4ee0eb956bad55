"""Integration tier: the real services (Kafka, PostgreSQL, Temporal) started by the project's own
infra scripts, on test ports and in a test run folder that starts clean every session.

Where a Docker engine answers, testcontainers could run the same services; this machine kind has no
engine, so the local processes are what CI exercises (see docs/adr/0001-real-services-locally.md).
"""

from __future__ import annotations

import contextlib
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
    # infra/oidc.sh's OpenID provider (only the tests that ask for the `oidc_provider` fixture start it)
    "STEWARD_OIDC_PORT": str(16400 + _OFF),
    # the web UI signs in there from the stack's API port, or from the sign-in e2e test's own API (port + 5)
    "STEWARD_OIDC_WEB_REDIRECTS": f"http://127.0.0.1:{18000 + _OFF}/ http://127.0.0.1:{18005 + _OFF}/",
    # the stack's API trusts it (it asks the provider only when a person's token arrives)
    "STEWARD_OIDC_ISSUER": f"http://127.0.0.1:{16400 + _OFF}",
    # where the stack's notifier sends e-mail: the SMTP server (aiosmtpd) a test starts there, when one does
    "STEWARD_NOTIFY_SMTP_PORT": str(16410 + _OFF),
    # the Kafka passwords infra/kafka.sh generates (ADR 0036), also for processes run in other run folders
    "STEWARD_KAFKA_SECRETS_DIR": str(TEST_RUN_DIR / "secrets" / "kafka"),
    # infra/slurm.sh's cluster (only the tests that ask for the `slurm_cluster` fixture start it)
    "STEWARD_SLURMCTLD_PORT": str(16817 + _OFF),
    "STEWARD_SLURMD_PORT": str(16818 + _OFF),
    "SLURM_CONF": str(TEST_RUN_DIR / "slurm" / "slurm.conf"),
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


def infra(script: str, *args: str, timeout: float = 300) -> str:
    """`infra/<script>.sh ARGS` (kafka, postgres ...) as the chaos bench runs them; its standard output."""
    proc = subprocess.run(["bash", str(REPO / "infra" / f"{script}.sh"), *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"infra/{script}.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


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
    from steward.infra.processes import DEMO_PROCESSES, OWN_PROCESSES, STANDBYS, SUPERVISOR, Paths, stop_own

    for name in (SUPERVISOR, *DEMO_PROCESSES, *STANDBYS, *reversed(OWN_PROCESSES)):
        stop_own(name, Paths(TEST_RUN_DIR))
    kill_leftover_jobs(TEST_RUN_DIR)
    services("down")
    # executor-slurm: the Slurm executor's attempt records name Slurm job ids, which a fresh Slurm cluster
    # gives out again from 1 (a record left by an earlier session took a new foreign job for Steward's own)
    for name in ("kafka/data", "kafka/cluster.id", "postgres", "temporal", "steward.db", "executor",
                 "executor-slurm", "stack.env", "pids"):
        path = TEST_RUN_DIR / name
        if path.is_symlink():  # PostgreSQL's cluster kept outside a run folder its OS user cannot reach (ADR 0064)
            subprocess.run(["bash", str(REPO / "infra" / "postgres.sh"), "purge"], check=True, timeout=120)
        elif path.is_dir():
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
    """The whole stack as `steward up` starts it (PostgreSQL store), and stopped after the session. Without
    the supervisor: modules kill processes on purpose and watch what the rest does while they are gone
    (test_supervision.py starts one for its own tests)."""
    from steward.cli.stack import bring_up
    from steward.config import Settings
    from steward.infra.processes import OWN_PROCESSES, Paths, stop_own

    settings = Settings()
    info = bring_up(settings, postgres=True, supervise=False)
    yield info
    for name in reversed(OWN_PROCESSES):
        stop_own(name, Paths(settings.run_dir))
    kill_leftover_jobs(Path(settings.run_dir))


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[str]:
    """The real OpenID provider (oidc-provider from npm, infra/oidc.sh) on this slot's port: its issuer."""
    def oidc(*args: str) -> str:
        proc = subprocess.run(["bash", str(REPO / "infra" / "oidc.sh"), *args], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"infra/oidc.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
        return proc.stdout.strip()

    oidc("restart")  # a fresh provider: no sessions or grants of an earlier run
    yield oidc("issuer")
    if not KEEP:
        oidc("stop")


def slurm_script(*args: str) -> str:
    proc = subprocess.run(["bash", str(REPO / "infra" / "slurm.sh"), *args], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"infra/slurm.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """A real Slurm cluster (munged, slurmctld, one slurmd per node; infra/slurm.sh) started from empty state
    for the session's Slurm tests only, and stopped after it: the path of its slurm.conf."""
    slurm_script("stop")
    for name in ("slurm/state", "slurm/spool", "slurm/jobcomp.log"):
        path = TEST_RUN_DIR / name
        if path.is_symlink():  # PostgreSQL's cluster kept outside a run folder its OS user cannot reach (ADR 0064)
            subprocess.run(["bash", str(REPO / "infra" / "postgres.sh"), "purge"], check=True, timeout=120)
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    slurm_script("start")
    yield TEST_RUN_DIR / "slurm" / "slurm.conf"
    if not KEEP:
        slurm_script("stop")


def slurm(conf: Path, *argv: str) -> str:
    """A Slurm client command (sbatch, scontrol, ...) on the test cluster; its standard output."""
    return subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "SLURM_CONF": str(conf)}).stdout


@pytest.fixture
def cluster(slurm_cluster: Path) -> Iterator[Path]:
    """The session's Slurm cluster, its nodes back in service and its jobs gone after each test."""
    # lazy: the Slurm tests only (the rest of the tier never reads Slurm's output)
    from steward.executor.slurm_commands import parse_jobs, parse_nodes

    yield slurm_cluster
    active = [str(j.job_id) for j in parse_jobs(slurm(slurm_cluster, "scontrol", "-o", "show", "job")) if j.active]
    if active:
        with contextlib.suppress(subprocess.CalledProcessError):
            slurm(slurm_cluster, "scancel", *active)
    for node in parse_nodes(slurm(slurm_cluster, "scontrol", "-o", "show", "node")):
        if node.flags & {"DOWN", "DRAIN"}:
            slurm(slurm_cluster, "scontrol", "update", f"NodeName={node.name}", "State=RESUME")


def steward(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would."""
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"steward {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def kafka_options(user: str = "steward-admin") -> dict[str, object]:
    """The connection options of a kafka-python client authenticated as `user` (a principal whose password
    `infra/kafka.sh` generated into the test run folder): the broker has no unauthenticated listener."""
    from steward.bus.kafka import client_options
    from steward.config import Settings

    return client_options(Settings(), user)


def serving_metrics(urls: dict[str, str]) -> dict[str, str]:
    """The metrics endpoints of a stack that answer. A ledger or scheduler serves /metrics only while it
    holds its lease (ADR 0048), so of `ledger` and its standby `ledger-2` (and the schedulers) exactly one
    answers: whichever took the lease first, or took it over."""
    import httpx

    out = {}
    for name, url in urls.items():
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=10).status_code == 200:
                out[name] = url
    return out


def active_of(urls: dict[str, str], service: str) -> str:
    """The metrics address of the active one of `service` and its standby (`<service>-2`)."""
    serving = serving_metrics({n: u for n, u in urls.items() if n in (service, f"{service}-2")})
    assert len(serving) == 1, f"one active {service} serves metrics, not {sorted(serving)}"
    return next(iter(serving.values()))
