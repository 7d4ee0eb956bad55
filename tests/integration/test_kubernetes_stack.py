"""The whole stack with the Kubernetes executor (issue 26), as `steward up --executor kubernetes` starts it: Kafka,
PostgreSQL, Temporal and Steward's processes, on the real API server of test_kubernetes_executor (its `kube`
fixture: etcd, kube-apiserver, kwok GPU nodes). A pod posted to the API server becomes a job through Kafka and
the ledger, Steward's scheduler places it, the executor binds the pod where it was placed, kwok runs it to its
end and the job completes; the pod's project is its namespace's, as an admin recorded it (`steward k8s map`); a
pod that cannot fit is told its place in Steward's queue and the reason; a `kubectl cordon` reaches Steward as
the node turning unhealthy; a pod of a namespace no admin mapped is rejected by the ledger, and says so.
Steward's scheduler SIGKILLed mid-run (the supervisor starts it again) binds nothing twice. With one GPU node left
in service and pods applied with `kubectl apply -f` (issue 26's list): a funded pod is protected for its min
runtime while a more under-served allocation waits, then Steward's scheduler preempts it (a delete with its grace,
an event naming the reason); a foreign pod bound by hand keeps its GPUs and is never deleted; a gang with room for
part of it binds none of its pods.

It replaces the stack's executor and needs a store with no other nodes: run it in a slot of its own (as the
Slurm whole-stack test), after the rest of the suite."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from steward.config import Settings
from steward.executor.kubernetes_api import KubeClient
from tests.integration.conftest import REPO, steward
from tests.integration.test_kubernetes_executor import GPU_NODES, KUBECONFIG, gpu_pod, kube, kubectl, pod
from tests.integration.test_slurm_executor import wait_for
from tests.integration.test_slurm_stack import assert_rounds_served, node_states, nodes, show

__all__ = ["kube"]  # the API server fixture, shared with the executor's own tests

SCENARIO = REPO.parents[0] / "shared" / "data" / "scenarios" / "philly.yaml"


@pytest.fixture(scope="module")
def k8s_stack(real_services: None, kube: KubeClient) -> Iterator[dict[str, Any]]:
    """Steward's processes with the Kubernetes executor on the test API server, the Philly allocation tree."""
    from steward.cli.stack import bring_up
    from steward.infra.processes import OWN_PROCESSES, Paths, stop_own

    os.environ["STEWARD_K8S_KUBECONFIG"] = str(KUBECONFIG)
    os.environ["STEWARD_K8S_POLL_S"] = "0.5"
    settings = Settings()
    info = bring_up(settings, postgres=True, executor="kubernetes")
    try:
        steward("tree", "apply", str(SCENARIO))
        yield info
    finally:
        for name in reversed(OWN_PROCESSES):
            stop_own(name, Paths(settings.run_dir))
        for name in ("STEWARD_K8S_KUBECONFIG", "STEWARD_K8S_POLL_S"):
            os.environ.pop(name, None)


