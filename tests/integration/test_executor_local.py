"""The local executor's activities with real subprocesses (the sample job), outside Temporal
(temporalio.testing.ActivityEnvironment): start once, long-poll, checkpoint signal, grace then SIGKILL,
re-attach after a restart, orphans, idleness. The simulated executor's virtual time too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from steward.bus.envelope import Envelope
from steward.config import Settings
from steward.executor.attempts import alive
from steward.executor.isolation import BASIC_PATH
from steward.executor.local import LocalExecutor
from steward.executor.monitor import IdleTracker, Sample
from steward.executor.settings import ExecutorSettings
from steward.executor.sim import SimExecutor, virtual_duration
from steward_workflows.payloads import JobRunInput, ProcessOutcome, SignalJob, WatchJob

pytestmark = pytest.mark.timeout(120)

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resumable_train.py"
T = TypeVar("T")


class FakePublisher:
    def __init__(self) -> None:
        self.sent: list[Envelope] = []

    def publish(self, envelope: Envelope, *, wait: bool = True, timeout: float = 10.0) -> None:
        self.sent.append(envelope)

    def types(self) -> list[str]:
        return [e.type for e in self.sent]

    def of(self, kind: str) -> list[Envelope]:
        return [e for e in self.sent if e.type == kind]


STARTED: list[LocalExecutor] = []


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Any:
    """A failing test must not leave its sample jobs running (they would load the machine for hours)."""
    yield
    while STARTED:
        for rec in STARTED.pop().running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(rec.pid, signal.SIGKILL)


def passable(tmp_path: Path) -> Path:
    """A folder job users can reach (pytest's own are its user's alone, mode 0700): under /tmp, one per
    test folder, removed after the test."""
    base = PASSABLE.get(tmp_path)
    if base is None:
        base = PASSABLE[tmp_path] = Path(tempfile.mkdtemp(prefix="steward-jobs-", dir="/tmp"))
        base.chmod(0o711)
    return base


PASSABLE: dict[Path, Path] = {}


@pytest.fixture(autouse=True)
def no_leftover_folders() -> Any:
    yield
    while PASSABLE:
        shutil.rmtree(PASSABLE.popitem()[1], ignore_errors=True)


def executor(tmp_path: Path, publisher: FakePublisher, **options: Any) -> LocalExecutor:
    settings = Settings(run_dir=tmp_path, executor_id="t")
    base = passable(tmp_path)
    defaults: dict[str, Any] = {"tick_s": 0.1, "checkpoint_root": str(base / "ck"), "work_root": str(base / "work")}
    opts = ExecutorSettings(**(defaults | options))
    ex = LocalExecutor(settings, publisher, options=opts)  # type: ignore[arg-type]
    STARTED.append(ex)
    return ex


# the system's Python: the project's users cannot reach the virtual environment's (under /root here)
PYTHON = shutil.which("python3", path=BASIC_PATH) or "python3"


def sample_run(job_id: str = "j1", attempt: int = 1, *args: str, **over: Any) -> JobRunInput:
    command = [PYTHON, str(SAMPLE), "--step-s", "0.05", *args]
    fields: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "executor": "t", "command": command,
                              "assignments": {"n0": [2, 3]}, "resumable": True, "project": "p1"}
    return JobRunInput(**(fields | over))


def act(coro: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 60))


def log_of(ex: LocalExecutor, job_id: str, attempt: int = 1) -> str:
    return ex.attempts.path(job_id, attempt, ".log").read_text()


def wait_for(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {check}")


def test_start_runs_once_with_its_gpus_and_checkpoint_folder(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    run = sample_run(command=["sh", "-c", 'echo "gpus=$CUDA_VISIBLE_DEVICES ck=$STEWARD_CHECKPOINT_DIR"; sleep 30'])
    env = ActivityEnvironment()
    first = act(env.run(ex.start_job, run))
    again = act(env.run(ex.start_job, run))
    assert first.pid == again.pid and first.pid > 0  # a re-delivered start never runs the job twice
    wait_for(lambda: "gpus=" in log_of(ex, "j1"))
    assert log_of(ex, "j1").strip() == f"gpus=2,3 ck={passable(tmp_path) / 'ck' / 'j1'}"
    assert pub.types() == ["ReportJobStarted", "ReportJobStarted"] and len({e.id for e in pub.sent}) == 1
    act(env.run(ex.signal_job, SignalJob("j1", 1, kill=True)))


def test_checkpoint_request_saves_and_the_next_attempt_resumes_not_from_zero(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run()))
    running = act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=1.0)))
    assert running.status == "running"
    wait_for(lambda: "step 5\n" in log_of(ex, "j1"))
    assert act(env.run(ex.signal_job, SignalJob("j1", 1))).delivered
    outcome: ProcessOutcome = act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=30.0)))
    assert outcome.status == "exited" and outcome.exit_code == 0 and outcome.checkpoint_path
    saved = json.loads((passable(tmp_path) / "ck" / "j1" / "state.json").read_text())["step"]
    assert saved >= 5 and f"checkpointed at step {saved}" in log_of(ex, "j1")
    (ck,) = pub.of("ReportCheckpointSaved")
    assert ck.payload["path"] == str(passable(tmp_path) / "ck" / "j1")

    act(env.run(ex.start_job, sample_run(attempt=2, resume_from=outcome.checkpoint_path)))
    wait_for(lambda: "resumed from" in log_of(ex, "j1", 2))
    assert log_of(ex, "j1", 2).splitlines()[0] == f"resumed from step {saved}"
    act(env.run(ex.signal_job, SignalJob("j1", 2, kill=True)))


def test_a_restarted_executor_reattaches_and_reads_the_exit_code(tmp_path: Path) -> None:
    pub = FakePublisher()
    env = ActivityEnvironment()
    run = sample_run(command=["sh", "-c", "sleep 1; exit 7"])
    act(env.run(executor(tmp_path, pub).start_job, run))
    restarted = executor(tmp_path, pub)  # a new process: no children, only its records
    outcome = act(env.run(restarted.watch_job, WatchJob("j1", 1, window_s=30.0)))
    assert outcome.status == "exited" and outcome.exit_code == 7
    again = act(env.run(restarted.start_job, run))  # a finished attempt is not run again
    assert again.pid == restarted.attempts.load("j1", 1).pid  # type: ignore[union-attr]
    assert restarted.attempts.exit_of(restarted.attempts.load("j1", 1)) is not None  # type: ignore[arg-type]


def test_grace_then_sigkill_for_a_job_that_ignores_the_checkpoint_request(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run(command=["sh", "-c", "trap '' TERM; echo ready; sleep 60"])))
    wait_for(lambda: "ready" in log_of(ex, "j1"))
    act(env.run(ex.signal_job, SignalJob("j1", 1)))
    assert act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=0.5))).status == "running"
    act(env.run(ex.signal_job, SignalJob("j1", 1, kill=True)))
    outcome = act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=10.0)))
    assert outcome.exit_code == -9 and outcome.killed


def test_the_checkpoint_signal_is_configurable(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub, checkpoint_signal="SIGUSR1")
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run()))
    wait_for(lambda: "step 2\n" in log_of(ex, "j1"))
    assert act(env.run(ex.signal_job, SignalJob("j1", 1))).signal == "SIGUSR1"
    outcome = act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=30.0)))
    assert outcome.exit_code == 0 and "received SIGUSR1" in log_of(ex, "j1")


def test_a_process_gone_without_exit_code_is_vanished(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    started = act(env.run(ex.start_job, sample_run(command=["sleep", "60"])))
    os.killpg(started.pid, signal.SIGKILL)  # the host "restarted": nobody wrote an exit code
    outcome = act(env.run(ex.watch_job, WatchJob("j1", 1, window_s=10.0)))
    assert outcome.status == "vanished"


def test_orphans_of_finished_runs_are_stopped_at_startup(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub, orphan_grace_s=2.0)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("old")))
    act(env.run(ex.start_job, sample_run("live", command=["sleep", "60"], assignments={"n0": [0]})))
    wait_for(lambda: "step 1\n" in log_of(ex, "old"))

    class Handle:
        def __init__(self, wid: str) -> None:
            self.wid = wid

        async def describe(self) -> Any:
            if self.wid.startswith("job-old"):
                raise RPCError("not found", RPCStatusCode.NOT_FOUND, b"")
            from temporalio.client import WorkflowExecutionStatus

            return type("D", (), {"status": WorkflowExecutionStatus.RUNNING})()

    class Client:
        def get_workflow_handle(self, wid: str) -> Handle:
            return Handle(wid)

    stopped = act(ex.reconcile(Client()))  # type: ignore[arg-type]
    assert stopped == ["job-old-attempt-1"]
    old, live = ex.attempts.load("old", 1), ex.attempts.load("live", 1)
    assert old is not None and live is not None and not alive(old) and alive(live)
    assert "checkpointed at step" in log_of(ex, "old")  # stopped with the checkpoint signal first
    act(env.run(ex.signal_job, SignalJob("live", 1, kill=True)))


def test_an_idle_session_is_reported_idle_then_busy(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub, idle_min_s=0.5)
    env = ActivityEnvironment()
    run = sample_run("s1", 1, "--idle-after", "10", "--work-fraction", "0.9", job_class="interactive")
    act(env.run(ex.start_job, run))
    act(env.run(ex.watch_job, WatchJob("s1", 1, "interactive", window_s=3.0)))
    # CPU sampling on a loaded machine can see the quiet job flap back to busy within the window: the
    # first report must be the idle one, later ones alternate (busy is reported once per change)
    reports = pub.of("ReportUtilisation")
    assert reports, "no utilisation report"
    idle = reports[0]
    assert idle.payload["idle"] is True and idle.payload["source"] in ("cpu", "nvidia-smi")
    flags = [r.payload["idle"] for r in reports]
    assert all(a != b for a, b in pairwise(flags)), flags
    act(env.run(ex.signal_job, SignalJob("s1", 1, kill=True)))


def test_idle_tracker_needs_quiet_for_its_minimum_and_reports_busy_once() -> None:
    t = IdleTracker(cpu_threshold=5.0, gpu_threshold=5.0, min_idle_s=10.0)
    quiet = [Sample(float(s), 1.0, None, "cpu") for s in (0, 5, 10, 11)]
    assert [t.observe(s) for s in quiet] == [None, None, (True, 0.0), None]
    assert t.observe(Sample(12.0, 80.0, None, "cpu")) == (False, 12.0)
    assert t.observe(Sample(13.0, 80.0, None, "cpu")) is None
    gpu = IdleTracker(5.0, 5.0, 0.0)
    assert gpu.observe(Sample(0.0, 90.0, 1.0, "nvidia-smi")) == (True, 0.0)  # the GPU decides where there is one


def test_the_simulated_executor_runs_virtual_time_and_resumes(tmp_path: Path) -> None:
    pub = FakePublisher()
    sim = SimExecutor(Settings(run_dir=tmp_path, executor_id="sim"), pub, speed=1000.0,  # type: ignore[arg-type]
                      checkpoint_s=1.0)
    env = ActivityEnvironment()

    async def scenario() -> tuple[ProcessOutcome, ProcessOutcome, float]:
        run = JobRunInput("v1", 1, "sim", ["sleep", "2000"], {"sim-n0": [0]}, resumable=True)
        await env.run(sim.start_job, run)
        await asyncio.sleep(0.5)  # ~500 virtual seconds
        await env.run(sim.signal_job, SignalJob("v1", 1))
        first = await env.run(sim.watch_job, WatchJob("v1", 1, window_s=5.0))
        done = sim.progress["v1"]
        t0 = time.monotonic()
        await env.run(sim.start_job, JobRunInput("v1", 2, "sim", ["sleep", "2000"], {"sim-n0": [0]},
                                                 resumable=True, resume_from=first.checkpoint_path))
        second = await env.run(sim.watch_job, WatchJob("v1", 2, window_s=10.0))
        return first, second, (time.monotonic() - t0) * 1000 + done

    first, second, total_virtual = asyncio.run(scenario())
    assert first.exit_code == 0 and first.checkpoint_path == "sim://v1"
    assert second.exit_code == 0 and 1900 < total_virtual < 2300  # only the rest ran
    assert pub.types().count("ReportCheckpointSaved") == 1
    assert virtual_duration(["x", "--duration", "5"], {}, 1.0) == 5.0


FAKE_NVIDIA_SMI = """#!/bin/sh
# stands in for the driver's tool on this GPU-less machine: two GPUs, the first busy
case "$1" in
  -L) echo "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0000)"; echo "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-0001)" ;;
  --query-gpu=*) echo "0, 87"; echo "1, 3" ;;
  *) exit 2 ;;
