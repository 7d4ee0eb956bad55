"""What a pod asks of Steward (issue 26; docs/adr/0051-kubernetes-division-of-labour.md), read from the pod alone: pure
functions over the API server's JSON, so the executor's rules are tested without a cluster.

A pod is Steward's when its `spec.schedulerName` is Steward's (`steward` unless configured). Its project is its
namespace's where an admin mapped the namespace (`steward k8s map`), else the label `steward.io/project` (which the
ledger then refuses unless the recorded mapping agrees: ADR 0056; the job names its namespace); its GPUs are its
containers' `nvidia.com/gpu` limits (requests where no limit is given); the annotations `steward.io/min-runtime`
("90", "90s", "30m", "2h") and `steward.io/resumable` ("true") carry the protection contract,
`steward.io/checkpoint` the folder (a mounted volume's path) the job writes its checkpoints to. Pods labelled
`steward.io/gang=<name>` with `steward.io/gang-size=<n>` are one job: Steward submits it when all n pods exist, and
binds all of them or none."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steward.domain.commands import SubmitJob
from steward.domain.ids import id_problem

GPU_RESOURCE = "nvidia.com/gpu"
PROJECT_LABEL = "steward.io/project"
JOB_LABEL = "steward.io/job"
ATTEMPT_LABEL = "steward.io/attempt"
GANG_LABEL = "steward.io/gang"
GANG_SIZE = "steward.io/gang-size"
MIN_RUNTIME = "steward.io/min-runtime"
RESUMABLE = "steward.io/resumable"
CHECKPOINT = "steward.io/checkpoint"
CLASS = "steward.io/class"
DRAIN_REASON = "steward.io/drain-reason"
# how a session's pod is reached (ADR 0063): an address stated on the pod, else its IP and its session port
SESSION_ADDRESS = "steward.io/session-address"
SESSION_PORT = "steward.io/session-port"
SESSION_PORT_NAME = "session"
POD_IP = "{pod_ip}"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh]?)")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_TRUE = ("true", "yes", "1")

Pod = Mapping[str, Any]


class PodProblem(Exception):
    """A Steward pod Steward cannot take as a job (one line naming the problem)."""


@dataclass(frozen=True)
class PodJob:
    """One Steward job made of one pod or a gang of pods."""

    command: SubmitJob
    pods: tuple[str, ...]  # namespace/name of each pod
    gpus_per_pod: tuple[int, ...]


def key(pod: Pod) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def pod_labels(pod: Pod) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def pod_annotations(pod: Pod) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("annotations") or {}


def quantity(value: object) -> int:
    """A whole-device quantity (`nvidia.com/gpu` is counted in devices: "2", 2)."""
    text = str(value).strip()
    if not text.isdigit():
        raise PodProblem(f"{GPU_RESOURCE} must be a whole number of devices, got {text!r}")
    return int(text)


def pod_gpus(pod: Pod) -> int:
    """The GPUs a pod holds: each container's `nvidia.com/gpu` limit (its request where it sets no limit);
    init containers run before, so only the largest of them counts against the containers' sum."""
    spec = pod.get("spec", {})

    def of(container: Mapping[str, Any]) -> int:
        res = container.get("resources") or {}
        for part in ("limits", "requests"):
            value = (res.get(part) or {}).get(GPU_RESOURCE)
            if value is not None:
                return quantity(value)
        return 0

    main = sum(of(c) for c in spec.get("containers") or [])
    init = max((of(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def duration_s(text: str, what: str) -> float:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise PodProblem(f"{what} must be a duration like 90, 90s, 30m or 2h, got {text!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


def job_id_of(executor_id: str, pod: Pod) -> str:
    """The Steward job id of a pod (or its gang): `<executor>.<namespace>.<name or gang>`, or the pod's uid
    where that is no valid id (too long); the executor's own prefix is what lets it submit (ADR 0051)."""
    meta = pod.get("metadata", {})
    name = pod_labels(pod).get(GANG_LABEL) or meta.get("name", "")
    readable = f"{executor_id}.{meta.get('namespace', 'default')}.{name}"
    if id_problem(readable) is None:
        return readable
    return f"{executor_id}.{str(meta.get('uid', '')).replace('-', '')}"


def is_steward_pod(pod: Pod, scheduler_name: str) -> bool:
    return bool(pod.get("spec", {}).get("schedulerName") == scheduler_name)


def is_terminal(pod: Pod) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def is_deleting(pod: Pod) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def parse_namespace_projects(text: str) -> dict[str, str]:
    """An admin's namespace-to-project mapping, `team-a=vision,team-b=nlp` (`PodProblem` naming a bad entry)."""
    out = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        namespace, sep, project = (x.strip() for x in part.partition("="))
        if not sep or not namespace or not project:
            raise PodProblem(f"namespace mapping entries are namespace=project, got {part!r}")
        out[namespace] = project
    return out


def project_of(pod: Pod, namespace_projects: Mapping[str, str]) -> str:
    """The project a pod charges: its namespace's, where an admin mapped the namespace (a label naming another
    project is refused: users of a namespace charge only its project), else its `steward.io/project` label."""
    label = pod_labels(pod).get(PROJECT_LABEL, "")
    namespace = str(pod.get("metadata", {}).get("namespace", "default"))
    mapped = namespace_projects.get(namespace)
    if mapped is not None:
        if label and label != mapped:
            raise PodProblem(f"pod {key(pod)} names project {label!r}, but namespace {namespace} is project "
                             f"{mapped!r}")
        return mapped
    if not label:
        raise PodProblem(f"pod {key(pod)} names no project (label {PROJECT_LABEL}) and namespace {namespace} is not "
                         "mapped to one (steward k8s map)")
    return label


def pod_job(executor_id: str, pods: Sequence[Pod], namespace_projects: Mapping[str, str] | None = None) -> PodJob:
    """The job of one pod or of one complete gang (all pods of a gang, sorted by name); `PodProblem` when the
    pods do not make a job (no project, a gang whose pods disagree, a gang not complete yet)."""
    if not pods:
        raise PodProblem("no pods")
    pods = sorted(pods, key=key)
    first = pods[0]
    mapping = namespace_projects or {}
    project = project_of(first, mapping)
    notes = pod_annotations(first)
    gang = pod_labels(first).get(GANG_LABEL, "")
    if gang:
        size_text = notes.get(GANG_SIZE, "")
        if not size_text.isdigit() or int(size_text) < 1:
            raise PodProblem(f"gang {gang} needs the annotation {GANG_SIZE} (a whole number), got {size_text!r}")
        if len(pods) < int(size_text):
            raise PodProblem(f"gang {gang} has {len(pods)} of its {size_text} pods")
        for pod in pods[1:]:
            if project_of(pod, mapping) != project:
                raise PodProblem(f"the pods of gang {gang} name different projects")
    elif len(pods) > 1:
        raise PodProblem("pods without a gang are one job each")
    gpus = tuple(pod_gpus(p) for p in pods)
    if sum(gpus) < 1:
        raise PodProblem(f"pod {key(first)} asks for no {GPU_RESOURCE}")
    min_runtime = duration_s(notes[MIN_RUNTIME], MIN_RUNTIME) if MIN_RUNTIME in notes else 0.0
    resumable = notes.get(RESUMABLE, "").strip().lower() in _TRUE
    containers = first.get("spec", {}).get("containers") or [{}]
    command = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])] or [
        str(containers[0].get("image", "pod"))]
    job = SubmitJob(job_id=job_id_of(executor_id, first), project=project, gpus=sum(gpus),
                    min_runtime_s=min_runtime, command=command, resumable=resumable,
                    job_class=notes.get(CLASS, "batch"), from_executor=executor_id,
                    from_namespace=str(first.get("metadata", {}).get("namespace", "default")))
    return PodJob(job, tuple(key(p) for p in pods), gpus)


def group_new_pods(pods: Iterable[Pod]) -> list[list[Pod]]:
    """Steward's unbound pods not yet submitted, grouped into would-be jobs (a gang's pods together)."""
    groups: dict[str, list[Pod]] = {}
    for pod in pods:
        if JOB_LABEL in pod_labels(pod) or is_deleting(pod) or is_terminal(pod) or pod.get("spec", {}).get("nodeName"):
            continue
        meta = pod.get("metadata", {})
        gang = pod_labels(pod).get(GANG_LABEL, "")
        group = f"gang:{meta.get('namespace')}/{gang}" if gang else f"pod:{key(pod)}"
        groups.setdefault(group, []).append(pod)
    return [groups[g] for g in sorted(groups)]


def bindings(pods: Sequence[str], gpus_per_pod: Sequence[int], assignments: Mapping[str, Sequence[int]]
             ) -> dict[str, str]:
    """Which node each pod of a job is bound to: the placement's nodes filled with its pods, largest pods
    first, each onto the node with the most GPUs of the placement left (all pods fit, or `PodProblem`)."""
    left = {node: len(g) for node, g in assignments.items()}
    out: dict[str, str] = {}
    for pod, gpus in sorted(zip(pods, gpus_per_pod, strict=True), key=lambda pg: (-pg[1], pg[0])):
        node = max(sorted(left), key=lambda n: left[n], default=None)
        if node is None or left[node] < gpus:
            raise PodProblem(f"the placement {dict(assignments)} has no room for pod {pod} ({gpus} GPU(s))")
        left[node] -= gpus
        out[pod] = node
    return out


_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "generation", "managedFields", "ownerReferences", "selfLink")


