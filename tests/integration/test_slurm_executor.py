"""The Slurm executor against a real Slurm cluster (issue 23): munged, slurmctld and one slurmd per node from
Debian's packages, started by infra/slurm.sh (the `slurm_cluster` fixture: 2 nodes x 8 GPUs under a leaf/spine
topology.conf). Its activities run outside Temporal (temporalio.testing.ActivityEnvironment), as the node
agent's do in test_executor_local.py; what it reports is kept by a recording publisher.

A placement runs in Slurm pinned to its node, as the project's user, with its GPUs and checkpoint folder; a
preemption delivers the checkpoint signal, the job checkpoints and ends, and the next attempt resumes from the
checkpoint; the kill ends it in Slurm; a drain becomes a Slurm drain (and a resume resumes it); a node Slurm
marks down reaches the heartbeat; an executor restarted while slurmctld restarts re-attaches and reads the exit code."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment

from steward.bus.envelope import Envelope
from steward.config import Settings
from steward.executor.attempts import AttemptRecord, AttemptStore
from steward.executor.isolation import BASIC_PATH
from steward.executor.settings import ExecutorSettings
from steward.executor.slurm import SlurmExecutor, SlurmSettings
from steward.executor.slurm_commands import parse_jobs, parse_nodes
from steward_workflows.payloads import JobRunInput, NodeRef, SignalJob, WatchJob, job_run_workflow_id
from tests.integration.conftest import REPO, slurm, slurm_script

pytestmark = pytest.mark.timeout(240)

SAMPLE = REPO / "examples" / "resumable_train.py"
PYTHON = shutil.which("python3", path=BASIC_PATH) or "python3"
T = TypeVar("T")


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[Envelope] = []

    def publish(self, envelope: Envelope, *, wait: bool = True, timeout: float = 10.0) -> None:
        self.sent.append(envelope)

    def publish_many(self, envelopes: Sequence[Envelope], *, timeout: float = 10.0) -> None:
        self.sent.extend(envelopes)

    def of(self, kind: str) -> list[Envelope]:
        return [e for e in self.sent if e.type == kind]


@pytest.fixture
def jobs_root() -> Iterator[Path]:
    """Work and checkpoint roots the project users can pass through (pytest's tmp folders are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="steward-slurm-", dir="/tmp"))
    base.chmod(0o711)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def executor(tmp_path: Path, conf: Path, root: Path, publisher: RecordingPublisher) -> SlurmExecutor:
    settings = Settings(run_dir=tmp_path, executor_id="hpc")
    options = ExecutorSettings(checkpoint_root=str(root / "ck"), work_root=str(root / "work"))
    return SlurmExecutor(settings, publisher, options, SlurmSettings(conf=str(conf), poll_s=0.2))  # type: ignore[arg-type]


def run_of(job_id: str, command: list[str], attempt: int = 1, **over: Any) -> JobRunInput:
    fields: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "executor": "hpc", "command": command,
                              "assignments": {"slurm1": [0, 1]}, "resumable": True, "project": "slurm-p1"}
    return JobRunInput(**(fields | over))


def act(coro: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 90))


def log_of(root: Path, job_id: str, attempt: int = 1) -> str:
    path = root / "work" / job_id / f"slurm-attempt-{attempt}.log"
    return path.read_text() if path.exists() else ""


def attempt_reads(attempts: AttemptStore, monkeypatch: pytest.MonkeyPatch, poll: Callable[[], object]) -> set[
        tuple[str, int]]:
    """The attempt records (job, attempt) an executor's `poll` reads, one by one or all at once."""
    asked: set[tuple[str, int]] = set()
    load, every = attempts.load, attempts.all

    def counted(job_id: str, attempt: int) -> AttemptRecord | None:
        asked.add((job_id, attempt))
        return load(job_id, attempt)

    def counted_all() -> Iterator[AttemptRecord]:
        for rec in every():
            asked.add((rec.job_id, rec.attempt))
            yield rec

    with monkeypatch.context() as patch:
        patch.setattr(attempts, "load", counted)
        patch.setattr(attempts, "all", counted_all)
        poll()
    return asked


def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {check}")