esac
"""


def with_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(FAKE_NVIDIA_SMI)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_gpus_listed_by_nvidia_smi_are_the_slots_and_a_missing_index_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from temporalio.exceptions import ApplicationError

    from steward.executor.local import NO_SUCH_GPU
    from steward.executor.monitor import gpu_utilisation

    with_nvidia_smi(tmp_path, monkeypatch)
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    assert (ex.gpus, ex.gpu_source) == (2, "nvidia-smi")  # not STEWARD_EXECUTOR_GPUS (4)
    assert gpu_utilisation([0, 1]) == 45.0 and gpu_utilisation([1]) == 3.0
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as refused:
        act(env.run(ex.start_job, sample_run("big", command=["sleep", "30"], assignments={"n0": [1, 2]})))
    assert refused.value.type == NO_SUCH_GPU and refused.value.non_retryable
    assert "GPU(s) [2]" in str(refused.value) and "has 2 GPU(s)" in str(refused.value)
    assert ex.attempts.load("big", 1) is None and pub.sent == []  # nothing started, nothing reported
    act(env.run(ex.start_job, sample_run("fits", command=["sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES; sleep 30"],
                                         assignments={"n0": [1]})))
    wait_for(lambda: "gpus=" in log_of(ex, "fits"))
    assert log_of(ex, "fits").strip() == "gpus=1"
    act(env.run(ex.signal_job, SignalJob("fits", 1, kill=True)))


def test_without_nvidia_smi_the_slots_are_emulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    ex = executor(tmp_path, FakePublisher())
    assert (ex.gpus, ex.gpu_source) == (Settings(run_dir=tmp_path).executor_gpus, "emulated")


def test_running_attempts_are_tracked_in_memory_and_reread_after_a_restart(tmp_path: Path) -> None:
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    assert ex.running() == []  # the records are read once, here
    act(env.run(ex.start_job, sample_run("short", command=["sh", "-c", "exit 0"])))
    act(env.run(ex.start_job, sample_run("long", command=["sleep", "30"])))
    wait_for(lambda: [r.job_id for r in ex.running()] == ["long"])  # the short one ended
    restarted = executor(tmp_path, pub)  # a new process: only its records on disk
    assert [r.job_id for r in restarted.running()] == ["long"]
    act(env.run(ex.signal_job, SignalJob("long", 1, kill=True)))
    wait_for(lambda: restarted.running() == [] and ex.running() == [])


def test_a_retried_start_while_the_first_still_runs_starts_one_process(tmp_path: Path) -> None:
    """`start_job` has a short heartbeat timeout: a retry may arrive while the first start is still under
    way in the same executor; it waits for it and answers with the same process."""
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    run = sample_run("twice", command=["sleep", "30"])

    async def both() -> list[Any]:
        return list(await asyncio.gather(ActivityEnvironment().run(ex.start_job, run),
                                         ActivityEnvironment().run(ex.start_job, run)))

    first, second = act(both())
    assert first.pid == second.pid > 0
    assert len([r for r in ex.running() if r.job_id == "twice"]) == 1
    act(ActivityEnvironment().run(ex.signal_job, SignalJob("twice", 1, kill=True)))


def test_a_session_publishes_its_address_and_a_later_attempt_never_reads_the_earlier_one(tmp_path: Path) -> None:
    """Issue 24 / ADR 0055: the session writes a URL to the file STEWARD_SESSION_ADDRESS_FILE names; the executor
    reports it once (ReportSessionAddress with the attempt), and a new address once more. The file is per
    attempt, so attempt 2 starts with nothing published even though attempt 1's file was left behind."""
    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    script = ('echo "http://127.0.0.1:8888/lab" > "$STEWARD_SESSION_ADDRESS_FILE"; sleep 1; '
              'echo "127.0.0.1:2222" > "$STEWARD_SESSION_ADDRESS_FILE"; sleep 30')
    run = sample_run("s1", 1, job_class="interactive", command=["/bin/sh", "-c", script])
    act(env.run(ex.start_job, run))
    act(env.run(ex.watch_job, WatchJob("s1", 1, "interactive", window_s=2.5)))
    reports = [(r.payload["attempt"], r.payload["address"]) for r in pub.of("ReportSessionAddress")]
    assert reports == [(1, "http://127.0.0.1:8888/lab"), (1, "127.0.0.1:2222")], reports
    act(env.run(ex.watch_job, WatchJob("s1", 1, "interactive", window_s=0.5)))
    assert len(pub.of("ReportSessionAddress")) == 2  # the same address is no news
    act(env.run(ex.signal_job, SignalJob("s1", 1, kill=True)))
    wait_for(lambda: ex.attempts.exit_of(ex.attempts.load("s1", 1)) is not None or not alive(ex.attempts.load("s1", 1)))

    quiet = sample_run("s1", 2, job_class="interactive", command=["/bin/sh", "-c", "sleep 30"])
    act(env.run(ex.start_job, quiet))
    act(env.run(ex.watch_job, WatchJob("s1", 2, "interactive", window_s=1.0)))
    assert len(pub.of("ReportSessionAddress")) == 2  # attempt 1's address is not attempt 2's
    assert not (ex.work_dir("s1") / "steward-session-address-1").exists()
    act(env.run(ex.signal_job, SignalJob("s1", 2, kill=True)))


