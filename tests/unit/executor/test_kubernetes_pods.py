"""The Kubernetes executor's reading of pods and nodes (issue 26): which pods make which job, how a gang's pods
are bound onto a placement, what an attempt's pods say about its end, what inventory a cluster gives Steward."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.commands import ReportSessionAddress
from steward.domain.sessions import session_address_problem
from steward.executor.attempts import AttemptRecord
from steward.executor.kubernetes import KILLED_EXIT_CODE, PREEMPTED_EXIT_CODE, address_report, outcome_of
from steward.executor.kubernetes_inventory import down_nodes, foreign_gpus, foreign_load, registrations, topology_path
from steward.executor.kubernetes_pods import (
    ATTEMPT_LABEL,
    JOB_LABEL,
    PodProblem,
    admission_refusal,
    bindings,
    drain_note,
    exit_code,
    group_new_pods,
    parse_namespace_projects,
    pod_gpus,
    pod_job,
    recreated,
    session_address,
    stop_message,
)


def pod(name: str, gpus: int | str = 1, *, project: str = "vision", ns: str = "team", gang: str = "",
        size: str = "", notes: dict[str, str] | None = None, scheduler: str = "steward", node: str = "",
        phase: str = "Pending", labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta_labels = {"steward.io/project": project} if project else {}
    if gang:
        meta_labels["steward.io/gang"] = gang
    meta_labels |= labels or {}
    meta_notes = dict(notes or {})
    if size:
        meta_notes["steward.io/gang-size"] = size
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": meta_labels,
                         "annotations": meta_notes},
            "spec": {"schedulerName": scheduler, "nodeName": node,
                     "containers": [{"name": "main", "image": "trainer", "command": ["python", "train.py"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("notes", "min_runtime", "resumable"), [
    ({}, 0.0, False),
    ({"steward.io/min-runtime": "90"}, 90.0, False),
    ({"steward.io/min-runtime": "30m", "steward.io/resumable": "true"}, 1800.0, True),
    ({"steward.io/min-runtime": "2h", "steward.io/resumable": "no"}, 7200.0, False),
    ({"steward.io/min-runtime": "1.5m"}, 90.0, False),
])
def test_a_pod_is_a_job_with_its_gpus_and_contract(notes: dict[str, str], min_runtime: float,
                                                    resumable: bool) -> None:
    job = pod_job("k8s", [pod("train-1", 4, notes=notes)])
    assert job.command.job_id == "k8s.team.train-1"
    assert (job.command.project, job.command.gpus) == ("vision", 4)
    assert (job.command.min_runtime_s, job.command.resumable) == (min_runtime, resumable)
    assert job.command.command == ["python", "train.py"]
    assert job.pods == ("team/train-1",)
    # where it came from, which the ledger checks its project against (ADR 0056)
    assert (job.command.from_executor, job.command.from_namespace) == ("k8s", "team")


@pytest.mark.parametrize(("pods", "problem"), [
    ([pod("p", project="")], "names no project"),
    ([pod("p", 0)], "asks for no nvidia.com/gpu"),
    ([pod("p", "1.5")], "whole number of devices"),
    ([pod("p", notes={"steward.io/min-runtime": "soon"})], "must be a duration"),
    ([pod("a", gang="g", size="x")], "needs the annotation steward.io/gang-size"),
    ([pod("a", gang="g", size="3"), pod("b", gang="g", size="3")], "has 2 of its 3 pods"),
    ([pod("a", gang="g", size="2"), pod("b", gang="g", size="2", project="other")], "different projects"),
    ([pod("a"), pod("b")], "one job each"),
])
def test_pods_that_make_no_job_say_why(pods: list[dict[str, Any]], problem: str) -> None:
    with pytest.raises(PodProblem, match=problem):
        pod_job("k8s", pods)


@pytest.mark.parametrize(("ns", "label", "project"), [
    ("team", "vision", "nlp"),   # a mapped namespace charges its project: no label needed
    ("lab", "vision", "vision"),  # an unmapped namespace: the label
])
def test_an_admins_namespace_mapping_names_the_project(ns: str, label: str, project: str) -> None:
    p = pod("x", ns=ns, project=label if ns == "lab" else "")
    assert pod_job("k8s", [p], {"team": "nlp"}).command.project == project


def test_a_label_cannot_charge_another_project_than_its_namespaces() -> None:
    with pytest.raises(PodProblem, match="names project 'vision', but namespace team is project 'nlp'"):
        pod_job("k8s", [pod("x", project="vision")], {"team": "nlp"})


@pytest.mark.parametrize(("text", "expected"), [
    ("", {}), ("team=nlp", {"team": "nlp"}), (" a=x , b=y ,", {"a": "x", "b": "y"}),
])
def test_namespace_mappings_parse(text: str, expected: dict[str, str]) -> None:
    assert parse_namespace_projects(text) == expected


@pytest.mark.parametrize("text", ["team", "=nlp", "team="])
def test_a_bad_namespace_mapping_is_named(text: str) -> None:
    with pytest.raises(PodProblem, match="namespace=project"):
        parse_namespace_projects(text)


def test_a_gang_is_one_job_with_the_sum_of_its_gpus() -> None:
    job = pod_job("k8s", [pod("w1", 8, gang="llm", size="2"), pod("w0", 8, gang="llm", size="2")])
    assert job.command.job_id == "k8s.team.llm"
    assert job.command.gpus == 16
    assert job.pods == ("team/w0", "team/w1")


def test_a_name_that_is_no_valid_id_falls_back_to_the_uid() -> None:
    long = pod("x" * 120)
    long["metadata"]["uid"] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    assert pod_job("k8s", [long]).command.job_id == "k8s.0f1e2d3c4b5a69788796a5b4c3d2e1f0"


def test_only_new_unbound_pods_are_grouped_and_a_gang_stays_together() -> None:
    pods = [pod("a"), pod("b", gang="g", size="2"), pod("c", gang="g", size="2"),
            pod("bound", node="n1"), pod("done", phase="Succeeded"), pod("known", labels={JOB_LABEL: "k8s.x"})]
    groups = group_new_pods(pods)
    assert [[p["metadata"]["name"] for p in g] for g in groups] == [["b", "c"], ["a"]]


@pytest.mark.parametrize(("gpus", "assignments", "expected"), [
    ([4], {"n1": [0, 1, 2, 3]}, {"p0": "n1"}),
    ([8, 8], {"n1": list(range(8)), "n2": list(range(8))}, {"p0": "n1", "p1": "n2"}),
    ([4, 4], {"n1": list(range(8))}, {"p0": "n1", "p1": "n1"}),
    ([2, 6], {"n1": list(range(2)), "n2": list(range(6))}, {"p0": "n1", "p1": "n2"}),
])
def test_a_jobs_pods_fill_the_placement(gpus: list[int], assignments: dict[str, list[int]],
                                        expected: dict[str, str]) -> None:
    assert bindings([f"p{i}" for i in range(len(gpus))], gpus, assignments) == expected


def test_pods_that_do_not_fit_the_placement_are_refused() -> None:
    with pytest.raises(PodProblem, match="no room"):
        bindings(["p0", "p1"], [8, 8], {"n1": list(range(8))})


@given(st.lists(st.integers(1, 8), min_size=1, max_size=6))
def test_a_gang_placed_node_by_node_binds_every_pod_within_each_nodes_gpus(gpus: list[int]) -> None:
    assignments = {f"n{i}": list(range(g)) for i, g in enumerate(gpus)}
    out = bindings([f"p{i}" for i in range(len(gpus))], gpus, assignments)
    assert sorted(out) == sorted(f"p{i}" for i in range(len(gpus)))
    for node, held in assignments.items():
        assert sum(g for p, g in zip(sorted(out), [gpus[int(p[1:])] for p in sorted(out)], strict=True)
                   if out[p] == node) <= len(held)


def test_a_recreated_pod_is_unbound_and_names_its_attempt() -> None:
    original = pod("train", node="n1", phase="Running")
    original["metadata"] |= {"resourceVersion": "7", "creationTimestamp": "t"}
    again = recreated(original, 2, "k8s.team.train")
    assert "nodeName" not in again["spec"] and "status" not in again
    assert "resourceVersion" not in again["metadata"] and "uid" not in again["metadata"]
    assert again["metadata"]["labels"][ATTEMPT_LABEL] == "2"
    # its job's: unbound, it is still that job's pod, never a new job (found at 200 nodes, bench k8s)
    assert again["metadata"]["labels"][JOB_LABEL] == "k8s.team.train" and group_new_pods([again]) == []
    assert original["spec"]["nodeName"] == "n1"  # the saved manifest is untouched


def test_gpus_count_limits_else_requests_and_the_largest_init_container() -> None:
    p = pod("x", 2)
    p["spec"]["containers"].append({"name": "side", "resources": {"requests": {"nvidia.com/gpu": 1}}})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
    assert pod_gpus(p) == 8
    p["spec"]["initContainers"] = []
    assert pod_gpus(p) == 3


REC = AttemptRecord("k8s.team.p", 1, ["x"], {"n1": [0]}, "", extra={"pods": ["team/p"]})


def finished(phase: str, code: int) -> dict[str, Any]:
    p = pod("p", node="n1", phase=phase)
    p["status"]["containerStatuses"] = [{"state": {"terminated": {"exitCode": code}}}]
    return p


def deleting() -> dict[str, Any]:
    p = pod("p", node="n1", phase="Running")
    p["metadata"]["deletionTimestamp"] = "2026-12-02T11:00:00Z"
    return p


GPU_REFUSAL = ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 4, "
               "Available: 2, which is unexpected")


def refused(reason: str = "UnexpectedAdmissionError", message: str = GPU_REFUSAL, started: bool = False,
            name: str = "p") -> dict[str, Any]:
    """A pod the node's kubelet refused to admit (what a kubelet writes: phase Failed, its reason and message)."""
    p = pod(name, node="n1", phase="Failed")
    p["status"] |= {"reason": reason, "message": message}
    if started:
        p["status"]["containerStatuses"] = [{"state": {"terminated": {"exitCode": 1,
                                                                      "startedAt": "2026-12-04T19:00:00Z"}}}]
    return p