def test_a_placement_runs_in_slurm_pinned_to_its_node_as_the_project_user(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    env = ActivityEnvironment()
    run = run_of("s1", ["sh", "-c", 'echo "node=$SLURMD_NODENAME user=$(id -un) gpus=$CUDA_VISIBLE_DEVICES '
                                    'ck=$STEWARD_CHECKPOINT_DIR"; exit 0'])
    first = act(env.run(ex.start_job, run))
    again = act(env.run(ex.start_job, run))
    assert first.pid == again.pid > 0  # a re-delivered start never submits twice
    outcome = act(env.run(ex.watch_job, WatchJob("s1", 1, window_s=60.0)))
    assert (outcome.status, outcome.exit_code) == ("exited", 0)
    assert log_of(jobs_root, "s1").strip() == f"node=slurm1 user=stw-slurm-p1 gpus=0,1 ck={jobs_root / 'ck' / 's1'}"
    (job,) = parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(first.pid)))
    assert (job.state, job.nodes, job.user, job.name) == ("COMPLETED", ("slurm1",), "stw-slurm-p1", "steward-s1-a1")
    started = pub.of("ReportJobStarted")
    assert [e.payload["pid"] for e in started] == [first.pid, first.pid] and len({e.id for e in started}) == 1


def test_a_gang_holds_both_nodes_and_its_own_launcher_spreads_it(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    """A placement across nodes is one Slurm job on all of them; its command runs on the first (the batch
    step) and starts its ranks with `srun`, as Slurm users do."""
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    env = ActivityEnvironment()
    run = run_of("g1", ["srun", "sh", "-c", 'echo "rank on $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"'],
                 assignments={"slurm0": [0, 1, 2], "slurm1": [5, 6, 7]})
    started = act(env.run(ex.start_job, run))
    outcome = act(env.run(ex.watch_job, WatchJob("g1", 1, window_s=60.0)))
    assert (outcome.status, outcome.exit_code) == ("exited", 0)
    assert sorted(log_of(jobs_root, "g1").splitlines()) == ["rank on slurm0 gpus=0,1,2", "rank on slurm1 gpus=0,1,2"]
    (job,) = parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(started.pid)))
    assert job.nodes == ("slurm0", "slurm1")


def test_a_preemption_checkpoints_and_the_next_attempt_resumes_from_it(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    env = ActivityEnvironment()
    command = [PYTHON, str(SAMPLE), "--steps", "0", "--step-s", "0.05"]
    act(env.run(ex.start_job, run_of("s2", command)))
    wait_for(lambda: "step 5\n" in log_of(jobs_root, "s2"))
    delivered = act(env.run(ex.signal_job, SignalJob("s2", 1)))
    assert delivered.delivered and delivered.signal == "SIGTERM"
    outcome = act(env.run(ex.watch_job, WatchJob("s2", 1, window_s=60.0)))
    assert (outcome.status, outcome.exit_code, outcome.killed) == ("exited", 0, False)
    assert outcome.checkpoint_path == str(jobs_root / "ck" / "s2")
    saved = json.loads((jobs_root / "ck" / "s2" / "state.json").read_text())["step"]
    assert saved >= 5 and f"checkpointed at step {saved}" in log_of(jobs_root, "s2")
    assert [e.payload["path"] for e in pub.of("ReportCheckpointSaved")] == [outcome.checkpoint_path]

    resumed = act(env.run(ex.start_job, run_of("s2", command, attempt=2, resume_from=outcome.checkpoint_path)))
    assert resumed.resumed_from == outcome.checkpoint_path
    wait_for(lambda: "resumed from" in log_of(jobs_root, "s2", 2))
    assert log_of(jobs_root, "s2", 2).splitlines()[0] == f"resumed from step {saved}"  # not from zero
    assert act(env.run(ex.signal_job, SignalJob("s2", 2, kill=True))).delivered
    killed = act(env.run(ex.watch_job, WatchJob("s2", 2, window_s=60.0)))
    assert (killed.exit_code, killed.killed) == (-9, True)
    (job,) = parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(resumed.pid)))
    assert job.state == "CANCELLED"


