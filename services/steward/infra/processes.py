"""Starting and stopping the stack: the real services (through infra/*.sh) and Steward's own processes,
each in the background with a log and a PID file in the run folder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from steward.config import REPO_ROOT, Settings
from steward.paths import private_folder

OWN_PROCESSES = ("ledger", "scheduler", "worker", "executor", "api")
# Started on demand (by `make demo`, with their own command line) and stopped by `steward down` too.
DEMO_PROCESSES = ("demo-driver", "sim-executor")
# Seconds between SIGTERM and SIGKILL when it is not 15: the demo's driver cancels the local node's jobs
# (real processes) on its way out and waits until they are gone.
STOP_TIMEOUT_S = {"demo-driver": 60.0}
# The Steward component each process is (steward.bus.identity): its Kafka principal and command topic. The
# demo's driver talks to the API only and holds no Kafka principal.
COMPONENT_OF = {"ledger": "ledger", "scheduler": "scheduler", "worker": "workflows", "executor": "executor",
                "api": "api", "sim-executor": "executor", "demo-driver": "none"}


class InfraError(RuntimeError):
    """A part of the stack could not be started; the message says which and where its log is."""


@dataclass(frozen=True)
class Paths:
    run: Path

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @property
    def pids(self) -> Path:
        return self.run / "pids"

    def pid_file(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    @property
    def stack_env(self) -> Path:
        return self.run / "stack.env"


def infra_script(name: str, *args: str, settings: Settings, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"STEWARD_RUN_DIR": str(settings.run_dir)}
    proc = subprocess.run(["bash", str(REPO_ROOT / "infra" / f"{name}.sh"), *args], env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise InfraError(f"infra/{name}.sh {' '.join(args)} failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def read_pid(paths: Paths, name: str) -> int | None:
    try:
        pid = int(paths.pid_file(name).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def start_own(name: str, paths: Paths, env: dict[str, str], module_args: Sequence[str] = ()) -> int:
    """Start `steward run <name>` (or `python -m <module_args>`) in the background unless it already
    runs, as its Steward component (`COMPONENT_OF`: the Kafka principal it authenticates as); returns its
    PID."""
    pid = read_pid(paths, name)
    if pid is not None:
        return pid
    env = env | {"STEWARD_COMPONENT": COMPONENT_OF.get(name.split("-")[0] if name.startswith("api-") else name, "none")}
    private_folder(paths.logs)  # the stack user's alone: a job's OS user cannot read what services log
    paths.pids.mkdir(parents=True, exist_ok=True)
    with paths.log_file(name).open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", *(module_args or ("steward.cli.main", "run", name))], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=REPO_ROOT,
        )
    paths.pid_file(name).write_text(str(proc.pid))
    return proc.pid


def stop_pid(pid: int, timeout: float = 15.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop_own(name: str, paths: Paths) -> bool:
    pid = read_pid(paths, name)
    paths.pid_file(name).unlink(missing_ok=True)
    if pid is None:
        return False
    stop_pid(pid, STOP_TIMEOUT_S.get(name, 15.0))
    return True


def write_stack_env(paths: Paths, values: dict[str, str]) -> None:
    """The stack's addresses (its store URLs name their users): readable by the stack's own user only, so
    a job (run as its project's user; docs/security.md "Jobs") cannot read them from the run folder."""
    paths.run.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.stack_env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file written before by an older version keeps no wider mode
    with os.fdopen(fd, "w") as out:
        out.write("".join(f"{k}={v}\n" for k, v in sorted(values.items())))
