"""The whole stack with the Kubernetes executor (issue 26), as `steward up --executor kubernetes` starts it: Kafka,
PostgreSQL, Temporal and Steward's processes, on the real API server of test_kubernetes_executor (its `kube`
fixture: etcd, kube-apiserver, kwok GPU nodes). A pod posted to the API server becomes a job through Kafka and
the ledger, Steward's scheduler places it, the executor binds the pod where it was placed, kwok runs it to its
end and the job completes; the pod's project is its namespace's, as an admin recorded it (`steward k8s map`); a
pod that cannot fit is told its place in Steward's queue and the reason; a `kubectl cordon` reaches Steward as
the node turning unhealthy; a pod of a namespace no admin mapped is rejected by the ledger, and says so.
Steward's scheduler SIGKILLed mid-run (the supervisor starts it again) binds nothing twice.

It replaces the stack's executor and needs a store with no other nodes: run it in a slot of its own (as the
Slurm whole-stack test), after the rest of the suite."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from steward.config import Settings
from steward.executor.kubernetes_api import KubeClient
from tests.integration.conftest import REPO, steward
from tests.integration.test_kubernetes_executor import GPU_NODES, KUBECONFIG, gpu_pod, kube, pod
from tests.integration.test_slurm_executor import wait_for
from tests.integration.test_slurm_stack import assert_rounds_served, node_states, show

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
