"""Jobs that cannot reach the control plane (issue 21), with real processes: a job runs as its project's
OS user, in a folder only that user can read, with an environment built from scratch; it cannot read the
executor's environment or records, nor another tenant's folder; ids that would leave the executor's
folders are refused; a checkpoint to resume from outside the checkpoint root is never copied. Needs root
(as this machine and CI run): the executor switches users."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steward.config import Settings
from steward.executor.isolation import (
    STABLE_ID_BASE,
    STABLE_ID_SPAN,
    IsolationError,
    ensure_user,
    job_environment,
    stable_id,
    user_name,
)
from steward.executor.local import NOT_ISOLATED, LocalExecutor
from steward.executor.settings import ExecutorSettings
from steward_workflows.payloads import SignalJob
from tests.integration.test_executor_local import (
    FakePublisher,
    act,
    executor,
    log_of,
    no_leftover_folders,
    no_leftover_processes,
    passable,
    sample_run,
    wait_for,
)

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (as here and in CI)")]
__all__ = ["no_leftover_folders", "no_leftover_processes"]  # the fixtures, used here too

SECRET = "executor-secret-8d1f"
ALLOWED = {"PATH", "HOME", "LANG", "USER", "LOGNAME", "PWD", "SHLVL", "_", "CUDA_VISIBLE_DEVICES",
           "STEWARD_CHECKPOINT_DIR", "STEWARD_JOB_ID", "STEWARD_ATTEMPT", "STEWARD_RESUMED", "STEWARD_RESUME_FROM",
           "MY_SEED"}


@pytest.fixture()
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an executor holds: its bus credentials and addresses, in its environment."""
    monkeypatch.setenv("STEWARD_KAFKA_SASL_PASSWORD", SECRET)
    monkeypatch.setenv("STEWARD_KAFKA_BOOTSTRAP", "broker.internal:9093")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


def test_a_job_runs_as_its_projects_user_in_its_own_folder_with_a_scratch_environment(
        tmp_path: Path, secret_env: None) -> None:
    ex = executor(tmp_path, FakePublisher())
    run = sample_run("iso-1", project="p1", env={"MY_SEED": "7", "STEWARD_CHECKPOINT_DIR": "/etc"},
                     command=["sh", "-c", "id -un; id -G; pwd; umask; env; echo END; sleep 30"])
    act(ActivityEnvironment().run(ex.start_job, run))
    wait_for(lambda: "END" in log_of(ex, "iso-1"))
    lines = log_of(ex, "iso-1").splitlines()
    user = pwd.getpwnam("stw-p1")
    assert lines[0] == "stw-p1" and lines[1] == str(user.pw_gid)  # its own group only, none of root's
    work = passable(tmp_path) / "work" / "iso-1"
    assert lines[2] == str(work) and lines[3] == "0077"
    env = dict(line.split("=", 1) for line in lines[4:lines.index("END")] if "=" in line)
    assert set(env) <= ALLOWED, set(env) - ALLOWED
    assert SECRET not in log_of(ex, "iso-1") and "broker.internal" not in log_of(ex, "iso-1")
    assert env["MY_SEED"] == "7" and env["HOME"] == str(work)  # the job's own variables, Steward's basics
    assert env["STEWARD_CHECKPOINT_DIR"] == str(passable(tmp_path) / "ck" / "iso-1")  # not the job's "/etc"
    for folder in (work, passable(tmp_path) / "ck" / "iso-1"):
        st = os.stat(folder)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, user.pw_gid, 0o700)
    assert stat.S_IMODE(os.stat(ex.root / "jobs").st_mode) == 0o700  # records, logs and specs: the executor's
    act(ActivityEnvironment().run(ex.signal_job, SignalJob("iso-1", 1, kill=True)))