@pytest.mark.parametrize(("p", "expected"), [
    (refused(), f"node n1 refused pod team/p: UnexpectedAdmissionError: {GPU_REFUSAL}"),
    (refused("OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu"),
     "node n1 refused pod team/p: OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough resource: "
     "nvidia.com/gpu"),
    (refused(message=""), "node n1 refused pod team/p: UnexpectedAdmissionError"),
    (refused(started=True), ""),  # it ran: a failure of its own
    (refused("Evicted", "The node was low on resource: memory."), ""),  # not an admission: the job's run ended
    (finished("Failed", 3), ""),
    (pod("p", node="n1", phase="Running"), ""),
])
def test_a_kubelets_admission_refusal_is_told_apart_from_a_failure(p: dict[str, Any], expected: str) -> None:
    assert admission_refusal(p) == expected


@pytest.mark.parametrize(("rec", "pods", "expected"), [
    (REC, [pod("p", node="n1", phase="Running")], None),
    # ADR 0083: refused by the node (another scheduler's pod took the GPUs first): requeued, not the job's failure
    (REC, [refused()], (-1, "refused", False)),
    (REC, [pod("p", node="n1", phase="Running"), refused(name="q")], (-1, "refused", False)),
    (REC, [refused(started=True)], (1, "exited", False)),
    (REC, [finished("Succeeded", 0)], (0, "exited", False)),
    (REC, [finished("Failed", 3)], (3, "exited", False)),
    (REC, [None], (-1, "vanished", False)),
    (REC, [deleting()], None),
    (REC.__class__(**{**REC.__dict__, "signalled_at": 5.0}), [deleting()], None),
    (REC.__class__(**{**REC.__dict__, "signalled_at": 5.0}), [None], (PREEMPTED_EXIT_CODE, "exited", False)),
    (REC.__class__(**{**REC.__dict__, "signalled_at": 5.0, "killed": True}), [deleting()],
     (KILLED_EXIT_CODE, "exited", True)),
])
def test_what_an_attempts_pods_say_of_its_end(rec: AttemptRecord, pods: list[dict[str, Any] | None],
                                              expected: tuple[int, str, bool] | None) -> None:
    out = outcome_of(rec, pods, 10.0)
    assert (None if out is None else (out.exit_code, out.status, out.killed)) == expected