def test_a_batch_job_is_given_no_address_file_and_a_link_is_never_followed(tmp_path: Path) -> None:
    from steward.executor.session_address import ADDRESS_ENV, read_address

    pub = FakePublisher()
    ex = executor(tmp_path, pub)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("b1", 1, command=["/bin/sh", "-c", f'echo "[${ADDRESS_ENV}]"'])))
    wait_for(lambda: "[]" in log_of(ex, "b1"))
    secret = tmp_path / "secret"
    secret.write_text("10.0.0.1:22\n")
    link = tmp_path / "link"
    link.symlink_to(secret)
    assert read_address(link) is None and read_address(secret) is not None


# -- one attempt per GPU (steward.executor.fencing, ADR 0058) ------------------------------------------------


def test_a_placement_on_a_node_it_does_not_serve_or_for_another_executor_is_refused(tmp_path: Path) -> None:
    """Issue 22: attempt 5 of a demo job, placed on the simulated executor's node-19, ran as a real process
    on the stack's host. An executor starts only placements on its own nodes, made for it."""
    from temporalio.exceptions import ApplicationError

    from steward.executor.local import NOT_MY_NODE

    pub = FakePublisher()
    ex = executor(tmp_path, pub, nodes="n0, rack7-*")
    env = ActivityEnvironment()
    for run, words in [
        (sample_run("p00015", 5, command=["sleep", "30"], assignments={"node-19": [7]}),
         ["job p00015 attempt 5", "node-19", "executor 't' does not serve", "n0, rack7-*"]),
        (sample_run("p00016", 1, command=["sleep", "30"], executor="sim"),
         ["placed for executor 'sim'", "not for executor 't'"]),
    ]:
        with pytest.raises(ApplicationError) as refused:
            act(env.run(ex.start_job, run))
        assert refused.value.type == NOT_MY_NODE and refused.value.non_retryable
        assert all(w in str(refused.value) for w in words), str(refused.value)
        assert ex.attempts.load(run.job_id, run.attempt) is None
    assert pub.sent == [] and ex.running() == []  # nothing started, nothing reported
    started = act(env.run(ex.start_job, sample_run("ok", command=["sleep", "30"], assignments={"rack7-b": [0]})))
    assert started.pid > 0 and [r.job_id for r in ex.running()] == ["ok"]


