"""The Slurm executor's attempt records keep a Slurm job id as their `pid`: no node agent may read one as a
process of this machine (it would stop whatever process group has that number as an orphan)."""

from __future__ import annotations

import os
from pathlib import Path

from steward.config import Settings
from steward.executor.attempts import AttemptRecord, alive, process_start_time
from steward.executor.settings import ExecutorSettings
from steward.executor.slurm import SlurmExecutor


def test_a_slurm_record_is_never_a_live_process_even_when_its_number_is_one() -> None:
    pid, started = os.getpid(), process_start_time(os.getpid())  # a process that certainly runs
    assert alive(AttemptRecord("j", 1, ["true"], {}, "/ck", pid=pid, create_time=started))
    assert not alive(AttemptRecord("j", 1, ["true"], {}, "/ck", pid=pid, create_time=started,
                                   extra={"slurm_job": pid}))


def test_a_record_without_the_shim_s_start_time_or_naming_init_is_no_live_process() -> None:
    """Its callers signal the pid's process group: only a pid whose start time matches is ours."""
    pid, started = os.getpid(), process_start_time(os.getpid())
    assert not alive(AttemptRecord("j", 1, ["true"], {}, "/ck", pid=pid))  # no start time recorded
    assert not alive(AttemptRecord("j", 1, ["true"], {}, "/ck", pid=pid, create_time=started - 60))
    assert not alive(AttemptRecord("j", 1, ["true"], {}, "/ck", pid=1, create_time=process_start_time(1)))


def test_the_slurm_executor_keeps_its_records_apart_from_the_node_agent_s(tmp_path: Path) -> None:
    settings = Settings(run_dir=tmp_path, executor_id="local")
    executor = SlurmExecutor(settings, publisher=None, options=ExecutorSettings(isolation="none"))  # type: ignore[arg-type]
    assert executor.root == tmp_path / "executor-slurm" / "local"
    assert not executor.root.is_relative_to(tmp_path / "executor")


def test_a_slurm_session_is_told_where_to_publish_its_address_and_the_record_keeps_its_slurm_job(
        tmp_path: Path) -> None:
    """ADR 0055: under Slurm the session's environment names the same per-attempt file in its working folder
    as under the node agent, and the record remembers both that file and the Slurm job id."""
    from steward.executor.session_address import ADDRESS_ENV
    from steward_workflows.payloads import JobRunInput

    seen: list[dict[str, str]] = []

    def runner(argv: list[str], env: dict[str, str]) -> str:
        seen.append(dict(env))
        return "4242;cluster\n"

    settings = Settings(run_dir=tmp_path, executor_id="slurm")
    executor = SlurmExecutor(settings, publisher=None, options=ExecutorSettings(isolation="none"),  # type: ignore[arg-type]
                             runner=runner)
    run = JobRunInput(job_id="s1", attempt=2, executor="slurm", command=["sleep", "1"], assignments={"n1": [0]},
                      job_class="interactive", project="p1")
    rec = executor._submit(run, None)
    (env,) = seen
    expected = str(executor.work_root / "s1" / "steward-session-address-2")
    assert env[ADDRESS_ENV] == expected
    assert rec.pid == 4242 and rec.extra == {"address_file": expected, "slurm_job": 4242}
    batch = JobRunInput(job_id="b1", attempt=1, executor="slurm", command=["true"], assignments={"n1": [0]},
                        project="p1")
    executor._submit(batch, None)
    assert ADDRESS_ENV not in seen[-1]
