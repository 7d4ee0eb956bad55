"""Two clusters behind two executors on the real stack (issue 25 "Integration: two clusters behind two
executors on the real stack, a job routed, preempted and resumed on the other cluster from its checkpoint";
ADR 0057, 0068): Kafka, PostgreSQL, Temporal and Steward's processes as `steward up` starts them, plus a second
node agent, each agent serving its own cluster only (STEWARD_EXECUTOR_NODES):

- `jupiter` (one node of 4 A100) on the stack's node agent `local`;
- `ceres` (one node of 2 H100) on a second node agent `ceres`, enrolled as an operator adds an executor
  (`infra/kafka.sh add-executor ceres`), both registered by one `steward cluster apply` of a `clusters:`
  file that names each cluster's executor.

Asserted from the event log: a job asking for H100 is placed on ceres with the routing reason as evidence; a
resumable job accepting A100 or H100 is preempted when its first cluster is drained (the drain's preemption:
checkpoint request, grace, requeue), and its next attempt is routed to the other cluster, run by the other
agent, and resumes from the checkpoint the first attempt saved; the same move made by the policy itself, each
way (a funded job of a less served allocation pinned to the first cluster: a fair-share preemption with its
strict-improvement evidence, then the resume on the other cluster); no GPU is ever held by two attempts at once.

It registers its own clusters and needs a store with no other nodes (routing sees every registered cluster):
`make test` runs it alone, in a slot of its own, like the Slurm and Kubernetes whole-stack tests.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.executor.isolation import BASIC_PATH
from tests.integration.conftest import REPO, kill_leftover_jobs, steward

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # the stack starts first (minutes when loaded)

SCENARIO = REPO.parent / "shared" / "data" / "scenarios" / "philly.yaml"  # the allocation tree
SAMPLE = REPO / "examples" / "resumable_train.py"
PYTHON = shutil.which("python3", path=BASIC_PATH) or "python3"  # jobs run as their project's OS user
PROJECT = "ee9e8c"
SECOND = "ceres"  # the second node agent's executor id, and its cluster's name
CLUSTERS = f"""\
clusters:
  jupiter:
    nodes: 1
    gpus_per_node: 4
    gpu_model: A100
    executor: local
  {SECOND}:
    nodes: 1
    gpus_per_node: 2
    gpu_model: H100
    executor: {SECOND}
gpu_models:
  H100: 1.0
  A100: 0.55