def test_a_job_cannot_read_the_executors_secrets_nor_another_tenants_folders(tmp_path: Path, secret_env: None) -> None:
    ex = executor(tmp_path, FakePublisher())
    env = ActivityEnvironment()
    act(env.run(ex.start_job, sample_run("tenant-a", project="pa", command=[
        "sh", "-c", 'echo tenant-a-data > "$HOME/data"; echo a > "$STEWARD_CHECKPOINT_DIR/ck"; echo READY; sleep 30'])))
    wait_for(lambda: "READY" in log_of(ex, "tenant-a"))
    base = passable(tmp_path)
    probes = [f"/proc/{os.getpid()}/environ", f"{ex.root}/jobs/tenant-a/attempt-1.json",
              f"{ex.root}/jobs/tenant-a/attempt-1.spec", f"{ex.root}/jobs/tenant-a/attempt-1.log",
              f"{base}/work/tenant-a/data", f"{base}/ck/tenant-a/ck"]
    script = "; ".join(f'cat "{p}" && echo "READ {p}"' for p in probes)
    script += f'; ls "{base}/work" && echo LISTED; ls "{base}/work/tenant-a" && echo LISTED; echo DONE'
    # other GPUs than tenant-a's: a GPU goes to one running attempt at a time (issue 22, ADR 0048)
    act(env.run(ex.start_job, sample_run("tenant-b", project="pb", command=["sh", "-c", script],
                                         assignments={"n0": [0, 1]})))
    wait_for(lambda: "DONE" in log_of(ex, "tenant-b"))
    out = log_of(ex, "tenant-b")
    assert "READ" not in out and "LISTED" not in out, out
    assert out.count("Permission denied") == len(probes) + 2, out
    assert SECRET not in out and "tenant-a-data" not in out
    act(env.run(ex.signal_job, SignalJob("tenant-a", 1, kill=True)))


def test_a_job_cannot_read_the_services_logs(tmp_path: Path) -> None:
    """The services' log folder, as `steward up` (steward.infra.processes) and the infra scripts
    (infra/lib.sh) lay it out in a run folder a job can reach, is the stack user's alone (0700): a job,
    run as its project's user, can neither list it nor read a log in it, though the logs hold the stack's
    addresses, ids and the refusals of every tenant. A folder left wider by an older version is narrowed."""
    from steward.infra.processes import Paths, start_own

    run = passable(tmp_path) / "run"
    (run / "logs").mkdir(parents=True, mode=0o755)  # an older version's folder
    (run / "logs").chmod(0o755)
    logs = run / "logs"
    start_own("probe", Paths(run), dict(os.environ), module_args=("platform",))
    wait_for(lambda: (logs / "probe.log").stat().st_size > 0)
    assert stat.S_IMODE(os.stat(logs).st_mode) == 0o700  # steward up's processes
    logs.chmod(0o755)
    repo = Path(__file__).resolve().parents[2]
    subprocess.run(["bash", "-c", f'source "{repo}/infra/lib.sh" && echo kafka-secret-line >"$LOG_DIR/kafka.log"'],
                   env=os.environ | {"STEWARD_RUN_DIR": str(run)}, check=True, timeout=30)
    st = os.stat(logs)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o700)  # and the infra scripts
    ex = executor(tmp_path, FakePublisher())
    probes = [logs / "probe.log", logs / "kafka.log"]
    script = "; ".join(f'cat "{p}" && echo "READ {p}"' for p in probes)
    script += f'; ls "{logs}" && echo LISTED; echo DONE'
    act(ActivityEnvironment().run(ex.start_job, sample_run("logs-probe", project="pl", command=["sh", "-c", script])))
    wait_for(lambda: "DONE" in log_of(ex, "logs-probe"))
    out = log_of(ex, "logs-probe")
    assert "READ" not in out and "LISTED" not in out and "kafka-secret-line" not in out, out
    assert out.count("Permission denied") == len(probes) + 1, out


@pytest.mark.parametrize("job_id", ["../../../../../tmp/escape", "/etc/cron.d/x", "a/../../b", "..", "j\n1"])
def test_a_job_id_that_would_leave_the_executors_folders_is_refused(tmp_path: Path, job_id: str) -> None:
    """The ledger refuses such ids for new jobs; one recorded before the rule (or forged) still never
    becomes a path outside the executor's folders."""
    ex = executor(tmp_path, FakePublisher())
    before = set(Path("/tmp").iterdir())
    with pytest.raises(ApplicationError) as refused:
        act(ActivityEnvironment().run(ex.start_job, sample_run(job_id, command=["true"])))
    assert refused.value.type == NOT_ISOLATED and refused.value.non_retryable
    assert "\n" not in str(refused.value)
    assert set(Path("/tmp").iterdir()) == before and not Path("/etc/cron.d/x").exists()


def test_a_checkpoint_outside_the_checkpoint_root_is_never_copied(tmp_path: Path) -> None:
    ex = executor(tmp_path, FakePublisher())
    run = sample_run("iso-r", project="p1", resume_from="/etc",
                     command=["sh", "-c", 'ls -A "$STEWARD_CHECKPOINT_DIR"; echo resumed=$STEWARD_RESUMED; echo END'])
    act(ActivityEnvironment().run(ex.start_job, run))
    wait_for(lambda: "END" in log_of(ex, "iso-r"))
    assert log_of(ex, "iso-r").splitlines() == ["resumed=0", "END"]  # empty: nothing of /etc copied


