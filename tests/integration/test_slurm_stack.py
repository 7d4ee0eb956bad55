"""The whole stack on a real Slurm cluster (issue 23), as `steward up --executor slurm` starts it: Kafka,
PostgreSQL, Temporal and Steward's processes with the Slurm executor, on the session's cluster (infra/slurm.sh:
2 nodes x 8 GPUs). It replaces the stack's processes and needs a store with no other nodes than Slurm's, so
`make test` runs this file alone, in a slot of its own, after the rest of the suite (Makefile SLURM_STACK_TEST).

- a job submitted through Steward runs in Slurm as the project's user; a node Slurm marks down becomes a node
  event (unhealthy) and ready again when Slurm resumes it; `steward node drain` drains the node in Slurm and
  `steward node resume` resumes it there;
- jobs submitted to Slurm outside Steward are foreign load: their GPUs are busy for Steward, which places
  around them and never touches them;
- Steward's delivered GPU-seconds per project agree with Slurm's job-completion log within 1 %, a preempted
  and requeued job included."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.config import Settings
from steward.executor.slurm_commands import parse_jobcomp, parse_jobs, parse_nodes
from tests.integration.conftest import REPO, slurm, steward
from tests.integration.test_slurm_executor import SAMPLE, foreign_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # the stack starts first (minutes when loaded)

SCENARIO = REPO.parents[0] / "shared" / "data" / "scenarios" / "philly.yaml"


@pytest.fixture(scope="module")
def slurm_stack(slurm_cluster: Path, real_services: None) -> Iterator[dict[str, Any]]:
    """The stack with the Slurm executor (`bring_up(..., executor="slurm")`, what `steward up --executor
    slurm` runs) on the session's cluster (SLURM_CONF), the allocation tree of the Philly scenario and no other
    nodes than Slurm's, in the cluster `hpc` (`steward up --cluster hpc`, ADR 0085). The executor polls Slurm
    every 0.5 s."""
    import os

    from steward.cli.stack import bring_up
    from steward.infra.processes import OWN_PROCESSES, Paths, stop_own

    settings = Settings()
    os.environ["STEWARD_SLURM_POLL_S"] = "0.5"
    info = bring_up(settings, postgres=True, executor="slurm", cluster="hpc")
    try:
        steward("tree", "apply", str(SCENARIO))
        wait_for(lambda: node_states() == {"slurm0": "ready", "slurm1": "ready"}, timeout=90)
        wait_for(lambda: {n["cluster"] for n in nodes().values()} == {"hpc"}, timeout=30)
        yield info
    finally:
        for name in reversed(OWN_PROCESSES):
            stop_own(name, Paths(settings.run_dir))
        os.environ.pop("STEWARD_SLURM_POLL_S", None)


def show(job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = json.loads(steward("job", "show", job_id, "--output", "json").stdout)
    return job


def nodes() -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in json.loads(steward("node", "list", "--output", "json").stdout)}


def node_states() -> dict[str, str]:
    return {n: v["state"] for n, v in nodes().items()}


def submit(project: str, gpus: int, *command: str, min_runtime: int = 60, resumable: bool = False) -> str:
    out = steward("submit", "--project", project, "--gpus", str(gpus), "--min-runtime", str(min_runtime),
                  *(["--resumable"] if resumable else []), "--output", "json", "--", *command)
    job_id: str = json.loads(out.stdout)["id"]
    return job_id


def ended(job_id: str) -> bool:
    return str(show(job_id)["state"]) in {"COMPLETED", "FAILED", "CANCELLED"}


def slurm_jobs(conf: Path, job_id: str) -> list[Any]:
    """The Slurm jobs of a Steward job's attempts (named steward-<job>-a<attempt>), in submission order."""
    return sorted((j for j in parse_jobs(slurm(conf, "scontrol", "-o", "show", "job"))
                   if j.name.startswith(f"steward-{job_id}-a")), key=lambda j: j.job_id)