"""
NODE = {"jupiter": "jupiter-node000", SECOND: f"{SECOND}-node000"}
GPUS = {"jupiter": 4, SECOND: 2}
OTHER = "7f04ca"  # an allocation beside PROJECT's under `research` (philly.yaml), with nothing delivered
AGENT = {"jupiter": "local", SECOND: SECOND}
AGENT_ENV = {"STEWARD_EXECUTOR_TICK_S": "0.5"}
ENDS = {"JobPreempted", "JobCompleted", "JobFailed", "JobCancelled", "JobLost", "JobRequeued"}


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Log:
    """The event log, read from the store as an auditor would."""

    def __init__(self, url: str) -> None:
        from steward.store.eventstore import EventStore

        self.store = EventStore.from_url(url)

    def events(self, job_id: str) -> list[Any]:
        return self.store.stream(f"job-{job_id}")

    def of(self, job_id: str, kind: str) -> list[dict[str, Any]]:
        return [e.payload for e in self.events(job_id) if e.type == kind]

    def wait(self, job_id: str, kind: str, count: int = 1, timeout: float = 180) -> list[dict[str, Any]]:
        return list(wait_for(lambda: len(got := self.of(job_id, kind)) >= count and got, timeout,
                             f"{count} x {kind} of {job_id}; it has {[e.type for e in self.events(job_id)]}"))


@pytest.fixture(scope="module")
def two_clusters(real_services: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    """The stack (its node agent `local` serving jupiter's nodes only), a second node agent `ceres` serving
    ceres's only, the Philly allocation tree and the two clusters applied."""
    from steward.cli.stack import bring_up
    from steward.config import Settings
    from steward.infra.processes import OWN_PROCESSES, Paths, infra_script, stop_own

    settings = Settings()
    paths = Paths(settings.run_dir)
    saved = {k: os.environ.get(k) for k in ("STEWARD_EXECUTOR_NODES", *AGENT_ENV)}
    os.environ.update(AGENT_ENV | {"STEWARD_EXECUTOR_NODES": "jupiter-*"})
    agent: subprocess.Popen[bytes] | None = None
    try:
        bring_up(settings, postgres=True, supervise=False)
        infra_script("kafka", "add-executor", SECOND, settings=settings)  # the operator enrols the new agent
        stack_env = dict(line.split("=", 1) for line in paths.stack_env.read_text().splitlines() if "=" in line)
        log_file = paths.log_file(f"executor-{SECOND}").open("ab")
        agent = subprocess.Popen(
            [sys.executable, "-m", "steward.cli.main", "run", "executor"], cwd=REPO, stdout=log_file,
            stderr=subprocess.STDOUT, start_new_session=True,
            env=os.environ | stack_env | {"STEWARD_RUN_DIR": str(settings.run_dir), "STEWARD_COMPONENT": "executor",
                                          "STEWARD_EXECUTOR_ID": SECOND, "STEWARD_EXECUTOR_NODES": f"{SECOND}-*",
                                          "STEWARD_METRICS_PORT": "off"})
        steward("tree", "apply", str(SCENARIO))
        file = tmp_path_factory.mktemp("clusters") / "two-clusters.yaml"
        file.write_text(CLUSTERS)
        steward("cluster", "apply", str(file))
        nodes = {n["id"]: n for n in json.loads(steward("node", "list", "--output", "json").stdout)}
        assert {(n["id"], n["cluster"], n["gpuModel"], n["executor"]) for n in nodes.values()} == {
            (NODE["jupiter"], "jupiter", "A100", "local"), (NODE[SECOND], SECOND, "H100", SECOND)}, nodes
        yield Log(Settings().resolved_store_url)  # the stack's PostgreSQL (stack.env, written by bring_up)
    finally:
        if agent is not None:
            os.killpg(agent.pid, signal.SIGTERM)
            try:
                agent.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait(10)
        for name in reversed(OWN_PROCESSES):
            stop_own(name, paths)
        kill_leftover_jobs(Path(settings.run_dir))
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def submit(*args: str, steps: int, resumable: bool = False, project: str = PROJECT, gpus: int = 1,
           min_runtime: float = 0) -> str:
    out = steward("submit", "-p", project, "-g", str(gpus), "--min-runtime", str(min_runtime), "-o", "json",
                  *(["--resumable"] if resumable else []), *args, "--",
                  PYTHON, str(SAMPLE), "--steps", str(steps), "--step-s", "0.05", "--work-fraction", "0.1",
                  "--checkpoint-every", "10")
    return str(json.loads(out.stdout)["id"])


def queue_on(cluster: str) -> list[dict[str, Any]]:
    """`steward queue --cluster CLUSTER`: the jobs waiting that may run there, with their position there."""
    return list(json.loads(steward("queue", "--cluster", cluster, "--output", "json").stdout)["entries"])


def attempt_log(agent: str, job_id: str, attempt: int) -> str:
    from steward.config import Settings

    path = Path(Settings().run_dir) / "executor" / agent / "jobs" / job_id / f"attempt-{attempt}.log"
    return path.read_text() if path.exists() else ""


def cluster_of(placed: dict[str, Any]) -> str:
    (node,) = placed["assignments"]
    return next(c for c, n in NODE.items() if n == node)


def test_a_job_asking_for_a_model_only_one_cluster_has_is_routed_there_with_the_reason(two_clusters: Log) -> None:
    job = submit("--gpu-model", "H100", steps=20)
    (placed,) = two_clusters.wait(job, "JobPlaced")
    assert placed["assignments"] == {NODE[SECOND]: [placed["assignments"][NODE[SECOND]][0]]}, placed
    assert placed["executor"] == SECOND
    routing = placed["evidence"]["routing"]
    assert routing["cluster"] == SECOND and routing["models"] == ["H100"], routing
    assert routing["accepts"] == {"gpu_models": ["H100"], "clusters": []}, routing
    assert [c["cluster"] for c in routing["candidates"]] == [SECOND], routing  # jupiter has no H100
    assert routing["reason"].startswith(f"placed on {SECOND} (H100): would wait 0 s there"), routing
    two_clusters.wait(job, "JobCompleted", timeout=120)
    assert "done at step 20" in attempt_log(SECOND, job, 1)  # the second agent ran it, as a real process


@pytest.mark.parametrize("here", ["jupiter", SECOND])
def test_a_job_preempted_by_the_policy_for_funded_work_resumes_on_the_other_cluster_from_its_checkpoint(
        two_clusters: Log, here: str) -> None:
    """The issue's "a job routed, preempted and resumed on the other cluster from its checkpoint", by the policy
    itself, each way: a funded resumable job open to both clusters is routed to `here` (the other cluster is
    busy until it starts there); a funded job of a less served allocation (7f04ca, under the same parent)
    pinned to `here` and needing all its GPUs waits out the first one's protection, then the scheduler preempts
    it for fair share (strict improvement on that cluster, ADR 0071/0076): checkpoint request, the job saves
    and stops, requeue with its checkpoint; its next attempt can only go to the other cluster (the room is its
    beneficiary's, ADR 0028), where the other agent resumes it from the step it saved."""
    log = two_clusters
    there = next(c for c in NODE if c != here)
    # the other cluster busy (unfunded work, not charged, pinned there) until the job has started `here`
    blocker = submit("--cluster", there, steps=0, gpus=GPUS[there])
    log.wait(blocker, "JobStarted")
    victim = submit("--cluster", f"jupiter,{SECOND}", steps=0, resumable=True, min_runtime=30)
    (first,) = log.wait(victim, "JobPlaced")
    assert cluster_of(first) == here and first["funded"], first
    routing = first["evidence"]["routing"]
    assert routing["cluster"] == here and set(routing["accepts"]["clusters"]) == set(NODE), routing
    log.wait(victim, "JobStarted")
    steward("cancel", blocker, "--reason", "the other cluster is free again")
    log.wait(blocker, "JobCancelled", timeout=120)
    log.wait(victim, "CheckpointSaved", timeout=120)  # every 10 steps; seen by the agent's watch

    # funded work of another allocation pinned to the victim's cluster, too big for the GPUs left there
    beneficiary = submit("--cluster", here, steps=20, project=OTHER, gpus=GPUS[here], min_runtime=5)
    # while the victim is protected it waits in `here`'s queue, and only there (`steward queue --cluster`)
    wait_for(lambda: [(e["job"] or {}).get("id") for e in queue_on(here)] == [beneficiary], 25,
             f"{beneficiary} alone in {here}'s queue")
    assert beneficiary not in [(e["job"] or {}).get("id") for e in queue_on(there)]
    assert queue_on(here)[0]["positionInCluster"] == 1
    try:
        (asked,) = log.wait(victim, "JobPreemptionRequested", timeout=300)  # after the victim's 30 s protection
    except AssertionError as e:  # say why the beneficiary waits, as the scheduler explains it
        raise AssertionError(f"{e}; {steward('why', beneficiary, check=False).stdout}") from None
    assert (asked["reason"], asked["attempt"], asked["for_job_id"]) == ("fair_share", 1, beneficiary), asked
    evidence = asked["evidence"]
    assert evidence["rule"] == "strict_improvement" and evidence["funded"], evidence
    assert evidence["waiting"]["job_id"] == beneficiary and evidence["waiting"]["project"] == OTHER, evidence
    assert evidence["plan"]["nodes"] == [NODE[here]], evidence["plan"]
    assert asked["requested_at"] >= evidence["protected_until"], asked  # never inside its protection
    (stopped,) = log.wait(victim, "JobPreempted", timeout=240)  # it saves when asked and exits (grace 120 s)
    assert stopped["requeue"] and stopped["reason"] == "fair_share", stopped

    second = log.wait(victim, "JobPlaced", count=2, timeout=240)[1]
    (taken,) = log.wait(beneficiary, "JobPlaced", timeout=240)
    assert cluster_of(taken) == here and len(taken["assignments"][NODE[here]]) == GPUS[here], taken
    # routed to the other cluster, run by the other agent, from the checkpoint the first attempt saved
    assert cluster_of(second) == there and second["executor"] == AGENT[there] != first["executor"], second
    assert second["attempt"] == 2 and second["evidence"]["routing"]["cluster"] == there, second
    (requeued,) = log.of(victim, "JobRequeued")
    saved = [c["path"] for c in log.of(victim, "CheckpointSaved")]
    assert requeued["resume"] and requeued["resume_from"] == saved[-1] == second["resume_from"], (requeued, saved)
    assert stopped["checkpoint_path"] == second["resume_from"], (stopped, second)
    log.wait(victim, "JobStarted", count=2, timeout=240)
    step = int(wait_for(lambda: "checkpointed at step " in (t := attempt_log(AGENT[here], victim, 1)) and t,
                        60, "the first attempt's last checkpoint in its log")
               .rsplit("checkpointed at step ", 1)[1].split()[0])
    text = wait_for(lambda: f"step {step + 10}\n" in (t := attempt_log(AGENT[there], victim, 2)) and t, 120,
                    "the second attempt's progress past its resume point")
    assert text.splitlines()[0] == f"resumed from step {step}" and step >= 10, text[:300]
    log.wait(beneficiary, "JobCompleted", timeout=240)
    assert "done at step 20" in attempt_log(AGENT[here], beneficiary, 1)

    steward("cancel", victim, "--reason", "the test is over")  # it runs for ever: its move is what was tested
    log.wait(victim, "JobCancelled", timeout=120)
    assert [e.type for e in log.events(victim)].count("JobPreemptionRequested") == 1


def test_a_resumable_job_is_preempted_and_resumes_on_the_other_cluster_from_its_checkpoint(two_clusters: Log) -> None:
    log = two_clusters
    job = submit("--gpu-model", "A100,H100", steps=400, resumable=True)
    (first,) = log.wait(job, "JobPlaced")
    here = cluster_of(first)
    there = next(c for c in NODE if c != here)
    routing = first["evidence"]["routing"]
    assert routing["cluster"] == here and {c["cluster"] for c in routing["candidates"]} == set(NODE), routing
    assert routing["accepts"]["gpu_models"] == ["A100", "H100"], routing
    log.wait(job, "JobStarted")
    log.wait(job, "CheckpointSaved", timeout=120)  # every 10 steps; seen by the agent's watch
    wait_for(lambda: "step 40\n" in attempt_log(AGENT[here], job, 1), 120, "the first attempt's step 40")

    # its cluster closes: the scheduler preempts it (checkpoint request, grace, requeue: the drain's stop) and
    # its next attempt can only go to the other cluster. (A `steward preempt` before the drain raced it: the
    # requeued job was placed on its first cluster again before the drain was recorded.)
    steward("node", "drain", NODE[here], "--reason", f"{here} is closed for maintenance")
    (asked,) = log.wait(job, "JobPreemptionRequested")
    assert (asked["reason"], asked["attempt"]) == ("drain", 1), asked
    second = log.wait(job, "JobPlaced", count=2)[1]
    log.wait(job, "JobCompleted", timeout=240)

    # routed to the other cluster, run by the other agent
    assert cluster_of(second) == there and second["executor"] == AGENT[there] != first["executor"], second
    assert second["attempt"] == 2 and second["evidence"]["routing"]["cluster"] == there, second
    assert second["evidence"]["routing"]["reason"].startswith(f"placed on {there} ("), second["evidence"]
    # the checkpoint carried across: the requeue names the first attempt's checkpoint, the second placement
    # resumes from it, and the second agent's process started from the step the first one saved
    (requeued,) = log.of(job, "JobRequeued")
    saved = [c["path"] for c in log.of(job, "CheckpointSaved")]
    assert requeued["resume"] and requeued["resume_from"] == saved[-1] == second["resume_from"], (requeued, saved)
    # the step the first attempt saved when asked (its checkpoint file now holds the second attempt's last step)
    step = int(attempt_log(AGENT[here], job, 1).rsplit("checkpointed at step ", 1)[1].split()[0])
    text = attempt_log(AGENT[there], job, 2)
    assert text.splitlines()[0] == f"resumed from step {step}" and step >= 40, text[:300]
    assert "done at step 400" in text
    assert [e.type for e in log.events(job)].count("JobStarted") == 2
    assert log.of(job, "JobPreempted")[0]["attempt"] == 1


def test_no_gpu_is_ever_held_by_two_attempts_at_once(two_clusters: Log) -> None:
    """One attempt per GPU (ADR 0058), across both clusters, from the whole log: a placement holds its GPUs
    from its JobPlaced until the attempt's end (preempted, ended, lost, requeued) or the job's next placement."""
    holding: dict[tuple[str, int], tuple[str, int]] = {}  # (node, GPU) -> (job, attempt)
    held_by: dict[str, list[tuple[str, int]]] = {}
    placements = 0
    for e in log_events(two_clusters):
        job = str(e.payload.get("job_id", ""))
        if e.type == "JobPlaced":
            placements += 1
            for slot in held_by.pop(job, []):
                holding.pop(slot, None)
            slots = [(node, g) for node, gpus in e.payload["assignments"].items() for g in gpus]
            for slot in slots:
                assert slot not in holding, f"{slot} placed for {job} attempt {e.payload['attempt']} " \
                                            f"while {holding[slot]} holds it"
                holding[slot] = (job, int(e.payload["attempt"]))
            held_by[job] = slots
        elif e.type in ENDS:
            for slot in held_by.pop(job, []):
                holding.pop(slot, None)
    assert placements >= 3


def log_events(log: Log) -> list[Any]:
    return list(log.store.iterate())