def test_a_cancelled_attempt_in_its_grace_gives_its_gpu_to_the_next_placement(tmp_path: Path) -> None:
    """The ledger frees a cancelled job's GPUs at once; its process may still be in its checkpoint grace (here
    it ignores the signal). The next placement on those GPUs stops it and starts: never two attempts on one
    GPU, and never a start refused because a cancelled attempt still "holds" the GPU."""
    pub = FakePublisher()
    ex = executor(tmp_path, pub, orphan_grace_s=1.0)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("cancelled", command=["sh", "-c", "trap '' TERM; echo ready; sleep 60"],
                                         assignments={"n0": [2, 3]})))
    act(env.run(ex.start_job, sample_run("beside", command=["sleep", "60"], assignments={"n0": [0]})))
    wait_for(lambda: "ready" in log_of(ex, "cancelled"))
    assert act(env.run(ex.signal_job, SignalJob("cancelled", 1))).delivered  # the cancel's checkpoint request
    nxt = act(env.run(ex.start_job, sample_run("next", command=["sleep", "60"], assignments={"n0": [3]})))
    old = ex.attempts.load("cancelled", 1)
    assert old is not None and not alive(old) and old.killed and "fenced" in old.extra
    assert sorted((r.job_id, r.attempt) for r in ex.running()) == [("beside", 1), ("next", 1)]  # its books
    assert nxt.pid > 0
    outcome = act(env.run(ex.watch_job, WatchJob("cancelled", 1, window_s=5.0)))
    assert outcome.status == "exited" and outcome.killed  # its JobRun hears the end
    for job in ("beside", "next"):
        act(env.run(ex.signal_job, SignalJob(job, 1, kill=True)))