def test_through_steward_a_job_runs_in_slurm_and_slurm_downs_become_node_events(
        slurm_stack: dict[str, Any], cluster: Path) -> None:
    job_id = submit("ee9e8c", 2, "sh", "-c", 'echo "node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"')
    wait_for(lambda: ended(job_id), timeout=120)
    job = show(job_id)
    assert job["state"] == "COMPLETED", job
    assert [e["type"] for e in job["events"]] == ["JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted"]
    ((node, gpus),) = job["assignments"].items()
    (slurm_job,) = slurm_jobs(cluster, job_id)
    assert (slurm_job.state, slurm_job.nodes, slurm_job.user) == ("COMPLETED", (node,), "stw-ee9e8c")
    assert len(gpus) == 2

    slurm(cluster, "scontrol", "update", "NodeName=slurm1", "State=DOWN", "Reason=psu failure")
    wait_for(lambda: node_states()["slurm1"] == "unhealthy", timeout=60)
    slurm(cluster, "scontrol", "update", "NodeName=slurm1", "State=RESUME")
    wait_for(lambda: node_states()["slurm1"] == "ready", timeout=60)


def executor_metrics() -> dict[str, float]:
    """The samples the stack's executor serves on its metrics port (`steward up`: the base port + 3), by name
    with labels, after `/ready` answered 200."""
    import httpx

    from steward.metrics import metrics_urls

    url = metrics_urls(Settings())["executor"]
    assert httpx.get(url.replace("/metrics", "/ready"), timeout=10).status_code == 200
    samples = {}
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def assert_rounds_served(executor_id: str) -> None:
    """Issue 22: the executor serves `/metrics` as the node agent does, with its rounds counted and timed."""
    first = executor_metrics()
    ok = f'steward_executor_rounds_total{{executor="{executor_id}",outcome="ok"}}'
    assert first.get(ok, 0) > 0, sorted(k for k in first if k.startswith("steward_executor"))
    assert first[f'steward_executor_round_seconds_count{{executor="{executor_id}"}}'] >= first[ok]
    assert first[f'steward_executor_heartbeats_sent_total{{executor="{executor_id}"}}'] >= 1
    assert f'steward_executor_jobs{{executor="{executor_id}"}}' in first
    assert any(k.startswith("steward_build_info{") and 'process="executor"' in k for k in first), first
    wait_for(lambda: executor_metrics()[ok] > first[ok], timeout=30)  # a round every poll


def test_the_slurm_executor_serves_its_rounds_on_metrics(slurm_stack: dict[str, Any]) -> None:
    assert_rounds_served(Settings().executor_id)


def test_a_drain_and_a_resume_through_steward_reach_slurm(slurm_stack: dict[str, Any], cluster: Path) -> None:
    def slurm_node(name: str) -> Any:
        return next(n for n in parse_nodes(slurm(cluster, "scontrol", "-o", "show", "node")) if n.name == name)

    steward("node", "drain", "slurm0", "--reason", "firmware update")
    wait_for(lambda: slurm_node("slurm0").drained_by_steward, timeout=60)
    assert slurm_node("slurm0").reason == "steward: firmware update"  # the operator's reason (ADR 0085)
    assert node_states()["slurm0"] == "draining"
    steward("node", "resume", "slurm0", "--reason", "firmware done")
    wait_for(lambda: "DRAIN" not in slurm_node("slurm0").flags, timeout=60)  # the NodeResume workflow
    # slurmctld pings a resumed node before it counts as responding again (IDLE* for a moment)
    wait_for(lambda: slurm_node("slurm0").available and node_states()["slurm0"] == "ready", timeout=60)


def test_steward_places_around_foreign_slurm_jobs_and_never_touches_them(
        slurm_stack: dict[str, Any], cluster: Path) -> None:
    whole = foreign_job(cluster, "slurm0", 8)  # a lab member's sbatch jobs: all of slurm0, half of slurm1
    half = foreign_job(cluster, "slurm1", 4)
    wait_for(lambda: {n: v["foreignGpus"] for n, v in nodes().items()} == {"slurm0": 8, "slurm1": 4}, timeout=60)
    assert {n: v["freeGpus"] for n, v in nodes().items()} == {"slurm0": 0, "slurm1": 4}

    first = submit("7f04ca", 4, "sleep", "20")
    wait_for(lambda: show(first)["state"] == "RUNNING", timeout=120)
    assert list(show(first)["assignments"]) == ["slurm1"]  # the only node with 4 GPUs no one holds
    second = submit("7f04ca", 4, "sleep", "1")  # no room left: waits in Steward's queue, not in Slurm's
    freed_at = time.time()
    slurm(cluster, "scancel", str(whole))  # its owner ends the whole-node job
    wait_for(lambda: ended(second), timeout=120)
    job = show(second)
    assert job["state"] == "COMPLETED" and list(job["assignments"]) == ["slurm0"]
    placed = [e for e in job["events"] if e["type"] == "JobPlaced"]
    assert len(placed) == 1 and placed[0]["recordedAt"] > freed_at  # placed only once slurm0 was free

    wait_for(lambda: ended(first), timeout=120)
    (other,) = parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job", str(half)))
    assert (other.state, other.user) == ("RUNNING", "nobody")  # neither preempted, requeued nor cancelled
    wait_for(lambda: nodes()["slurm1"]["foreignGpus"] == 4 and nodes()["slurm0"]["foreignGpus"] == 0, timeout=60)