def test_a_resumed_checkpoints_symlinks_are_copied_as_links_not_followed(tmp_path: Path) -> None:
    ex = executor(tmp_path, FakePublisher())
    old = passable(tmp_path) / "ck" / "old-session"
    old.mkdir(parents=True)
    (old / "state.json").write_text("{}")
    (old / "shadow").symlink_to("/etc/shadow")
    run = sample_run("iso-s", project="p1", resume_from=str(old), restored_from="old-session",
                     command=["sh", "-c", 'cat "$STEWARD_CHECKPOINT_DIR/shadow" || echo DENIED; echo END'])
    act(ActivityEnvironment().run(ex.start_job, run))
    wait_for(lambda: "END" in log_of(ex, "iso-s"))
    copied = passable(tmp_path) / "ck" / "iso-s"
    assert (copied / "shadow").is_symlink() and "DENIED" in log_of(ex, "iso-s")
    assert os.stat(copied / "state.json").st_uid == pwd.getpwnam("stw-p1").pw_uid


def test_an_executor_that_is_not_root_refuses_to_run_jobs_unisolated(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationError, match=r"needs root .* set STEWARD_EXECUTOR_ISOLATION=none"):
        executor(tmp_path, FakePublisher())
    ex = executor(tmp_path, FakePublisher(), isolation="none")  # the explicit fallback: this user, scratch env
    act(ActivityEnvironment().run(ex.start_job, sample_run("dev-1", command=["sh", "-c", "id -un; echo END"])))
    wait_for(lambda: "END" in log_of(ex, "dev-1"))
    assert log_of(ex, "dev-1").splitlines()[0] == pwd.getpwuid(os.getuid()).pw_name


def test_an_unknown_isolation_mode_is_named() -> None:
    with pytest.raises(IsolationError, match="STEWARD_EXECUTOR_ISOLATION must be one of user, none, got 'chroot'"):
        LocalExecutor(Settings(), FakePublisher(), options=ExecutorSettings(isolation="chroot"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("project", "want"), [
    ("p1", "stw-p1"), ("7f04ca", "stw-7f04ca"), ("team-a", "stw-team-a"),
    ("Team.A", "stw-teama-"), ("a" * 40, "stw-" + "a" * 19 + "-"),
])
def test_each_project_has_its_own_user_name(project: str, want: str) -> None:
    name = user_name(project)
    assert name.startswith(want) and len(name) <= 32
    assert user_name(project) == name and user_name(project + "x") != name


def test_the_jobs_own_variables_cannot_replace_stewards() -> None:
    env: dict[str, Any] = job_environment({"PATH": "/opt/bin", "STEWARD_JOB_ID": "forged", "X": "1"},
                                          {"STEWARD_JOB_ID": "j1", "CUDA_VISIBLE_DEVICES": "0"}, Path("/w"), "stw-p")
    assert env == {"PATH": "/opt/bin", "HOME": "/w", "LANG": "C.UTF-8", "USER": "stw-p", "LOGNAME": "stw-p",
                   "X": "1", "STEWARD_JOB_ID": "j1", "CUDA_VISIBLE_DEVICES": "0"}


def test_a_projects_user_id_comes_from_its_name_not_from_the_order_users_were_made() -> None:
    """A new container makes its users afresh: the same project must get the same uid there, or files an
    earlier attempt left in a persistent work folder would belong to whichever project came first."""
    free: set[int] = set()
    first = stable_id("stw-p1", lambda n: n in free)
    assert stable_id("stw-p1", lambda n: False) == first  # the same on every machine
    assert STABLE_ID_BASE <= first < STABLE_ID_BASE + STABLE_ID_SPAN
    assert stable_id("stw-p2", lambda n: False) != first
    # a collision with someone else's id moves to the next free one, never onto a taken id
    taken = {first, STABLE_ID_BASE + (first - STABLE_ID_BASE + 1) % STABLE_ID_SPAN}
    moved = stable_id("stw-p1", lambda n: n in taken)
    assert moved not in taken and moved == STABLE_ID_BASE + (first - STABLE_ID_BASE + 2) % STABLE_ID_SPAN


def test_a_created_user_has_its_stable_uid_and_a_group_of_the_same_id() -> None:
    project = f"uidtest-{uuid.uuid4().hex[:8]}"
    name = user_name(project)
    try:
        user = ensure_user(project)
        want = stable_id(name, lambda n: False)
        # on this machine nothing else holds that id (else it would be the next free one)
        assert (user.name, user.uid, user.gid) == (name, want, want)
        assert grp.getgrgid(user.gid).gr_name == name and pwd.getpwnam(name).pw_shell == "/usr/sbin/nologin"
        assert ensure_user(project) == user  # found, not made again
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", name], check=False, capture_output=True)