def test_a_lost_jobs_new_attempt_never_runs_beside_its_old_one(tmp_path: Path) -> None:
    """Attempt 1 was declared lost (the executor looked dead) but its process ran on; attempt 2 of the same
    job, placed on other GPUs, starts only once attempt 1 is stopped; a late start of attempt 1 again (a
    stale retry) is refused: attempt numbers decide."""
    from temporalio.exceptions import ApplicationError

    from steward.executor.local import SUPERSEDED

    pub = FakePublisher()
    ex = executor(tmp_path, pub, orphan_grace_s=2.0)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("lost", 1, assignments={"n0": [1]})))
    wait_for(lambda: "step 1\n" in log_of(ex, "lost"))
    act(env.run(ex.start_job, sample_run("lost", 3, assignments={"n0": [2]})))
    first = ex.attempts.load("lost", 1)
    assert first is not None and not alive(first)
    assert "checkpointed at step" in log_of(ex, "lost")  # stopped with the checkpoint signal first
    assert [(r.job_id, r.attempt) for r in ex.running()] == [("lost", 3)]
    with pytest.raises(ApplicationError) as refused:  # attempt 2 (lost elsewhere) reaches this executor late
        act(env.run(ex.start_job, sample_run("lost", 2, assignments={"n0": [0]})))
    assert refused.value.type == SUPERSEDED and refused.value.non_retryable
    assert "attempt 3 of the job already runs" in str(refused.value)
    assert ex.attempts.load("lost", 2) is None and [r.attempt for r in ex.running()] == [3]
    act(env.run(ex.signal_job, SignalJob("lost", 3, kill=True)))