def session_pod(*, phase: str = "Running", ip: str = "10.244.1.7", notes: dict[str, str] | None = None,
                ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    p = pod("nb", node="n1", phase=phase, notes=notes)
    if ip:
        p["status"]["podIP"] = ip
    if ports is not None:
        p["spec"]["containers"][0]["ports"] = ports
    return p


SESSION_PORTS = [{"name": "metrics", "containerPort": 9090}, {"name": "session", "containerPort": 8888}]


@pytest.mark.parametrize(("pods", "expected"), [
    # the pod's IP and the port it declares: an annotation, else a container port named "session"
    ([session_pod(notes={"steward.io/session-port": "8888"})], "10.244.1.7:8888"),
    ([session_pod(ports=SESSION_PORTS)], "10.244.1.7:8888"),
    ([session_pod(notes={"steward.io/session-port": "22"}, ports=SESSION_PORTS)], "10.244.1.7:22"),
    ([session_pod(ip="fd00::7", ports=SESSION_PORTS)], "[fd00::7]:8888"),
    # an address stated on the pod wins, with the pod's IP put in where it asks for it
    ([session_pod(notes={"steward.io/session-address": "https://nb.lab.example/"}, ports=SESSION_PORTS)],
     "https://nb.lab.example/"),
    ([session_pod(notes={"steward.io/session-address": " http://{pod_ip}:8888/lab "})], "http://10.244.1.7:8888/lab"),
    ([session_pod(phase="Pending", ip="", notes={"steward.io/session-address": "ssh://login.lab.example:2222"})],
     "ssh://login.lab.example:2222"),
    # not known yet, or no more
    ([session_pod(phase="Pending", ip="", notes={"steward.io/session-address": "http://{pod_ip}:8888/"})], None),
    ([session_pod(phase="Pending", ports=SESSION_PORTS)], None),
    ([session_pod(ip="", ports=SESSION_PORTS)], None),
    ([session_pod()], None),  # no port declared: nothing to say
    ([session_pod(ports=[{"name": "metrics", "containerPort": 9090}])], None),
    ([finished("Succeeded", 0)], None),
    ([deleting()], None),
    ([None], None),
    ([], None),
    # a gang: its first pod
    ([None, session_pod(ports=SESSION_PORTS)], "10.244.1.7:8888"),
])
def test_a_session_pod_is_reached_at_its_stated_address_or_its_ip_and_port(pods: list[dict[str, Any] | None],
                                                                            expected: str | None) -> None:
    found = session_address(pods)
    assert found == expected
    if found is not None:
        assert session_address_problem(found) is None  # what the ledger accepts


SESSION_REC = AttemptRecord("k8s.team.nb", 2, ["x"], {"n1": [0]}, "", "interactive", extra={"pods": ["team/nb"]})
REPORTED = AttemptRecord(**{**SESSION_REC.__dict__, "extra": {"pods": ["team/nb"], "address_seen": "10.244.1.7:8888"}})


@pytest.mark.parametrize(("rec", "pods", "expected"), [
    (SESSION_REC, [session_pod(ports=SESSION_PORTS)], ReportSessionAddress("k8s.team.nb", 2, "10.244.1.7:8888", 7.0)),
    # once per change: the address already reported is no news; a new one is
    (REPORTED, [session_pod(ports=SESSION_PORTS)], None),
    (REPORTED, [session_pod(ip="10.244.2.9", ports=SESSION_PORTS)],
     ReportSessionAddress("k8s.team.nb", 2, "10.244.2.9:8888", 7.0)),
    (SESSION_REC, [session_pod(phase="Pending", ports=SESSION_PORTS)], None),
    # a batch job publishes nothing, whatever its pod says
    (AttemptRecord(**{**SESSION_REC.__dict__, "job_class": "batch"}), [session_pod(ports=SESSION_PORTS)], None),
])
def test_a_sessions_address_is_reported_once_per_change(rec: AttemptRecord, pods: list[dict[str, Any] | None],
                                                         expected: ReportSessionAddress | None) -> None:
    assert address_report(rec, pods, 7.0) == expected


def test_exit_code_is_the_first_failure() -> None:
    assert exit_code(finished("Failed", 137)) == 137
    assert exit_code(finished("Succeeded", 0)) == 0


def node(name: str, gpus: int, *, labels: dict[str, str] | None = None, ready: bool = True,
         cordoned: bool = False, drained_by_steward: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {},
                         "annotations": {"steward.io/drain-reason": "x"} if drained_by_steward else {}},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_nodes_register_with_model_topology_and_all_their_gpus() -> None:
    topo = {"nvidia.com/gpu.product": "H100", "network.topology.nvidia.com/spine": "s1",
            "network.topology.nvidia.com/block": "b2"}
    nodes = [node("n1", 8, labels=topo), node("n2", 8), node("cpu", 0), node("full", 4)]
    regs = {r.node_id: r for r in registrations(nodes, "k8s")}
    assert sorted(regs) == ["full", "n1", "n2"]
    assert (regs["n1"].gpus, regs["n1"].gpu_model, regs["n1"].path) == (8, "H100", ["spine-s1", "block-b2", "n1"])
    assert (regs["n2"].gpus, regs["n2"].gpu_model, regs["n2"].path) == (8, "gpu", ["k8s-cluster", "n2"])
    assert topology_path(node("x", 1), "c") == ["c", "x"]


def test_foreign_pods_gpus_are_the_heartbeats_foreign_load() -> None:
    """One home for foreign load (ADR 0046): the heartbeat's `foreign`, as Slurm's, never a smaller node."""
    nodes = [node("n1", 8), node("n2", 8), node("full", 4), node("shrunk", 2)]
    pods = [pod("mine", 4, node="n1", phase="Running"),
            pod("theirs", 3, node="n1", scheduler="default-scheduler", phase="Running"),
            pod("old", 8, node="n2", scheduler="default-scheduler", phase="Succeeded"),
            pod("hog", 4, node="full", scheduler="default-scheduler", phase="Running"),
            pod("elsewhere", 1, node="unregistered", scheduler="default-scheduler", phase="Running")]
    foreign = foreign_gpus(pods, "steward")
    assert foreign == {"n1": 3, "full": 4, "unregistered": 1}
    registered = {"n1": 8, "n2": 8, "full": 4, "shrunk": 4}
    # registered nodes only; a node whose allocatable shrank below its registration counts the gap
    assert foreign_load(nodes, foreign, registered) == {"full": 4, "n1": 3, "shrunk": 2}
    assert foreign_load(nodes, {"full": 9}, {"full": 4}) == {"full": 4}  # never more than the node has


def test_down_nodes_are_notready_cordoned_by_others_or_gone() -> None:
    nodes = [node("ok", 8), node("sick", 8, ready=False), node("cordoned", 8, cordoned=True),
             node("drained", 8, cordoned=True, drained_by_steward=True), node("full", 4)]
    registered = {"ok", "sick", "cordoned", "drained", "full", "gone"}
    # a node full of foreign pods is not down: its GPUs are the heartbeat's foreign load
    assert down_nodes(nodes, registered) == ["cordoned", "gone", "sick"]


@pytest.mark.parametrize(("reason", "note"), [
    ("", "drained by Steward"),
    ("PSU swap in rack 3 (ticket OPS-42)", "drained by Steward: PSU swap in rack 3 (ticket OPS-42)"),
    ("  two\nlines  ", "drained by Steward: two lines"),
    ("x" * 600, "drained by Steward: " + "x" * 497 + "..."),
])
def test_a_drains_cordon_carries_the_operators_reason(reason: str, note: str) -> None:
    assert drain_note(reason) == note


@pytest.mark.parametrize(("kill", "reason", "for_job", "message"), [
    (False, "", "", "Steward preempted job j attempt 2; 30 s to checkpoint; evidence: steward explain j"),
    (False, "fair_share", "k8s.team.big",
     "Steward preempted job j attempt 2: fair_share (for job k8s.team.big); 30 s to checkpoint; "
     "evidence: steward explain j"),
    (False, "session_cap", "", "Steward preempted job j attempt 2: session_cap; 30 s to checkpoint; "
                               "evidence: steward explain j"),
    (False, "operator", "", "Steward preempted job j attempt 2: operator; 30 s to checkpoint; evidence: steward "
                            "explain j"),
    (True, "", "", "Steward ended job j attempt 2"),
    (True, "drain", "", "Steward ended job j attempt 2: drain"),
])
def test_a_stopped_pods_event_names_the_preemptions_reason_and_grace(kill: bool, reason: str, for_job: str,
                                                                       message: str) -> None:
    assert stop_message("j", 2, kill, 30, reason, for_job) == message


def test_a_long_reason_is_cut_and_the_pointer_to_the_evidence_stays() -> None:
    message = stop_message("j", 1, False, 5, "r" * 2000)
    assert len(message) <= 1000 and message.endswith("...; 5 s to checkpoint; evidence: steward explain j")


def test_a_refused_attempt_names_the_node_and_the_kubelets_reason() -> None:
    out = outcome_of(REC, [refused()], 10.0)
    assert out is not None and out.reason == (f"node n1 refused pod team/p: UnexpectedAdmissionError: {GPU_REFUSAL} "
                                              "(the job never ran there; queued again)")
