"""Starting and stopping the stack: the real services (through infra/*.sh) and Steward's own processes,
each in the background with a log and a PID file in the run folder."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from steward.config import REPO_ROOT, Settings
from steward.paths import private_folder

OWN_PROCESSES = ("ledger", "scheduler", "worker", "executor", "api")
# `steward up --standbys` starts a second candidate of each role that must have one writer (ADR 0060): whichever
# holds the role's lease is the active (`steward_leader{role}` in /metrics), the other stands by and takes over
STANDBYS = {"ledger-2": "ledger", "scheduler-2": "scheduler"}
# `steward up` starts it after the others and `steward down` stops it first: it restarts any of the stack's
# processes that dies (steward.infra.supervisor; ADR 0058)
SUPERVISOR = "supervisor"
# Started on demand (by `make demo`, with their own command line) and stopped by `steward down` too.
DEMO_PROCESSES = ("demo-driver", "sim-executor")
# Seconds between SIGTERM and SIGKILL when it is not 15: the demo's driver cancels the local node's jobs
# (real processes) on its way out and waits until they are gone.
STOP_TIMEOUT_S = {"demo-driver": 60.0}
# The Steward component each process is (steward.bus.identity): its Kafka principal and command topic. The
# demo's driver talks to the API only and holds no Kafka principal.
COMPONENT_OF = {"ledger": "ledger", "scheduler": "scheduler", "worker": "workflows", "executor": "executor",
                "api": "api", "sim-executor": "executor", "demo-driver": "none", SUPERVISOR: "none"} | STANDBYS


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

    def spec_file(self, name: str) -> Path:
        """How the process was started (command line, environment, folder): what the supervisor restarts it
        with. The stack user's alone, like stack.env (the environment names the store's users)."""
        return self.pids / f"{name}.spec.json"

    def lock_file(self, name: str) -> Path:
        return self.pids / f"{name}.lock"

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


def pid_in_file(paths: Paths, name: str) -> int | None:
    """The PID the process's file names, alive or not (None: no file, so not started or stopped on purpose)."""
    try:
        return int(paths.pid_file(name).read_text().strip())
    except (OSError, ValueError):
        return None


def read_pid(paths: Paths, name: str) -> int | None:
    pid = pid_in_file(paths, name)
    return pid if pid is not None and pid_alive(pid) else None


@contextlib.contextmanager
def process_lock(paths: Paths, name: str) -> Iterator[None]:
    """One start or stop of `name` at a time across processes (`steward up`, the supervisor, a benchmark
    restarting an executor): a check-then-start that two of them ran at once started two executors."""
    paths.pids.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock_file(name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start_own(name: str, paths: Paths, env: dict[str, str], module_args: Sequence[str] = ()) -> int:
    """Start `steward run <name>` (or `python -m <module_args>`) in the background unless it already
    runs, as its Steward component (`COMPONENT_OF`: the Kafka principal it authenticates as); returns its
    PID."""
    with process_lock(paths, name):
        pid = read_pid(paths, name)
        if pid is not None:
            return pid
        env = env | {"STEWARD_COMPONENT": COMPONENT_OF.get(name.split("-")[0] if name.startswith("api-") else name,
                                                           "none")}
        argv = [sys.executable, "-m", *(module_args or ("steward.cli.main", "run", name))]
        write_private_json(paths.spec_file(name), {"argv": argv, "env": env, "cwd": str(REPO_ROOT)})
        return spawn(name, paths)


def spawn(name: str, paths: Paths) -> int:
    """Start `name` as its spec file says, log to its log file, write its PID file; the caller holds its lock."""
    spec = json.loads(paths.spec_file(name).read_text())
    private_folder(paths.logs)  # the stack user's alone: a job's OS user cannot read what services log
    with paths.log_file(name).open("ab") as log:
        proc = subprocess.Popen(spec["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=spec["env"], start_new_session=True, cwd=spec["cwd"])
    paths.pid_file(name).write_text(str(proc.pid))
    return proc.pid


def write_private_json(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, sort_keys=True)
    os.replace(tmp, path)


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
    """Stop `name` on purpose: its PID file goes first (under its lock), so the supervisor never takes the
    stop for a death and starts it again."""
    with process_lock(paths, name):
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