def test_a_restarted_executor_stops_the_older_of_two_live_attempts_before_serving(tmp_path: Path) -> None:
    """An executor that comes back finding two attempts of one job alive (both runs still open, as a crash
    between fencing and starting could leave them) stops the older one in `reconcile`, before its worker
    takes any task."""
    pub = FakePublisher()
    ex = executor(tmp_path, pub, orphan_grace_s=2.0)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("j", 1, assignments={"n0": [1]})))
    act(env.run(ex.start_job, sample_run("other", 1, command=["sleep", "60"], assignments={"n0": [2]})))
    wait_for(lambda: "step 1\n" in log_of(ex, "j"))
    # `other`'s live process becomes attempt 2 of `j` on disk: two live attempts of one job
    rec = ex.attempts.load("other", 1)
    assert rec is not None
    ex.attempts.save(type(rec)(**{**rec.__dict__, "job_id": "j", "attempt": 2}))
    ex.attempts.path("other", 1, ".json").unlink()

    class Running:
        async def describe(self) -> Any:
            from temporalio.client import WorkflowExecutionStatus

            return type("D", (), {"status": WorkflowExecutionStatus.RUNNING})()

    class Client:
        def get_workflow_handle(self, wid: str) -> Running:
            return Running()

    restarted = executor(tmp_path, pub, orphan_grace_s=2.0)
    assert act(restarted.reconcile(Client())) == ["job-j-attempt-1"]  # type: ignore[arg-type]
    assert [(r.job_id, r.attempt) for r in restarted.running()] == [("j", 2)]
    old = restarted.attempts.load("j", 1)
    assert old is not None and not alive(old) and "checkpointed at step" in log_of(ex, "j")
    act(env.run(restarted.signal_job, SignalJob("j", 2, kill=True)))