def recreated(manifest: Pod, attempt: int, job_id: str) -> dict[str, Any]:
    """The pod to create for a later attempt of a job: the submitted pod's spec, unbound, without what the API
    server sets, labelled with its job and the attempt (the manifest is the pod as submitted, before Steward
    labelled it: without the job's label, a new pod still unbound would be taken for a new job)."""
    pod = copy.deepcopy(dict(manifest))
    meta = dict(pod.get("metadata", {}))
    for name in _SERVER_SET:
        meta.pop(name, None)
    meta["labels"] = {**(meta.get("labels") or {}), JOB_LABEL: job_id, ATTEMPT_LABEL: str(attempt)}
    spec = dict(pod.get("spec", {}))
    spec.pop("nodeName", None)
    pod["metadata"], pod["spec"] = meta, spec
    pod.pop("status", None)
    return pod


def command_pod(job_id: str, namespace: str, command: Sequence[str], gpus: int, attempt: int, image: str,
                scheduler_name: str, env: Mapping[str, str]) -> dict[str, Any]:
    """A pod for a job submitted to Steward directly (not as a pod) and placed on a Kubernetes node."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job_id.lower().replace('_', '-').replace('.', '-')[:50]}-a{attempt}",
                     "namespace": namespace, "labels": {JOB_LABEL: job_id, ATTEMPT_LABEL: str(attempt)}},
        "spec": {"schedulerName": scheduler_name, "restartPolicy": "Never",
                 "containers": [{"name": "job", "image": image, "command": list(command),
                                 "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                                 "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]},
    }


def session_address(pods: Sequence[Pod | None]) -> str | None:
    """How a running session's pod is reached (ADR 0063; its first pod for a gang), None while that is not
    known: the annotation `steward.io/session-address` when set (a Service's or an Ingress's URL, or what the
    session's process wrote on its own pod), `{pod_ip}` in it replaced by the pod's IP; else, once the pod runs
    with an IP, `ip:port` for the port the pod declares (the annotation `steward.io/session-port`, else a
    container port named `session`). The ledger checks what is reported (`session_address_problem`)."""
    pod = next((p for p in pods if p is not None), None)
    if pod is None or is_terminal(pod) or is_deleting(pod):
        return None
    status = pod.get("status") or {}
    ip = str(status.get("podIP") or "") if status.get("phase") == "Running" else ""
    host = f"[{ip}]" if ":" in ip else ip  # an IPv6 address in host:port and URLs
    stated = pod_annotations(pod).get(SESSION_ADDRESS, "").strip()
    if stated:
        if POD_IP not in stated:
            return stated
        return stated.replace(POD_IP, host) if host else None
    if not host:
        return None
    port = pod_annotations(pod).get(SESSION_PORT, "").strip()
    if not port:
        declared = [str(p.get("containerPort", "")) for c in pod.get("spec", {}).get("containers") or []
                    for p in c.get("ports") or [] if p.get("name") == SESSION_PORT_NAME]
        port = declared[0] if declared else ""
    return f"{host}:{port}" if port else None


def exit_code(pod: Pod) -> int:
    """A finished pod's exit code: the first non-zero of its containers' (0 when all succeeded)."""
    codes = [int(((s.get("state") or {}).get("terminated") or {}).get("exitCode", 0))
             for s in pod.get("status", {}).get("containerStatuses") or []]
    failed = [c for c in codes if c]
    if failed:
        return failed[0]
    return 1 if pod.get("status", {}).get("phase") == "Failed" else 0


MESSAGE_MAX = 1000  # an Event's message is cut at 1 KiB by the API server; the pointer to the evidence stays


def queued_message(job_id: str, position: int | None = None, of: int = 0, reason: str = "", text: str = "") -> str:
    """What a waiting pod's PodScheduled condition says: the job, its place in Steward's queue and the
    scheduler's reason when known, and always the pointer to the evidence (`steward explain <job>`)."""
    pointer = f"; evidence: steward explain {job_id}"
    if position is None:
        return f"queued in Steward as job {job_id}{pointer}"
    head = f"queued in Steward as job {job_id}: position {position} of {of}"
    why = f"; {reason}: {text}" if reason and text else (f"; {reason}" if reason else "")
    room = MESSAGE_MAX - len(head) - len(pointer)
    if len(why) > room:
        why = why[:max(room - 3, 0)] + "..."
    return head + why + pointer


def rejected_message(job_id: str, code: str, reason: str) -> str:
    """What the pods of a job the ledger rejected say: why, by the rule's code, and what to do (the job is not
    submitted again: a new pod is a new job)."""
    head = f"Steward rejected job {job_id}"
    tail = f" ({code or 'rejected'}); fix it and create the pod again"
    room = MESSAGE_MAX - len(head) - len(tail) - 2
    words = reason if len(reason) <= room else reason[:max(room - 3, 0)] + "..."
    return f"{head}: {words}{tail}"


def waiting_pods(pods: Iterable[Pod]) -> list[tuple[Pod, str]]:
    """Steward's pods that wait for a placement: labelled with their job, not bound, not ending; with the job."""
    return [(p, pod_labels(p)[JOB_LABEL]) for p in pods
            if pod_labels(p).get(JOB_LABEL) and not p.get("spec", {}).get("nodeName")
            and not is_deleting(p) and not is_terminal(p)]


NOTE_MAX = 500  # what of an operator's reason a node's annotation keeps (the ledger keeps it whole)


def drain_note(reason: str) -> str:
    """What a node Steward cordons for a drain says (`steward.io/drain-reason`, as `kubectl describe node` shows
    it): that the drain is Steward's, and the operator's reason recorded with it, when there is one."""
    reason = " ".join(reason.split())
    if len(reason) > NOTE_MAX:
        reason = reason[:NOTE_MAX - 3] + "..."
    return f"drained by Steward: {reason}" if reason else "drained by Steward"


def stop_message(job_id: str, attempt: int, kill: bool, grace_s: int, reason: str = "", for_job_id: str = "") -> str:
    """What a stopped pod's `StewardPreempted` event says: the kill, or the preemption with its reason (fair share,
    a session cap, an operator, a drain...) and whom it stopped for, the grace to checkpoint in, and always the
    pointer to the evidence."""
    why = (f": {reason}" if reason else "") + (f" (for job {for_job_id})" if for_job_id else "")
    if kill:
        return f"Steward ended job {job_id} attempt {attempt}{why}"
    head = f"Steward preempted job {job_id} attempt {attempt}{why}"
    tail = f"; {grace_s} s to checkpoint; evidence: steward explain {job_id}"
    if len(head) + len(tail) > MESSAGE_MAX:
        head = head[:max(MESSAGE_MAX - len(tail) - 3, 0)] + "..."
    return head + tail


# The kubelet's admission refusals (pkg/kubelet/lifecycle/predicate.go, the device manager): the pod never ran. On a
# node shared with another scheduler, Steward's view of the GPUs others hold lags theirs (ADR 0083): the pod bound
# second onto the same GPUs is refused (`UnexpectedAdmissionError`: "Allocate failed due to requested number of
# devices unavailable for nvidia.com/gpu"; or `OutOfnvidia.com/gpu`).
ADMISSION_REFUSALS = ("UnexpectedAdmissionError", "OutOf")


def admission_refusal(pod: Pod) -> str:
    """Why the node's kubelet refused to run this pod ("" when it did not: the pod ran, or failed otherwise): a
    Failed pod whose reason is an admission refusal and none of whose containers ever started."""
    status = pod.get("status", {})
    reason = str(status.get("reason") or "")
    if status.get("phase") != "Failed" or not reason.startswith(ADMISSION_REFUSALS):
        return ""
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if "running" in state or (state.get("terminated") or {}).get("startedAt"):
            return ""
    message = " ".join(str(status.get("message") or "").split())
    node = pod.get("spec", {}).get("nodeName") or "?"
    return f"node {node} refused pod {key(pod)}: {reason}" + (f": {message}" if message else "")
