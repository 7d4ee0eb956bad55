"""`steward up` supervises what it starts (issue 22; ADR 0058): a process of the stack that dies is started
again with backoff, the restart is logged and counted in the supervisor's `/metrics`; a process stopped on
purpose stays stopped; two starters racing never start a process twice."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from steward.infra.processes import SUPERVISOR, Paths, pid_alive, read_pid, start_own, stop_own
from steward.infra.restarts import Backoff
from steward.infra.supervisor import Supervisor, supervised

pytestmark = pytest.mark.timeout(180)


def wait_for(check: Any, timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or check}")


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[Paths]:
    p = Paths(tmp_path)
    yield p
    for name in ("scheduler", "ledger"):
        stop_own(name, p)


def long_lived(name: str, paths: Paths) -> int:
    """A process that runs until killed, started as `steward up` starts the stack's (its spec is written)."""
    return start_own(name, paths, dict(os.environ), ("timeit", "-n", "1", "import time; time.sleep(600)"))


def test_a_dead_process_is_restarted_with_backoff_and_counted(paths: Paths) -> None:
    first = long_lived("scheduler", paths)
    registry = CollectorRegistry()
    sup = Supervisor(paths, Backoff(first_s=1.0, max_s=4.0, stable_s=60.0), registry)
    sup.tick(time.time())
    assert supervised(paths) == ["scheduler"] and sup.watched["scheduler"].restarts == 0
    pids = [first]
    for expected_delay in (1.0, 2.0):  # a second quick death waits twice as long
        os.killpg(pids[-1], signal.SIGKILL)
        wait_for(lambda: not pid_alive(pids[-1]), what="the kill")
        died_at = time.time()
        sup.tick(died_at)
        assert read_pid(paths, "scheduler") is None and sup.watched["scheduler"].waiting
        sup.tick(died_at + expected_delay - 0.2)
        assert read_pid(paths, "scheduler") is None  # not before its backoff
        sup.tick(died_at + expected_delay)
        pid = read_pid(paths, "scheduler")
        assert pid is not None and pid not in pids
        pids.append(pid)
    assert registry.get_sample_value("steward_supervisor_restarts_total", {"process": "scheduler"}) == 2.0


def test_a_process_stopped_on_purpose_is_not_restarted(paths: Paths) -> None:
    long_lived("ledger", paths)
    sup = Supervisor(paths, Backoff(first_s=0.0), CollectorRegistry())
    sup.tick(time.time())
    stop_own("ledger", paths)  # as `steward down` does: the PID file goes first
    for _ in range(3):
        sup.tick(time.time() + 5)
    assert read_pid(paths, "ledger") is None and sup.watched == {}


def test_two_starters_at_once_start_one_process(paths: Paths) -> None:
    """`steward up`, a benchmark restarting an executor and the supervisor may start the same process at
    the same moment: one process, one PID file (two executors once declared every job lost twice)."""
    pids: list[int] = []
    threads = [threading.Thread(target=lambda: pids.append(long_lived("scheduler", paths))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(pids)) == 1 and read_pid(paths, "scheduler") == pids[0]


@pytest.mark.integration
def test_the_stack_supervisor_restarts_a_sigkilled_scheduler_and_counts_it(stack: dict[str, object]) -> None:
    """The real stack: the supervisor `steward up` starts (the session's stack runs without one, so it is
    started here as `up` does), a SIGKILLed scheduler, its restart in the log and in /metrics."""
    from steward.cli.stack import bring_up
    from steward.config import Settings
    from steward.metrics import supervisor_port

    settings = Settings()
    paths = Paths(settings.run_dir)
    info = bring_up(settings, postgres=True)  # idempotent: the running processes are kept, the supervisor added
    try:
        assert read_pid(paths, SUPERVISOR) == info["processes"][SUPERVISOR]  # type: ignore[index]
        url = f"http://127.0.0.1:{supervisor_port(settings)}/metrics"
        wait_for(lambda: _get(url) is not None, what="the supervisor's metrics")
        before = read_pid(paths, "scheduler")
        assert before is not None
        os.killpg(before, signal.SIGKILL)
        after = wait_for(lambda: (p := read_pid(paths, "scheduler")) not in (None, before) and p, timeout=30,
                         what="the scheduler restarted")
        text = wait_for(lambda: (t := _get(url)) and 'steward_supervisor_restarts_total{process="scheduler"} 1.0' in t
                        and t, what="the restart counted")
        assert "steward_build_info" in text
        log = paths.log_file(SUPERVISOR).read_text()
        assert f"scheduler (pid {before}) died" in log and f"scheduler restarted as pid {after}" in log
        wait_for(lambda: "scheduler" in paths.log_file("scheduler").read_text(), what="the scheduler's log")
    finally:
        stop_own(SUPERVISOR, paths)  # the other modules kill processes on purpose and want them to stay down


def _get(url: str) -> str | None:
    try:
        resp = httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None
    return resp.text if resp.status_code == 200 else None



def test_down_stops_the_supervisor_first_and_lists_the_jobs_it_leaves_running(tmp_path: Path) -> None:
    """`steward down` (without the services) stops the supervisor and the processes, and names the node agent's
    job processes that run on: executor, job, attempt, PID, GPUs."""
    import subprocess

    from steward.cli.stack import bring_down
    from steward.config import Settings
    from steward.executor.attempts import AttemptRecord, AttemptStore, process_start_time

    paths = Paths(tmp_path)
    long_lived("scheduler", paths)
    start_own(SUPERVISOR, paths, dict(os.environ), ("timeit", "-n", "1", "import time; time.sleep(600)"))
    job = subprocess.Popen(["sleep", "600"], start_new_session=True)
    done = subprocess.Popen(["true"], start_new_session=True)
    done.wait()
    try:
        store = AttemptStore(tmp_path / "executor" / "local")
        store.save(AttemptRecord("j1", 2, ["sleep", "600"], {"n0": [3]}, "", pid=job.pid,
                                 create_time=process_start_time(job.pid)))
        store.save(AttemptRecord("j0", 1, ["true"], {"n0": [1]}, "", pid=done.pid, create_time=1.0))
        result = bring_down(Settings(run_dir=tmp_path), services=False)
        assert result["stopped"] == [SUPERVISOR, "scheduler"]
        assert result["jobs_left_running"] == [{"executor": "local", "job_id": "j1", "attempt": 2, "pid": job.pid,
                                                "gpus": {"n0": [3]}}]
        assert "1 job process(es)" in result["note"] and job.poll() is None  # left running, as said
    finally:
        job.kill()
        job.wait()