def delivered(project: str) -> float:
    report = json.loads(steward("report", "budget", "--periods", "2", "--output", "json").stdout)
    return float(sum(a["delivered"] for p in report["periods"] for a in p["allocations"] if a["name"] == project))


def test_stewards_delivered_gpu_seconds_agree_with_slurms_job_completion_log(
        slurm_stack: dict[str, Any], cluster: Path) -> None:
    project = "103959"
    plain = [submit(project, 2, "sleep", "12", min_runtime=0), submit(project, 1, "sleep", "7", min_runtime=0)]
    resumable = submit(project, 2, "python3", str(SAMPLE), "--steps", "300", "--step-s", "0.1", min_runtime=0,
                       resumable=True)
    wait_for(lambda: show(resumable)["state"] == "RUNNING", timeout=120)
    time.sleep(4)  # let it run (and checkpoint) a while before it is preempted
    steward("preempt", resumable, "--reason", "accounting test", "--grace", "30")
    wait_for(lambda: all(ended(j) for j in [*plain, resumable]), timeout=240)
    assert all(show(j)["state"] == "COMPLETED" for j in [*plain, resumable])
    assert [e["type"] for e in show(resumable)["events"]].count("JobPreempted") == 1
    attempts = slurm_jobs(cluster, resumable)
    assert len(attempts) == 2  # preempted, then requeued by Steward as a new Slurm job that completed

    names = {f"steward-{j}-a{a}" for j in [*plain, resumable] for a in (1, 2)}
    conf_dir = cluster.parent
    wait_for(lambda: len([c for c in parse_jobcomp((conf_dir / "jobcomp.log").read_text()) if c.name in names])
             == 4, timeout=60)
    records = [c for c in parse_jobcomp((conf_dir / "jobcomp.log").read_text()) if c.name in names]
    assert {c.user for c in records} == {f"stw-{project}"}
    # the GPUs each held, from the controller's record of the job (jobcomp/filetxt names them only with slurmdbd)
    gpus = {j.job_id: j.gpus for j in parse_jobs(slurm(cluster, "scontrol", "-o", "show", "job"))}
    assert sorted(gpus[c.job_id] for c in records) == [1, 2, 2, 2]
    slurm_gpu_s = sum(c.seconds * gpus[c.job_id] for c in records)
    assert slurm_gpu_s > 0
    # Steward's figures are as of a log position (ADR 0075): the window ends when the head was recorded, and the
    # head's own batch counts once the log moves on (the executors' next heartbeat). Until then a job whose
    # completion is in that batch still reads as running up to it (seen: +1.8 GPU-s, a completion recorded 0.9 s
    # after Slurm's EndTime on a 2-GPU job). So the figures are read until they stop moving.
    seen: list[float] = []

    def settled() -> bool:
        seen.append(delivered(project))
        return len(seen) >= 2 and seen[-1] == seen[-2] and abs(seen[-1] - slurm_gpu_s) <= 0.01 * slurm_gpu_s

    try:
        wait_for(settled, timeout=90)
    except AssertionError:
        timeline = {j: [(e["type"], e["recordedAt"], {k: v for k, v in (e.get("payload") or {}).items()
                                                      if k in ("attempt", "started_at", "ended_at")})
                        for e in show(j)["events"]] for j in [*plain, resumable]}
        raise AssertionError(f"Steward's delivered GPU-s {seen[-3:]} against Slurm's {slurm_gpu_s}: {records} "
                             f"{timeline}") from None