def test_drains_become_slurm_drains_a_resume_ends_them_and_slurm_downs_reach_the_heartbeat(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    nodes = act(ex.register_nodes())
    assert [(n.node_id, n.gpus, n.gpu_model, n.path, n.executor) for n in nodes] == [
        ("slurm0", 8, "sim", ["spine", "leaf0", "slurm0"], "hpc"),
        ("slurm1", 8, "sim", ["spine", "leaf1", "slurm1"], "hpc")]
    assert ex.heartbeat().down == []

    # the operator's reason reaches Slurm as one string (ADR 0085), what would break the record left out
    act(ActivityEnvironment().run(ex.drain_node, NodeRef("slurm1", 'PSU swap "ticket 12"\nState=IDLE')))
    by_name = {n.name: n for n in parse_nodes(slurm(cluster, "scontrol", "-o", "show", "node"))}
    assert "DRAIN" in by_name["slurm1"].flags and by_name["slurm1"].reason == "steward: PSU swap ticket 12 State IDLE"
    assert by_name["slurm1"].drained_by_steward
    assert ex.heartbeat().down == []  # Steward's own drain is no news to Steward

    slurm(cluster, "scontrol", "update", "NodeName=slurm0", "State=DOWN", "Reason=fan failure")
    beat = ex.heartbeat()
    assert beat.down == ["slurm0"] and beat.executor_id == "hpc"

    # resumed in Steward: Slurm resumes Steward's drain, and leaves the node it holds down on its own alone
    act(ActivityEnvironment().run(ex.resume_node, NodeRef("slurm1")))
    act(ActivityEnvironment().run(ex.resume_node, NodeRef("slurm0")))
    by_name = {n.name: n for n in parse_nodes(slurm(cluster, "scontrol", "-o", "show", "node"))}
    assert "DRAIN" not in by_name["slurm1"].flags and not by_name["slurm1"].drained_by_steward
    assert "DOWN" in by_name["slurm0"].flags
    # slurmctld pings a resumed node before it counts as responding again (a second at most)
    wait_for(lambda: ex.heartbeat().down == ["slurm0"], timeout=30)
    assert "slurm1" not in ex.heartbeat().nodes  # no longer held for Steward's drain
    slurm(cluster, "scontrol", "update", "NodeName=slurm0", "State=RESUME")


def test_a_restarted_executor_reads_the_exit_across_a_slurmctld_restart(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    pub = RecordingPublisher()
    env = ActivityEnvironment()
    started = act(env.run(executor(tmp_path, cluster, jobs_root, pub).start_job,
                          run_of("s3", ["sh", "-c", "sleep 4; exit 7"], assignments={"slurm0": [0]})))
    slurm_script("restart-ctld")  # Slurm keeps the job in its state folder and the slurmd keeps running it
    restarted = executor(tmp_path, cluster, jobs_root, pub)  # a new process: only its records
    outcome = act(env.run(restarted.watch_job, WatchJob("s3", 1, window_s=60.0)))
    assert (outcome.status, outcome.exit_code) == ("exited", 7)
    again = act(env.run(restarted.start_job, run_of("s3", ["true"], assignments={"slurm0": [0]})))
    assert again.pid == started.pid  # a finished attempt is not submitted again


def foreign_job(conf: Path, node: str, gpus: int) -> int:
    """A job submitted to Slurm outside Steward (by user nobody, as a lab member would with sbatch), running."""
    out = slurm(conf, "sbatch", "--parsable", "--uid=nobody", "--gid=nogroup", "--chdir=/tmp", "--output=/dev/null",
                f"--nodelist={node}", f"--gres=gpu:{gpus}", "--job-name=someone-else", "--wrap=sleep 600")
    job_id = int(out.strip().split(";", 1)[0])
    wait_for(lambda: parse_jobs(slurm(conf, "scontrol", "-o", "show", "job", str(job_id)))[0].state == "RUNNING")
    return job_id


class OverRuns:
    """A Temporal client whose every JobRun is over: the executor's reconcile then cancels each Slurm job it
    knows as its own."""

    def get_workflow_handle(self, wid: str) -> Any:
        class Handle:
            async def describe(self) -> Any:
                return type("Described", (), {"status": WorkflowExecutionStatus.COMPLETED})()

        return Handle()


def test_a_foreign_job_s_gpus_are_foreign_load_and_never_steward_s_to_end(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    act(ex.register_nodes())
    foreign = foreign_job(cluster, "slurm0", 5)
    env = ActivityEnvironment()
    ours = act(env.run(ex.start_job, run_of("f1", ["sleep", "300"], assignments={"slurm0": [0, 1]})))
    assert ex.heartbeat().foreign == {"slurm0": 5}  # Steward's own 2 GPUs there are not foreign

    cancelled = asyncio.run(ex.reconcile(OverRuns()))  # type: ignore[arg-type]
    assert cancelled == [job_run_workflow_id("f1", 1)]  # Steward's orphan only
    states = {j.job_id: j.state for j in parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job"))}
    wait_for(lambda: parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(ours.pid)))[0].state
             == "CANCELLED")
    assert states[foreign] == "RUNNING"
    assert ex.heartbeat().foreign == {"slurm0": 5}
    (job,) = parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(foreign)))
    assert (job.state, job.user) == ("RUNNING", "nobody")  # never preempted, requeued nor cancelled by Steward

    slurm(cluster, "scancel", str(foreign))  # its owner ends it: the next heartbeat names no foreign load
    wait_for(lambda: ex.heartbeat().foreign == {})


