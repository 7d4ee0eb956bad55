"""ADR 0089: what a start of the Kubernetes executor does when its binds keep failing (bounded, then the attempt is lost
with the API server's answer) and when a submitted pod was deleted by its user before any bind (the job is
cancelled, not started with a pod made again); a pod Steward deleted is still made again. The API server is a small
in-memory stand-in for the few calls a start makes (the real one: tests/integration/test_kubernetes_executor.py)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steward.config import Settings
from steward.executor.attempts import AttemptRecord, write_json
from steward.executor.kubernetes import (
    BIND_FAILED,
    BIND_TRIES,
    KUBE_FAILED,
    POD_DELETED,
    POD_ENDING,
    KubernetesExecutor,
    KubernetesSettings,
)
from steward.executor.kubernetes_api import KubeClient, KubeError
from steward.executor.kubernetes_pods import ATTEMPT_LABEL, JOB_LABEL, key
from steward_workflows.payloads import ContractTimings, JobRunInput

JOB = "k8s.team.p"


def user_pod(name: str = "p", uid: str = "u1", gpus: int = 1) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "uid": uid, "labels": {JOB_LABEL: JOB}},
            "spec": {"schedulerName": "steward",
                     "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


class Kube(KubeClient):
    """The pods a start reads, binds, creates and deletes; `bind_error` makes every bind fail."""

    def __init__(self, pods: list[dict[str, Any]], bind_error: KubeError | None = None) -> None:
        self.store = {key(p): copy.deepcopy(p) for p in pods}
        self.bind_error = bind_error
        self.created: list[str] = []
        self.bound: dict[str, str] = {}

    def pods(self, field_selector: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        label, _, value = label_selector.partition("=")
        return [copy.deepcopy(p) for p in self.store.values()
                if not label or p["metadata"].get("labels", {}).get(label) == value]

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.store.get(f"{namespace}/{name}"))

    def bind(self, namespace: str, name: str, node: str) -> None:
        if self.bind_error is not None:
            raise self.bind_error
        self.store[f"{namespace}/{name}"]["spec"]["nodeName"] = node
        self.bound[f"{namespace}/{name}"] = node

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
        made = copy.deepcopy(dict(pod))
        made["metadata"]["uid"] = f"new-{len(self.created)}"
        self.store[key(made)] = made
        self.created.append(key(made))
        return made

    def delete_pod(self, namespace: str, name: str, grace_s: int) -> bool:
        return self.store.pop(f"{namespace}/{name}", None) is not None

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any], status: bool = False) -> None:
        pass

    def event(self, namespace: str, pod: Mapping[str, Any], reason: str, message: str, kind: str = "Normal",
              component: str = "steward") -> None:
        pass


class Publisher:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def publish(self, envelope: Any, **_: Any) -> None:
        self.sent.append(envelope)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.sent if e.type == kind]


def executor(tmp_path: Path, kube: Kube, submitted: list[dict[str, Any]],
             manifest_extra: Mapping[str, Any] | None = None) -> tuple[KubernetesExecutor, Publisher]:
    pub = Publisher()
    ex = KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), pub, kube,  # type: ignore[arg-type]
                            cluster=KubernetesSettings(namespace_projects="team=vision", start_wait_s=0))
    write_json(ex._manifest_path(JOB), {"pods": submitted, "gpus": [1] * len(submitted), "job": JOB,
                                        **(manifest_extra or {})})
    ex._open_manifests.add(JOB)
    return ex, pub


def run_of(attempt: int = 1) -> JobRunInput:
    return JobRunInput(job_id=JOB, attempt=attempt, executor="k8s", command=["python", "train.py"],
                       assignments={"gpu-1": [0]}, project="vision", resumable=True,
                       timings=ContractTimings(grace_s=30))


def start(ex: KubernetesExecutor, run: JobRunInput, try_number: int = 1) -> Any:
    env = ActivityEnvironment()
    env.info = replace(env.info, attempt=try_number)
    return asyncio.run(env.run(ex.start_job, run))


# -- a failing bind is tried BIND_TRIES times, then the attempt is lost with the API server's answer ---------------

BINDS = [
    ("first try: retried", 1, 500, KUBE_FAILED, False),
    ("a try before the last: retried", BIND_TRIES - 1, 503, KUBE_FAILED, False),
    ("the last try: final, with the reason", BIND_TRIES, 500, BIND_FAILED, True),
    ("beyond (a retry already scheduled): final", BIND_TRIES + 3, 403, BIND_FAILED, True),
]


@pytest.mark.parametrize(("case", "try_number", "status", "kind", "final"), BINDS, ids=[b[0] for b in BINDS])
def test_a_failing_bind_is_retried_a_bounded_number_of_times_then_lost_with_the_reason(
        tmp_path: Path, case: str, try_number: int, status: int, kind: str, final: bool) -> None:
    answer = f"POST /api/v1/namespaces/team/pods/p/binding: {status} etcdserver: request timed out"
    kube = Kube([user_pod()], bind_error=KubeError(answer, status))
    ex, _ = executor(tmp_path, kube, [user_pod()])
    with pytest.raises(ApplicationError) as failed:
        start(ex, run_of(), try_number)
    assert (failed.value.type, failed.value.non_retryable) == (kind, final)
    assert answer in failed.value.message  # the API server's reason reaches the JobLost
    assert ex.attempts.load(JOB, 1) is None and not kube.created


def test_waiting_for_an_earlier_attempt_s_pod_to_end_is_not_a_failing_bind(tmp_path: Path) -> None:
    """A resumable job's next pod has the name of the one a preemption deleted, which may take its whole grace to end:
    the create's 409 is retried as long as that lasts, not counted against BIND_TRIES."""
    kube = Kube([])

    def still_ending(namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
        raise KubeError("POST /api/v1/namespaces/team/pods: 409 object is being deleted", 409)

    kube.create_pod = still_ending  # type: ignore[method-assign]
    ex, _ = executor(tmp_path, kube, [user_pod()], {"bind_undone": 1})
    with pytest.raises(ApplicationError) as failed:
        start(ex, run_of(2), BIND_TRIES + 5)
    assert (failed.value.type, failed.value.non_retryable) == (POD_ENDING, False)


def test_a_bind_that_succeeds_on_a_later_try_starts_the_attempt(tmp_path: Path) -> None:
    kube = Kube([user_pod()])
    ex, _ = executor(tmp_path, kube, [user_pod()])
    started = start(ex, run_of(), BIND_TRIES - 1)
    assert started.attempt == 1 and kube.bound == {"team/p": "gpu-1"}


# -- a pod its user deleted before the bind ends the job; one Steward deleted is made again -------------------------

DELETIONS: list[tuple[str, int, dict[str, Any], bool, bool]] = [
    # (case, attempt, manifest extra, an earlier attempt recorded here, cancelled)
    ("deleted by its user before the first bind", 1, {}, False, True),
    ("deleted by its user, a first attempt lost before any bind", 2, {}, False, True),
    ("deleted by Steward: a gang's bind undone", 2, {"bind_undone": 1}, False, False),
    ("deleted by Steward before an earlier try of this start", 2, {"deleted_by_steward": ["team/p"]}, False, False),
    ("deleted by Steward: the earlier attempt was bound and preempted", 2, {}, True, False),
]


@pytest.mark.parametrize(("case", "attempt", "extra", "earlier", "cancelled"), DELETIONS,
                         ids=[d[0] for d in DELETIONS])
def test_a_pod_deleted_before_its_bind_cancels_the_job_only_when_steward_did_not_delete_it(
        tmp_path: Path, case: str, attempt: int, extra: dict[str, Any], earlier: bool, cancelled: bool) -> None:
    kube = Kube([])  # the submitted pod is gone
    ex, pub = executor(tmp_path, kube, [user_pod()], extra)
    if earlier:
        ex.attempts.save(AttemptRecord(JOB, attempt - 1, ["python"], {"gpu-1": [0]}, "", "batch", pid=1,
                                       extra={"pods": ["team/p"]}))
    if cancelled:
        with pytest.raises(ApplicationError) as failed:
            start(ex, run_of(attempt))
        assert (failed.value.type, failed.value.non_retryable) == (POD_DELETED, True)
        assert "pod team/p deleted in Kubernetes before Steward bound it" in failed.value.message
        (cancel,) = pub.of("CancelJob")
        assert cancel.payload["reason"] == "pod team/p deleted in Kubernetes before Steward bound it"
        assert cancel.id == f"cancel-{JOB}"  # the round's cancel of the same job is the same message
        assert not kube.created and ex.manifest(JOB)["closed"]  # type: ignore[index]
        assert ex.cancel_deleted([]) == []  # the round does not cancel it again
    else:
        started = start(ex, run_of(attempt))
        assert started.attempt == attempt and kube.created == ["team/p"] and not pub.of("CancelJob")
        assert kube.store["team/p"]["metadata"]["labels"][ATTEMPT_LABEL] == str(attempt)


def test_a_pod_deleted_and_made_again_under_its_name_is_not_the_submitted_one(tmp_path: Path) -> None:
    """The user replaced the pod (a new uid, not yet labelled): the submitted job's pod is gone all the same."""
    again = user_pod(uid="u2")
    del again["metadata"]["labels"]
    kube = Kube([again])
    ex, pub = executor(tmp_path, kube, [user_pod()])
    with pytest.raises(ApplicationError) as failed:
        start(ex, run_of(1))
    assert failed.value.type == POD_DELETED and len(pub.of("CancelJob")) == 1
    assert kube.store["team/p"]["metadata"]["uid"] == "u2" and not kube.bound  # the new pod is left to its own job
