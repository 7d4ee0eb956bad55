"""The Slurm executor's reading of Slurm (issue 23), on outputs recorded from a real slurmctld 22.05
(infra/slurm.sh; tests/unit/executor/slurm_outputs): jobs, nodes, GRES, host lists, topology.conf, and what an
attempt's outcome is for each way Slurm ends a job."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from steward.executor.attempts import AttemptRecord
from steward.executor.slurm import down_nodes, foreign_load, gpus_per_node, outcome_of, sbatch_argv
from steward.executor.slurm_commands import (
    SlurmJob,
    expand_hostlist,
    node_state_flags,
    parse_gres,
    parse_jobcomp,
    parse_jobs,
    parse_nodes,
    parse_record,
    slurm_time,
)
from steward.executor.slurm_inventory import TopologyError, parse_topology, registrations
from steward_workflows.payloads import JobRunInput

RECORDED = Path(__file__).parent / "slurm_outputs"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


JOB_CASES = [
    # file, state, exit code, signal, nodes
    ("job-running.txt", "RUNNING", 0, 0, ("slurm0",)),
    ("job-failed.txt", "FAILED", 3, 0, ("slurm1",)),
    ("job-signalled-completed.txt", "COMPLETED", 0, 0, ("slurm0", "slurm1")),
    ("job-cancelled.txt", "CANCELLED", 0, 15, ("slurm0",)),
]


@pytest.mark.parametrize(("name", "state", "code", "sig", "nodes"), JOB_CASES, ids=[c[0] for c in JOB_CASES])
def test_jobs_read_from_scontrol(name: str, state: str, code: int, sig: int, nodes: tuple[str, ...]) -> None:
    (job,) = parse_jobs(recorded(name))
    assert (job.state, job.exit_code, job.exit_signal, job.nodes, job.user) == (state, code, sig, nodes, "root")
    assert job.name.startswith("steward-j")


def test_times_are_slurms_own_and_a_pending_jobs_forecast_is_none() -> None:
    (running,) = parse_jobs(recorded("job-running.txt"))
    assert running.start_time == datetime(2026, 12, 2, 7, 14, 27).timestamp() and running.end_time == 0.0
    (failed,) = parse_jobs(recorded("job-failed.txt"))
    assert failed.end_time >= failed.start_time > 0
    pending = recorded("job-running.txt").replace("JobState=RUNNING", "JobState=PENDING")
    assert parse_jobs(pending)[0].start_time == 0.0
    assert slurm_time("Unknown") == slurm_time("None") == slurm_time("") == 0.0


def test_values_with_spaces_and_equals_signs_stay_whole() -> None:
    (node,) = [r for r in map(parse_record, recorded("nodes-down-drained.txt").splitlines())
               if r["NodeName"] == "slurm0"]
    assert node["OS"] == "Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0"
    assert node["Reason"].startswith("fan failure [root@")
    (job,) = map(parse_record, recorded("job-running.txt").splitlines())
    assert job["TRES"] == "cpu=1,node=1,billing=1" and job["AllocNode:Sid"] == "localhost:12309"
    assert job["Power"] == ""


NODE_CASES = [
    # file, {node: (available, drained by Steward, reason)}
    ("nodes-idle.txt", {"slurm0": (True, False, ""), "slurm1": (True, False, "")}),
    ("nodes-allocated.txt", {"slurm0": (True, False, ""), "slurm1": (True, False, "")}),
    ("nodes-down-drained.txt", {"slurm0": (False, False, "fan failure"), "slurm1": (False, True, "steward: repair")}),
]


@pytest.mark.parametrize(("name", "expected"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_nodes_read_from_scontrol(name: str, expected: dict[str, tuple[bool, bool, str]]) -> None:
    nodes = parse_nodes(recorded(name))
    assert {n.name: (n.available, n.drained_by_steward, n.reason) for n in nodes} == expected
    assert {(n.gpus, n.gpu_model) for n in nodes} == {(8, "sim")}


def test_only_the_nodes_slurm_holds_out_on_its_own_are_down() -> None:
    nodes = parse_nodes(recorded("nodes-down-drained.txt"))
    assert down_nodes(nodes, {"slurm0", "slurm1"}) == ["slurm0"]  # slurm1 is Steward's own drain
    assert down_nodes(nodes, {"slurm1"}) == []  # not registered with Steward: not its to report


def steward_attempt(job_id: str, slurm_job: int, assignments: dict[str, list[int]]) -> AttemptRecord:
    return AttemptRecord(job_id, 1, ["true"], assignments, "/ck", pid=slurm_job)


FOREIGN_CASES = [
    # Steward's attempts (Slurm job 8: 2 GPUs on each of slurm0, slurm1), registered nodes, foreign load;
    # recorded: job 7 (user nobody, 3 GPUs on slurm0) and job 8 running, 6 and the others ended
    ("ours known", [steward_attempt("jx", 8, {"slurm0": [0, 1], "slurm1": [0, 1]})], {"slurm0", "slurm1"},
     {"slurm0": 3}),
    ("ours unknown", [], {"slurm0", "slurm1"}, {"slurm0": 5, "slurm1": 2}),  # a job of no record is foreign
    ("an ended attempt holds nothing", [steward_attempt("s1", 1, {"slurm0": [0, 1]}),
                                        steward_attempt("jx", 8, {"slurm0": [0, 1], "slurm1": [0, 1]})],
     {"slurm0", "slurm1"}, {"slurm0": 3}),
    ("only registered nodes", [steward_attempt("jx", 8, {"slurm0": [0, 1], "slurm1": [0, 1]})], {"slurm1"}, {}),
]


@pytest.mark.parametrize(("name", "records", "registered", "expected"), FOREIGN_CASES,
                         ids=[c[0] for c in FOREIGN_CASES])
def test_foreign_load_is_what_slurm_allocated_less_stewards_own_jobs(
        name: str, records: list[AttemptRecord], registered: set[str], expected: dict[str, int]) -> None:
    nodes = parse_nodes(recorded("nodes-foreign-detailed.txt"))
    assert {n.name: n.gpus_used for n in nodes} == {"slurm0": 5, "slurm1": 2}
    jobs = {j.job_id: j for j in parse_jobs(recorded("jobs-foreign-and-steward.txt"))}
    assert {i for i, j in jobs.items() if j.holding} == {7, 8}
    assert (jobs[7].gpus, jobs[8].gpus) == (3, 4)  # TresPerNode=gres:gpu:N x NumNodes
    assert foreign_load(nodes, jobs, records, registered) == expected


def test_a_node_s_foreign_load_never_exceeds_its_gpus() -> None:
    nodes = parse_nodes(recorded("nodes-foreign-detailed.txt").replace("GresUsed=gpu:sim:5", "GresUsed=gpu:sim:12"))
    assert foreign_load(nodes, {}, [], {"slurm0"}) == {"slurm0": 8}


@pytest.mark.parametrize(("state", "flags"), [
    ("IDLE", {"IDLE"}), ("MIXED+DRAIN", {"MIXED", "DRAIN"}), ("DOWN*", {"DOWN", "NOT_RESPONDING"}),
    ("IDLE*+DRAIN", {"IDLE", "NOT_RESPONDING", "DRAIN"}), ("", set()),
])
def test_node_state_flags(state: str, flags: set[str]) -> None:
    assert node_state_flags(state) == flags


@pytest.mark.parametrize(("gres", "count", "model"), [
    ("gpu:sim:8", 8, "sim"), ("gpu:8", 8, ""), ("gpu:a100:4(S:0-1)", 4, "a100"),
    ("gpu:a:2,gpu:b:2,nic:1", 4, "a"), ("(null)", 0, ""), ("", 0, ""), ("nic:2", 0, ""),
])
def test_gpus_from_gres(gres: str, count: int, model: str) -> None:
    assert (parse_gres(gres).count, parse_gres(gres).model) == (count, model)


@pytest.mark.parametrize(("expr", "names"), [
    ("slurm[0-1]", ["slurm0", "slurm1"]), ("n[01-03]", ["n01", "n02", "n03"]), ("a,b", ["a", "b"]),
    ("gpu[1,3-4],cpu7", ["gpu1", "gpu3", "gpu4", "cpu7"]), ("leaf[0-1]-x", ["leaf0-x", "leaf1-x"]), ("", []),
])
def test_host_lists(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


def test_topology_paths_are_the_switches_from_the_top_down() -> None:
    conf = ("# written by infra/slurm.sh\nSwitchName=leaf0 Nodes=slurm0\nSwitchName=leaf1 Nodes=slurm[1-2]\n"
            "SwitchName=spine Switches=leaf[0-1] LinkSpeed=100\n")
    assert parse_topology(conf) == {"slurm0": ["spine", "leaf0", "slurm0"], "slurm1": ["spine", "leaf1", "slurm1"],
                                    "slurm2": ["spine", "leaf1", "slurm2"]}


@pytest.mark.parametrize(("conf", "message"), [
    ("SwitchName=a Nodes=n0\nSwitchName=b Nodes=n0\n", "under both a and b"),
    ("SwitchName=a Nodes=n0 Switches=b\nSwitchName=b Switches=a\n", "loop"),
])
def test_a_topology_that_is_no_tree_is_named(conf: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_topology(conf)


def test_registrations_keep_slurm_nodes_with_gpus_in_their_place() -> None:
    nodes = parse_nodes(recorded("nodes-idle.txt"))
    regs = registrations(nodes, {"slurm0": ["spine", "leaf0", "slurm0"]}, "hpc")
    assert [(r.node_id, r.gpus, r.gpu_model, r.path, r.executor) for r in regs] == [
        ("slurm0", 8, "sim", ["spine", "leaf0", "slurm0"], "hpc"),
        ("slurm1", 8, "sim", ["hpc-cluster", "slurm1"], "hpc")]


def run(**over: Any) -> JobRunInput:
    fields: dict[str, Any] = {"job_id": "j1", "attempt": 2, "executor": "hpc", "command": ["train", "--x"],
                                 "assignments": {"slurm1": [0, 1], "slurm0": [4, 5]}, "project": "p"}
    return JobRunInput(**(fields | over))


def test_sbatch_pins_the_placement_and_runs_as_the_project_user() -> None:
    argv = sbatch_argv(run(), Path("/x/attempt-2.sbatch"), Path("/w/j1"), 1001, 1002, "gpu")
    assert argv == ["sbatch", "--parsable", "--job-name=steward-j1-a2", "--nodelist=slurm0,slurm1", "--nodes=2",
                    "--ntasks-per-node=1", "--no-requeue", "--chdir=/w/j1", "--output=/w/j1/slurm-attempt-2.log",
                    "--export=ALL", "--gres=gpu:2", "--partition=gpu", "--uid=1001", "--gid=1002",
                    "/x/attempt-2.sbatch"]
    bare = sbatch_argv(run(assignments={"n": []}), Path("/s"), Path("/w"), None, None)
    assert not any(a.startswith(("--gres", "--uid", "--partition")) for a in bare)
    assert gpus_per_node({"a": [0], "b": [0, 1, 2]}) == 3


def rec(killed: bool = False) -> AttemptRecord:
    return AttemptRecord("j1", 1, ["x"], {"slurm0": [0]}, "/ck", pid=7, killed=killed)


def job(state: str, code: int = 0, sig: int = 0) -> SlurmJob:
    return SlurmJob(7, "steward-j1-a1", state, code, sig, ("slurm0",), "stw-p")


OUTCOMES = [
    ("running", rec(), job("RUNNING"), None),
    ("pending", rec(), job("PENDING"), None),
    ("completed", rec(), job("COMPLETED"), (0, "exited", False)),
    ("failed with its code", rec(), job("FAILED", 3), (3, "exited", False)),
    ("failed by a signal", rec(), job("FAILED", 0, 11), (139, "exited", False)),
    ("timeout", rec(), job("TIMEOUT"), (1, "exited", False)),
    ("killed by Steward", rec(killed=True), job("CANCELLED", 0, 9), (-9, "exited", True)),
    ("cancelled by an operator", rec(), job("CANCELLED", 0, 15), (-15, "exited", False)),
    ("node failure", rec(), job("NODE_FAIL"), (-1, "vanished", False)),
    ("forgotten by Slurm", rec(), None, (-1, "vanished", False)),
]


@pytest.mark.parametrize(("name", "attempt", "slurm_job", "expected"), OUTCOMES, ids=[c[0] for c in OUTCOMES])
def test_outcome_of_each_way_slurm_ends_a_job(name: str, attempt: AttemptRecord, slurm_job: SlurmJob | None,
                                               expected: tuple[int, str, bool] | None) -> None:
    out = outcome_of(attempt, slurm_job, 5.0)
    assert (out if out is None else (out.exit_code, out.status, out.killed)) == expected


def test_an_ended_job_ends_when_slurm_says() -> None:
    ended = SlurmJob(7, "steward-j1-a1", "COMPLETED", 0, 0, ("slurm0",), "stw-p", 100.0, 160.0)
    assert outcome_of(rec(), ended, 175.0).ended_at == 160.0  # type: ignore[union-attr]
    assert outcome_of(rec(), job("COMPLETED"), 175.0).ended_at == 175.0  # type: ignore[union-attr]


def test_the_job_completion_log_gives_slurms_own_run_times() -> None:
    """Slurm's record the books are compared with (jobcomp/filetxt): who ran what, from when to when."""
    records = parse_jobcomp(recorded("jobcomp.txt"))
    assert [(c.job_id, c.name, c.user, c.state) for c in records] == [
        (5, "steward-s3-a1", "stw-slurm-p1", "FAILED"), (7, "steward-f1-a1", "stw-slurm-p1", "CANCELLED"),
        (6, "someone-else", "nobody", "CANCELLED")]
    assert records[0].seconds == 4.0 and records[0].start_time == datetime(2026, 12, 2, 11, 16, 32).timestamp()