def test_the_cluster_script_is_idempotent_and_reports_its_status(cluster: Path) -> None:
    def script(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(REPO / "infra" / "slurm.sh"), *args], capture_output=True, text=True,
                              timeout=120)

    again = script("start")
    assert again.returncode == 0 and again.stderr.count("already running") == 4, again.stderr  # munged, ctld, 2 slurmd
    status = script("status")
    assert status.returncode == 0
    assert status.stdout.startswith("slurm running (slurm-wlm ") and "slurm0:idle:gpu:sim:8" in status.stdout
    assert script("env").stdout.strip() == f"export SLURM_CONF={cluster}"
    assert script("bogus").returncode == 2


def test_a_poll_reads_the_attempts_slurm_may_still_run_not_the_history(
        tmp_path: Path, cluster: Path, jobs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: each poll read every attempt record ever written (a cost growing with the history). An
    attempt whose Slurm job ended is closed and not read again, in this process or after a restart."""
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    env = ActivityEnvironment()
    act(env.run(ex.start_job, run_of("s7", ["true"], assignments={"slurm0": [0]})))
    act(env.run(ex.start_job, run_of("s8", ["sleep", "30"], assignments={"slurm1": [0]})))
    outcome = act(env.run(ex.watch_job, WatchJob("s7", 1, window_s=60.0)))
    assert outcome.exit_code == 0
    assert ex.heartbeat().jobs == {"s8": 1}  # this poll sees s7 ended: closed
    assert attempt_reads(ex.attempts, monkeypatch, ex.heartbeat) == {("s8", 1)}
    restarted = executor(tmp_path, cluster, jobs_root, pub)  # a new process reads the history once...
    assert restarted.heartbeat().jobs == {"s8": 1}
    assert attempt_reads(restarted.attempts, monkeypatch, restarted.heartbeat) == {("s8", 1)}  # ...then no more
    act(env.run(ex.signal_job, SignalJob("s8", 1, kill=True)))


def test_a_node_added_to_slurm_is_registered_and_retired_once_slurm_no_longer_lists_it(
        tmp_path: Path, cluster: Path, jobs_root: Path) -> None:
    """ADR 0078: the heartbeat follows Slurm's inventory. A node added while the executor runs (`scontrol create`)
    is registered; deleted (`scontrol delete`), it is retired once missing for the executor's wait, once, and is
    no longer reported down; a restarted executor remembers what it registered and registers it anew if it is
    back (a new message id: the first registration's is deduplicated by the ledger)."""
    pub = RecordingPublisher()
    ex = executor(tmp_path, cluster, jobs_root, pub)
    ex.retirements.after_s = 0.0
    act(ex.register_nodes())
    assert sorted(e.payload["node_id"] for e in pub.of("RegisterNode")) == ["slurm0", "slurm1"]
    slurm(cluster, "scontrol", "create", "NodeName=slurm9", "CPUs=8", "Gres=gpu:sim:8", "State=CLOUD")
    try:
        ex.heartbeat()
        (added,) = [e for e in pub.of("RegisterNode") if e.payload["node_id"] == "slurm9"]
        path = "/".join(added.payload["path"])
        assert (added.payload["gpus"], added.payload["executor"], added.id) == (8, "hpc", f"register-slurm9-8-{path}")
        assert pub.of("RetireNode") == []
    finally:
        slurm(cluster, "scontrol", "delete", "NodeName=slurm9")
    beat = ex.heartbeat()
    (retired,) = pub.of("RetireNode")
    assert retired.payload["node_id"] == "slurm9" and "gone from the Slurm inventory" in retired.payload["reason"]
    assert retired.key == "node-slurm9" and retired.meta["actor"] == "executor:hpc"
    assert retired.payload["when_empty"] is True  # a loss the ledger has not recorded yet cannot refuse it (ADR 0081)
    assert "slurm9" not in beat.down and "slurm9" not in ex.registered
    ex.heartbeat()
    assert len(pub.of("RetireNode")) == 1  # once

    slurm(cluster, "scontrol", "create", "NodeName=slurm9", "CPUs=8", "Gres=gpu:sim:8", "State=CLOUD")
    try:
        restarted = RecordingPublisher()
        again = executor(tmp_path, cluster, jobs_root, restarted)
        assert again.retirements.known == {"slurm0", "slurm1"}
        act(again.register_nodes())
        back = [e for e in restarted.of("RegisterNode") if e.payload["node_id"] == "slurm9"]
        assert [e.id for e in back] == [f"{added.id}-r1"]
    finally:
        slurm(cluster, "scontrol", "delete", "NodeName=slurm9")