@pytest.mark.integration
@pytest.mark.timeout(900)  # the whole stack starts first (minutes on a loaded machine), as for test_demo
def test_through_steward_a_pod_is_bound_where_steward_placed_it_and_a_cordon_is_a_node_event(
        k8s_stack: dict[str, Any], kube: KubeClient) -> None:
    wait_for(lambda: {n: s for n, s in node_states().items() if n in GPU_NODES} == dict.fromkeys(GPU_NODES, "ready"),
             timeout=120)
    # the namespace's project is an admin's recorded decision (ADR 0054): the pods name none
    steward("k8s", "map", "team", "ee9e8c", "--executor", "local", "--reason", "the team's namespace")
    mappings = json.loads(steward("k8s", "mappings", "--executor", "local", "--output", "json").stdout)
    assert [(m["namespace"], m["project"]) for m in mappings] == [("team", "ee9e8c")]
    spec = gpu_pod("stack-train", 2, notes={"pod-complete.stage.kwok.x-k8s.io/delay": "2s"})
    del spec["metadata"]["labels"]["steward.io/project"]
    kube.create_pod("team", spec)
    job_id = "local.team.stack-train"  # the stack's executor id, the pod's namespace and name
    wait_for(lambda: bool((pod(kube, "stack-train") or {}).get("spec", {}).get("nodeName")), timeout=120)
    wait_for(lambda: show(job_id)["state"] in {"COMPLETED", "FAILED"}, timeout=120)
    job = show(job_id)
    assert job["state"] == "COMPLETED", job
    assert [e["type"] for e in job["events"]] == ["JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted"]
    ((node, gpus),) = job["assignments"].items()
    bound = pod(kube, "stack-train") or {}
    assert bound["spec"]["nodeName"] == node and len(gpus) == 2  # bound where Steward placed it
    assert bound["status"]["phase"] == "Succeeded"
    assert job["project"] == "ee9e8c"

    # a namespace no admin mapped charges nothing, whatever its pods' label says: the ledger rejects the job
    # (ADR 0056), the executor reads the rejection through the API, and the pod says so instead of "queued"
    kube.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "stray"}})
    kube.create_pod("stray", gpu_pod("stack-stray", 1) | {"metadata": {
        "name": "stack-stray", "namespace": "stray", "labels": {"steward.io/project": "ee9e8c"}}})

    def stray_condition() -> dict[str, Any]:
        found = kube.pod("stray", "stack-stray") or {}
        return next((c for c in found.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
                    {})

    wait_for(lambda: stray_condition().get("reason") == "StewardRejected", timeout=90)
    assert stray_condition()["message"].startswith(
        "Steward rejected job local.stray.stack-stray: namespace stray of cluster local is not mapped to a "
        "project"), stray_condition()
    assert not (kube.pod("stray", "stack-stray") or {}).get("spec", {}).get("nodeName")  # never bound
    kube.delete_pod("stray", "stack-stray", 0)

    for node in GPU_NODES:  # `kubectl cordon`: every GPU node turns unhealthy in Steward
        kube.patch_node(node, {"spec": {"unschedulable": True}})
    wait_for(lambda: all(node_states()[n] == "unhealthy" for n in GPU_NODES), timeout=60)

    # a pod that cannot be placed now waits, and its condition says where it stands and why, from Steward's queue
    waiting = gpu_pod("stack-wait", 2)
    del waiting["metadata"]["labels"]["steward.io/project"]
    kube.create_pod("team", waiting)

    def condition() -> str:
        found = pod(kube, "stack-wait") or {}
        return " ".join(str(c.get("message")) for c in found.get("status", {}).get("conditions") or []
                        if c.get("type") == "PodScheduled")

    wait_for(lambda: "position 1 of 1; " in condition(), timeout=60)
    assert condition().endswith("evidence: steward explain local.team.stack-wait"), condition()
    kube.delete_pod("team", "stack-wait", 0)
    wait_for(lambda: show("local.team.stack-wait")["state"] == "CANCELLED", timeout=60)

    for node in GPU_NODES:
        kube.patch_node(node, {"spec": {"unschedulable": False}})
    wait_for(lambda: all(node_states()[n] == "ready" for n in GPU_NODES), timeout=60)


def active_gpus_by_node(kube: KubeClient) -> dict[str, int]:
    """GPUs the API server's pods hold per node: bound and not ended (what a kubelet would have to run)."""
    held: dict[str, int] = {}
    for found in kube.call("GET", "/api/v1/namespaces/team/pods").get("items") or []:
        node = found.get("spec", {}).get("nodeName")
        if node and found.get("status", {}).get("phase") not in {"Succeeded", "Failed"}:
            limits = found["spec"]["containers"][0].get("resources", {}).get("limits", {})
            held[node] = held.get(node, 0) + int(limits.get("nvidia.com/gpu", 0))
    return held


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_steward_s_scheduler_killed_mid_run_binds_nothing_twice(k8s_stack: dict[str, Any], kube: KubeClient) -> None:
    """Issue 26: Steward's scheduler restarted mid-run (SIGKILL, the supervisor starts it again) and nothing
    double-bound: every pod is bound once, where its job was placed, no node ever holds more GPUs than it has, and
    the pods that waited for room behind the killed scheduler are placed by the new one."""
    from steward.infra.processes import Paths, pid_alive, read_pid

    wait_for(lambda: all(node_states().get(n) == "ready" for n in GPU_NODES), timeout=120)
    if not any(m["namespace"] == "team" for m in json.loads(
            steward("k8s", "mappings", "--executor", "local", "--output", "json").stdout)):
        steward("k8s", "map", "team", "ee9e8c", "--executor", "local", "--reason", "the team's namespace")
    names = [f"restart-{i}" for i in range(16)]  # 64 GPUs asked of 48: a third wait for the first to end
    for name in names:
        spec = gpu_pod(name, 4, notes={"pod-complete.stage.kwok.x-k8s.io/delay": "12s"})
        del spec["metadata"]["labels"]["steward.io/project"]
        kube.create_pod("team", spec)

    paths = Paths(Settings().run_dir)
    before = read_pid(paths, "scheduler")
    assert before is not None
    wait_for(lambda: any((pod(kube, n) or {}).get("spec", {}).get("nodeName") for n in names), timeout=120)
    os.kill(before, 9)  # mid-run: some pods bound, the rest still waiting
    overbooked: list[dict[str, int]] = []

    def restarted_and_done() -> bool:
        held = active_gpus_by_node(kube)
        if any(gpus > 8 for gpus in held.values()):
            overbooked.append(held)
        states = {j["id"]: j["state"] for j in json.loads(
            steward("jobs", "--project", "ee9e8c", "--limit", "200", "--output", "json").stdout)}
        return read_pid(paths, "scheduler") not in {None, before} and all(
            states.get(f"local.team.{n}") == "COMPLETED" for n in names)

    wait_for(restarted_and_done, timeout=600)
    assert not pid_alive(before) and not overbooked, overbooked
    for name in names:
        job = show(f"local.team.{name}")
        kinds = [e["type"] for e in job["events"]]
        assert kinds.count("JobPlaced") == kinds.count("JobStarted") == 1, (name, kinds)  # one placement, one bind
        ((node, gpus),) = job["assignments"].items()
        assert (pod(kube, name) or {})["spec"]["nodeName"] == node and len(gpus) == 4, (name, job)


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_kubernetes_executor_serves_its_rounds_on_metrics(k8s_stack: dict[str, Any]) -> None:
    assert_rounds_served(Settings().executor_id)


# -- issue 26's whole-stack cases, pods applied with `kubectl apply -f` as users do; one GPU node left in service --

def kubectl_apply(*pods: dict[str, Any]) -> None:
    """`kubectl apply -f -` of the pods as one List, as a user applies a manifest."""
    kubectl("apply", "-f", "-", manifest={"apiVersion": "v1", "kind": "List", "items": list(pods)})


def namespaced(spec: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A pod of `gpu_pod` in `namespace`, naming no project: its namespace's recorded mapping decides."""
    spec["metadata"]["namespace"] = namespace
    spec["metadata"]["labels"].pop("steward.io/project", None)
    return spec


def map_namespace(kube: KubeClient, namespace: str, project: str) -> None:
    if not any(n["metadata"]["name"] == namespace for n in kube.call("GET", "/api/v1/namespaces")["items"]):
        kube.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": namespace}})
    mapped = json.loads(steward("k8s", "mappings", "--executor", "local", "--output", "json").stdout)
    if not any((m["namespace"], m["project"]) == (namespace, project) for m in mapped):
        steward("k8s", "map", namespace, project, "--executor", "local", "--reason", f"{namespace}'s project")


def bound_to(kube: KubeClient, namespace: str, name: str) -> str:
    return str((kube.pod(namespace, name) or {}).get("spec", {}).get("nodeName") or "")


def scheduled_message(kube: KubeClient, namespace: str, name: str) -> str:
    found = kube.pod(namespace, name) or {}
    return " ".join(str(c.get("message")) for c in found.get("status", {}).get("conditions") or []
                    if c.get("type") == "PodScheduled")


@pytest.fixture(scope="module")
def one_node(k8s_stack: dict[str, Any], kube: KubeClient) -> Iterator[str]:
    """Every GPU node but gpu-0 cordoned (`kubectl cordon`: unhealthy in Steward), the namespaces `team` and
    `team-b` mapped to two projects of the research branch (ee9e8c, 7f04ca); the nodes uncordoned after the module's
    last test (once for the three tests: a cordon waits for Steward to see it)."""
    wait_for(lambda: all(node_states().get(n) == "ready" for n in GPU_NODES), timeout=120)
    map_namespace(kube, "team", "ee9e8c")
    map_namespace(kube, "team-b", "7f04ca")
    others = [n for n in GPU_NODES if n != "gpu-0"]
    for node in others:
        kube.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        wait_for(lambda: all(node_states()[n] == "unhealthy" for n in others), timeout=60)
        yield "gpu-0"
    finally:  # uncordoned, not waited for: the module's stack ends next
        for node in others:
            kube.patch_node(node, {"spec": {"unschedulable": False}})


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_funded_pod_is_protected_for_its_min_runtime_then_preempted_by_stewards_scheduler_with_its_grace(
        one_node: str, kube: KubeClient) -> None:
    """A funded pod (`steward.io/min-runtime: 30s`) holds the one node while a pod of a more under-served
    allocation (7f04ca: nothing delivered) waits for it: Steward's own scheduler asks for no preemption before
    the protection ends, then preempts it: a delete with the job's grace, and the pod's event names the reason
    and whom it stopped for."""
    kubectl_apply(namespaced(gpu_pod("held", 8, notes={"steward.io/min-runtime": "30s",
                                                       "steward.io/resumable": "true"}), "team"))
    held = "local.team.held"
    wait_for(lambda: show(held)["state"] == "RUNNING", timeout=120)
    running = show(held)
    assert running["funded"] and bound_to(kube, "team", "held") == one_node, running
    protected_until = float(running["protectedUntil"])
    kubectl_apply(namespaced(gpu_pod("owed", 8, notes={"steward.io/min-runtime": "60s",
                                                       "pod-complete.stage.kwok.x-k8s.io/delay": "1s"}), "team-b"))
    owed = "local.team-b.owed"
    wait_for(lambda: show(owed)["state"] == "QUEUED" and "position" in scheduled_message(kube, "team-b", "owed"),
             timeout=120)
    submitted_at = next(e["recordedAt"] for e in show(owed)["events"] if e["type"] == "JobSubmitted")
    assert submitted_at < protected_until - 5, (submitted_at, protected_until)  # it waited while protected

    wait_for(lambda: bool((kube.pod("team", "held") or {}).get("metadata", {}).get("deletionTimestamp")),
             timeout=180)
    (asked,) = [e for e in show(held)["events"] if e["type"] == "JobPreemptionRequested"]
    assert asked["recordedAt"] >= protected_until, (asked, protected_until)  # never inside its protection
    assert asked["payload"]["for_job_id"] == owed and asked["payload"]["reason"] != "drain", asked
    ending = kube.pod("team", "held") or {}
    grace = int(ending["metadata"]["deletionGracePeriodSeconds"])
    deleted_at = datetime.fromisoformat(ending["metadata"]["deletionTimestamp"]).timestamp() - grace
    assert deleted_at >= protected_until - 1, (deleted_at, protected_until)  # RFC 3339: whole seconds
    (told,) = [e["message"] for e in kube.call("GET", "/api/v1/namespaces/team/events")["items"]
               if e["involvedObject"]["name"] == "held" and e["reason"] == "StewardPreempted"]
    assert told == (f"Steward preempted job {held} attempt 1: {asked['payload']['reason']} (for job {owed}); "
                    f"{grace} s to checkpoint; evidence: steward explain {held}"), told
    assert grace > 0

    kube.delete_pod("team", "held", 0)  # its checkpoint taken: the grace needs not run out here
    wait_for(lambda: "JobPreempted" in [e["type"] for e in show(held)["events"]], timeout=120)
    steward("cancel", held, "--reason", "the test is over")  # requeued (resumable): no second attempt
    wait_for(lambda: show(owed)["state"] == "COMPLETED", timeout=180)
    assert bound_to(kube, "team-b", "owed") == one_node


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_foreign_pod_bound_by_hand_keeps_its_gpus_and_is_never_deleted(one_node: str, kube: KubeClient) -> None:
    """A pod of another scheduler bound by hand (`spec.nodeName`) to the one node holds 6 of its 8 GPUs: Steward
    places a 2-GPU pod beside it, keeps a 4-GPU pod waiting, and never deletes the foreign pod."""
    foreign = gpu_pod("by-hand", 6, scheduler="default-scheduler", node=one_node)
    foreign["metadata"]["labels"].pop("steward.io/project")
    kubectl_apply(foreign)
    wait_for(lambda: nodes()[one_node]["foreignGpus"] == 6, timeout=60)
    kubectl_apply(namespaced(gpu_pod("beside", 2, notes={"steward.io/min-runtime": "60s",
                                                         "pod-complete.stage.kwok.x-k8s.io/delay": "1s"}), "team"),
                  namespaced(gpu_pod("too-big", 4, notes={"steward.io/min-runtime": "60s"}), "team"))
    wait_for(lambda: show("local.team.beside")["state"] == "COMPLETED", timeout=180)
    assert bound_to(kube, "team", "beside") == one_node
    wait_for(lambda: "position" in scheduled_message(kube, "team", "too-big"), timeout=60)
    time.sleep(3)  # several cycles: the 4 GPUs are not there, whatever Steward's rank
    assert bound_to(kube, "team", "too-big") == "" and show("local.team.too-big")["state"] == "QUEUED"
    left = kube.pod("team", "by-hand") or {}
    assert left["status"]["phase"] == "Running" and not left["metadata"].get("deletionTimestamp")
    assert not [e for e in kube.call("GET", "/api/v1/namespaces/team/events")["items"]
                if e["involvedObject"]["name"] == "by-hand" and e["source"].get("component") == "steward"]
    kube.delete_pod("team", "too-big", 0)
    wait_for(lambda: show("local.team.too-big")["state"] == "CANCELLED", timeout=60)
    kube.delete_pod("team", "by-hand", 0)


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_gang_with_room_for_part_of_it_binds_none_of_its_pods(one_node: str, kube: KubeClient) -> None:
    """Two pods of 8 GPUs, one node of 8 in service: the gang waits whole (told its place and why), none of its
    pods bound; a second node back in service, both are bound, one on each."""
    kubectl_apply(*(namespaced(gpu_pod(f"half-{i}", 8, gang="half", size=2,
                                       notes={"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}), "team")
                    for i in range(2)))
    job_id = "local.team.half"
    wait_for(lambda: all("position" in scheduled_message(kube, "team", f"half-{i}") for i in range(2)),
             timeout=120)
    time.sleep(3)  # several of Steward's cycles (and the executor's rounds) with the gang waiting
    assert [bound_to(kube, "team", f"half-{i}") for i in range(2)] == ["", ""]
    assert show(job_id)["state"] == "QUEUED" and "JobPlaced" not in [e["type"] for e in show(job_id)["events"]]

    kube.patch_node("gpu-1", {"spec": {"unschedulable": False}})  # (the module's last test: `one_node` ends)
    wait_for(lambda: show(job_id)["state"] == "COMPLETED", timeout=180)
    assert sorted(bound_to(kube, "team", f"half-{i}") for i in range(2)) == ["gpu-0", "gpu-1"]
