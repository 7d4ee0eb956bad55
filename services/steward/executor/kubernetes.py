"""The Kubernetes executor (issue 26; docs/adr/0051-kubernetes-division-of-labour.md): Steward is the scheduler
of a cluster's GPU pods, behind the same activities as the node agent and the Slurm executor on
`executor-<id>`, so the JobRun workflow cannot tell them apart.

- Pods whose `schedulerName` is Steward's and that name a project (steward.executor.kubernetes_pods) become
  Steward jobs: the executor submits them (`SubmitJob`, job id `<executor>.<namespace>.<pod or gang>`), labels
  them with the job and tells their users where they stand (the PodScheduled condition, an event).
- `start_job`: binds the job's pods to the nodes Steward chose (the Binding API), after creating them again for
  a later attempt of a resumable job (from the pod the user submitted, with `STEWARD_RESUMED=1`), or, for a
  job submitted to Steward directly, creating a pod that runs its command. Reported started once they run. Since
  ADR 0088 the executor binds its pods' placements as soon as it reads them from Steward's API
  (steward.executor.kubernetes_binds), and the start finds them bound.
- `watch_job`: the pods' phases: an exit code when they end, the preemption's end when Steward deleted them.
- `signal_job`: the checkpoint request is a delete with the job's grace as the pod's termination grace period
  (the kubelet sends SIGTERM, then SIGKILL when the grace ends); the kill is a delete with no grace.
- `drain_node`: cordons the node (`spec.unschedulable`) with Steward's reason in `steward.io/drain-reason`.

What Steward says back (steward.executor.kubernetes_steward, ADR 0054): the namespace mappings admins recorded
(`steward k8s map`) decide a namespace's project, and each waiting pod's condition carries its job's position
and the scheduler's reason, read from the API every `steward_read_s` seconds and written only when they change.
A pod whose job the ledger rejected (ADR 0056: a namespace not mapped to its project, an unknown project, more
GPUs than the cluster has) reads `StewardRejected` with the ledger's reason instead, and is not submitted again.

Heartbeats name the attempts whose pods still run, as `down` the registered nodes that are NotReady or
cordoned by someone else, and as `foreign` the GPUs that other schedulers' pods hold per node
(steward.executor.kubernetes_inventory), as the Slurm executor's do. A node deleted from the cluster is retired
once missing for a while with none of Steward's pods on it (steward.executor.retirement, ADR 0078)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from steward.bus.envelope import Envelope, command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import (
    CancelJob,
    Command,
    RegisterNode,
    ReportHeartbeat,
    ReportJobStarted,
    ReportSessionAddress,
    SubmitJob,
)
from steward.domain.ids import shown
from steward.executor.attempts import AttemptRecord, AttemptStore, read_json, write_json
from steward.executor.cluster import heartbeat_loop, runs_over, serve, watch_attempt
from steward.executor.kubernetes_api import KubeClient, KubeError, credentials
from steward.executor.kubernetes_binds import FastBinds, PlacementFeed, claimed
from steward.executor.kubernetes_inventory import down_nodes, foreign_gpus, foreign_load, registrations
from steward.executor.kubernetes_inventory import name as node_name
from steward.executor.kubernetes_pods import (
    ATTEMPT_LABEL,
    CHECKPOINT,
    DRAIN_REASON,
    JOB_LABEL,
    PodJob,
    PodProblem,
    admission_refusal,
    bindings,
    command_pod,
    drain_note,
    exit_code,
    group_new_pods,
    is_deleting,
    is_terminal,
    key,
    parse_namespace_projects,
    pod_annotations,
    pod_job,
    pod_labels,
    queued_message,
    recreated,
    rejected_message,
    session_address,
    stop_message,
    waiting_pods,
)
from steward.executor.kubernetes_steward import Rejection, Standing, StewardApi, StewardUnreachable
from steward.executor.kubernetes_watch import ClusterView, Obj
from steward.executor.node_clusters import NodeClusters
from steward.executor.retirement import Retirements, warn_if_refused
from steward.executor.session_address import message_id as address_message_id
from steward.executor.settings import ClusterSettingError, ExecutorSettings
from steward.logs_temporal import CorrelationInterceptor
from steward.metrics import executor_jobs
from steward.metrics import serve as serve_metrics
from steward.paths import UnsafePath, under
from steward_workflows.payloads import (
    JobRunInput,
    NodeRef,
    ProcessOutcome,
    ProcessStarted,
    SignalJob,
    SignalResult,
    WatchJob,
    executor_task_queue,
    job_run_workflow_id,
)

log = logging.getLogger("steward.executor.kubernetes")

IO_THREADS = 16
# ADR 0074: a round's submissions are labelled and told (two or three API calls a pod) by this many threads at once
SUBMIT_THREADS = 8
# ADR 0074: how long a watch or a start waits for a round's list of Steward's pods newer than it needs, before it
# asks the API server for its own pods (a round stuck on a slow API server must not stop a watch)
VIEW_WAIT_S = 5.0
# ADR 0074: activities served at once. Every running attempt holds a `watch_job`; read from the round's view they
# cost a dict lookup a second, so the bound is memory, not the API server (1,024 left ~1,600 running pods unwatched)
MAX_ACTIVITIES = 8192
KILLED_EXIT_CODE = -9
PREEMPTED_EXIT_CODE = -15  # the pod ended at its delete: SIGTERM, then SIGKILL when its grace ended
KUBE_FAILED = "KubernetesFailed"
# a gang's bind failed and the pods bound for the attempt were deleted: the start fails, the job is requeued
BIND_UNDONE = "StewardBindUndone"
QUEUED_REASON = "StewardQueued"
# ADR 0089: a start whose binds keep failing is tried this many times (the JobRun's retry policy spaces the tries 1, 2,
# 4, 5, 5 s apart: about 17 s), then fails for good with the API server's last answer: the attempt is reported lost
# and the job queued again
BIND_TRIES = 6
BIND_FAILED = "StewardBindFailed"
# ADR 0089: a submitted pod deleted in Kubernetes before Steward ever bound or deleted any of its job's pods: its user
# ended it; the job is cancelled with that reason, not started with a pod made again
POD_DELETED = "StewardPodDeleted"
# the previous attempt's pod, which this attempt's replaces, is still within its grace: retried (not a failing bind,
# not counted against BIND_TRIES: a grace may be minutes)
POD_ENDING = "StewardPodEnding"
REJECTED_REASON = "StewardRejected"


class KubernetesSettings(BaseSettings):
    """Where the cluster is (prefix STEWARD_K8S_): a kubeconfig (empty: $KUBECONFIG, the pod's service account,
    ~/.kube/config), the scheduler name pods give to be Steward's, how often the API server is polled, how long
    a bound pod may take to run before it is reported started anyway, and, for jobs submitted to Steward
    directly rather than as pods, the namespace and image of the pod that runs their command."""

    model_config = SettingsConfigDict(env_prefix="STEWARD_K8S_", extra="ignore")

    kubeconfig: str = ""
    scheduler_name: str = "steward"
    poll_s: float = 1.0
    start_wait_s: float = 60.0
    namespace: str = "default"
    image: str = "busybox:stable"
    # the namespaces whose pods Steward governs, comma-separated (empty: every namespace); the Helm chart
    # grants the executor pod rights in these alone, so a Steward pod elsewhere is left unsubmitted
    namespaces: str = ""
    # Steward's API, read for the namespace mappings admins recorded and the waiting jobs' reasons and
    # positions (ADR 0054), with a read-only (auditor) token kept in a file; every `steward_read_s` seconds
    api_url: str = ""
    api_token_file: str = ""
    steward_read_s: float = 5.0
    # bootstrap only, used while `api_url` is empty (a cluster not yet reading Steward's API, and tests):
    # namespace=project pairs, comma-separated; with the API the recorded mappings alone hold
    namespace_projects: str = ""
    # ADR 0088: bind each placement as soon as it is read from Steward's API (`api_url`), every `placements_read_s`,
    # rather than when the JobRun's start_job reaches the executor (the start then finds the pods bound)
    bind_placements: bool = True
    placements_read_s: float = 1.0
    # ADR 0089: the rounds read a view the API server's watches keep current (false: list every round, ADR 0074)
    watch: bool = True


def pid_of(job_id: str, attempt: int) -> int:
    """A stable positive number standing for an attempt's pods where a report wants a process id."""
    return zlib.crc32(f"{job_id}/{attempt}".encode()) or 1


def outcome_of(rec: AttemptRecord, pods: Sequence[Mapping[str, Any] | None], now: float) -> ProcessOutcome | None:
    """What an attempt's pods say (None while they run): a failed pod's exit code, 0 when all succeeded, the
    kill or the preemption when Steward deleted them, "vanished" when they went without Steward or their end,
    "refused" (with the kubelet's reason) when a node refused to admit one (ADR 0083)."""
    live = [p for p in pods if p is not None]
    failed = [p for p in live if p.get("status", {}).get("phase") == "Failed"]
    refused = [r for r in map(admission_refusal, failed) if r]
    if refused and not rec.signalled_at:  # ADR 0083: never ran, no fault of the job's: requeued with the reason
        return ProcessOutcome(rec.job_id, rec.attempt, -1, "refused", now,
                              reason=f"{'; '.join(refused)} (the job never ran there; queued again)")
    if failed:
        return ProcessOutcome(rec.job_id, rec.attempt, exit_code(failed[0]) or 1, "exited", now)
    if live and len(live) == len(pods) and all(p.get("status", {}).get("phase") == "Succeeded" for p in live):
        return ProcessOutcome(rec.job_id, rec.attempt, 0, "exited", now)
    if len(live) == len(pods) and not any(is_deleting(p) for p in live):
        return None
    if rec.killed:
        return ProcessOutcome(rec.job_id, rec.attempt, KILLED_EXIT_CODE, "exited", now, killed=True)
    if live and all(is_deleting(p) or is_terminal(p) for p in live):
        return None  # still within the grace of a delete: the pods end when it does
    if rec.signalled_at is not None:
        return ProcessOutcome(rec.job_id, rec.attempt, PREEMPTED_EXIT_CODE, "exited", now)
    if live:
        return None  # some pods of a gang gone, the rest running: wait for them (or their loss)
    return ProcessOutcome(rec.job_id, rec.attempt, -1, "vanished", now)


def address_report(rec: AttemptRecord, pods: Sequence[Mapping[str, Any] | None],
                   now: float) -> ReportSessionAddress | None:
    """What to report of a session's address (ADR 0063): the address its pods show now, when it differs from
    the last one reported for the attempt (`address_seen`); nothing for other jobs."""
    if rec.job_class != "interactive":
        return None
    address = session_address(pods)
    if not address or address == rec.extra.get("address_seen"):
        return None
    return ReportSessionAddress(rec.job_id, rec.attempt, address, now)


def split(pod_key: str) -> tuple[str, str]:
    namespace, _, name = pod_key.partition("/")
    return namespace, name


class KubernetesExecutor:
    def __init__(self, settings: Settings, publisher: CommandPublisher, kube: KubeClient,
                 options: ExecutorSettings | None = None, cluster: KubernetesSettings | None = None,
                 steward: Callable[[], Standing] | None = None) -> None:
        self.settings = settings
        self.publisher = publisher
        self.kube = kube
        self.options = options or ExecutorSettings()
        self.cluster = cluster or KubernetesSettings()
        # ADR 0085: the cluster its nodes are registered in ("": each keeps the one the ledger records for it)
        self.cluster_setting = self.options.checked_cluster()
        self.root = under(settings.run_dir / "executor", settings.executor_id)
        self.attempts = AttemptStore(self.root)
        self.manifests = self.root / "pods"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.registered: dict[str, RegisterNode] = {}
        self.node_clusters = NodeClusters(self.root)  # the cluster of each node's last registration (ADR 0085)
        self.retirements = Retirements(self.root / "retired.json")  # nodes deleted from the cluster (ADR 0078)
        self.busy: set[str] = set()  # the nodes of the attempts whose pods ran at the last heartbeat
        self.present: set[str] = set()  # every node the API server listed at the last inventory
        self.attempts_running = 0  # how many there were (`steward_executor_jobs`: a scrape asks nothing)
        self._starting: dict[tuple[str, int], asyncio.Lock] = {}
        self._changed = asyncio.Event()
        # what a round looks at, not the whole history: the manifests (job ids) not yet closed (started,
        # cancelled or rejected) and the attempts whose pods may still run, read from the disk once a process
        self._open_manifests: set[str] = set()
        self._open_attempts = {(r.job_id, r.attempt) for r in self.attempts.all() if r.extra.get("pods")}
        self._seen_alive: set[tuple[str, int]] = set()  # open attempts with a pod seen running by a round
        # the namespace mappings in force: the recorded ones once read from Steward (`steward`), else the
        # bootstrap setting; with `steward`, no pod is submitted before the first read
        self.steward = steward
        self.standing: Standing | None = None
        self._read_at = -1e18
        self._told: dict[str, str] = {}  # pod -> the Steward reason code its last event named
        self.namespace_projects = {} if steward else parse_namespace_projects(self.cluster.namespace_projects)
        self.governed = frozenset(n.strip() for n in self.cluster.namespaces.split(",") if n.strip())
        # job id -> what its pods say: the submissions the ledger rejected (kept in their manifests, ADR 0056)
        self.rejected: dict[str, str] = {}
        # ADR 0074: the pods of the last round's list (every pod naming Steward's scheduler, by `key`) and when that
        # list was asked for (monotonic): a watch or a start reads its pods there, not with a GET a pod a second
        self._view: dict[str, dict[str, Any]] = {}
        self._view_at = float("-inf")
        self._rounds = False  # whether `heartbeats` lists the pods every `poll_s` (the view is kept fresh)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._new_view = asyncio.Event()  # set (and replaced) when a round's list becomes the view
        self.binds = FastBinds(self)  # ADR 0088: binds from the placements read (`binds.read` set to read them)
        # ADR 0089: the watches that keep Steward's pods, the foreign load and the nodes current (while the rounds run)
        self.view: ClusterView | None = None
        self._view_changed_at = float("-inf")  # when the watch last changed a Steward pod (monotonic, the loop's)
        self._wake_pending = False
        for path in sorted(self.manifests.glob("*.json")):
            data = read_json(path) or {}
            if data.get("rejected") and data.get("job"):
                self.rejected[str(data["job"])] = str(data["rejected"])
            if not data.get("closed"):
                self._open_manifests.add(path.stem)

    # -- reporting --------------------------------------------------------------------------------

    def _envelope(self, command: Command, mid: str, correlation_id: str = "") -> Envelope:
        return command_envelope(command, actor=f"executor:{self.settings.executor_id}", role="system",
                                correlation_id=correlation_id or None, message_id=mid)

    def _report_now(self, command: Command, mid: str, correlation_id: str = "") -> None:
        self.publisher.publish(self._envelope(command, mid, correlation_id))

    async def _report(self, command: Command, mid: str, correlation_id: str = "") -> None:
        await asyncio.to_thread(self._report_now, command, mid, correlation_id)

    # -- inventory --------------------------------------------------------------------------------

    def _foreign(self) -> dict[str, int]:
        if self.view is not None and self.view.foreign.live:
            return foreign_gpus(self.view.foreign.items(), self.cluster.scheduler_name)
        return foreign_gpus(self.kube.pods(field_selector="spec.nodeName!="), self.cluster.scheduler_name)

    def _nodes(self) -> list[dict[str, Any]]:
        """Every node: the watched view while it is live (ADR 0089), else a list."""
        if self.view is not None and self.view.nodes.live:
            return self.view.nodes.items()
        return self.kube.nodes()

    def inventory(self) -> list[RegisterNode]:
        """The cluster's GPU nodes with their allocatable GPUs, in Topograph's tree (and, in `present`, the name of
        every node the API server lists: only a node deleted from it is retired, not one whose GPUs went to 0
        for a while, a device plugin restarting)."""
        nodes = self._nodes()
        self.present = {node_name(n) for n in nodes}
        listed = registrations(nodes, self.settings.executor_id, cluster=self.cluster_setting)
        # ADR 0085: without a setting, each node in the cluster the ledger records (as last read through the API),
        # else the one its last registration named
        recorded = self.standing.clusters if self.standing is not None else None
        return self.node_clusters.placed(listed, self.cluster_setting, recorded)

    def register_nodes(self) -> list[RegisterNode]:
        """Register the nodes whose registration changed (all of them the first time)."""
        nodes = self.inventory()
        sent = []
        for node in nodes:
            if self.registered.get(node.node_id) != node:
                warn_if_refused(node, log)
                self._report_now(node, self.retirements.register_id(node))
                self.registered[node.node_id] = node
                sent.append(node)
        self.node_clusters.sent(sent)
        self.retirements.registered(n.node_id for n in nodes)
        return nodes

    def retire_nodes(self, busy: set[str]) -> list[str]:
        """Retire the registered nodes the API server no longer lists (deleted) once missing for a while with no
        attempt of this executor's on them (ADR 0078); the nodes retired."""
        due = self.retirements.due(self.present, busy, time.monotonic(), "Kubernetes")
        for command, mid in due:
            self._report_now(command, mid)
            self.registered.pop(command.node_id, None)
            log.info("node %s retired: %s", command.node_id, command.reason)
        return [c.node_id for c, _ in due]

    # -- pods become jobs -------------------------------------------------------------------------

    def _manifest_path(self, job_id: str) -> Any:
        return under(self.manifests, f"{job_id}.json")

    def manifest(self, job_id: str) -> dict[str, Any] | None:
        try:
            return read_json(self._manifest_path(job_id))
        except UnsafePath:
            return None

    def _in_governed(self, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        if not self.governed:
            return list(pods)
        return [p for p in pods if p.get("metadata", {}).get("namespace", "default") in self.governed]

    def steward_pods(self) -> list[dict[str, Any]]:
        """Every pod that names Steward's scheduler in the governed namespaces (one list call); every one of them,
        governed or not, becomes the view the watches read (ADR 0074)."""
        if self.view is not None and self.view.steward.live:  # ADR 0089: kept current by the watch
            pods = self.view.steward.items()
        else:
            asked_at = time.monotonic()
            pods = self.kube.pods(field_selector=f"spec.schedulerName={self.cluster.scheduler_name}")
            self._view = {key(p): p for p in pods}
            self._view_at = asked_at  # after the view: a reader that sees the time sees that view or a newer one
            if self._loop is not None:  # wake the readers waiting for it (this runs in a thread of the loop's)
                self._loop.call_soon_threadsafe(self._viewed)
        if not self.governed:
            return pods
        return [p for p in pods if p.get("metadata", {}).get("namespace", "default") in self.governed]

    def pods_viewed(self) -> dict[str, dict[str, Any]]:
        """Steward's pods as last seen, by `key` (ADR 0088's binds read it): the watch's view, else the last round's
        list."""
        if self.view is not None and self.view.steward.live:
            return {key(p): p for p in self.view.steward.items()}
        return self._view

    def submit_pods(self, pods: Sequence[Mapping[str, Any]] | None = None) -> list[PodJob]:
        """Submit Steward's new pods as jobs (a gang once all its pods exist); a pod that makes no job is told
        why in its PodScheduled condition and an event, once."""
        if self.steward is not None and self.standing is None:
            return []  # the namespace mappings are not known yet: a pod could charge the wrong project
        if pods is None:
            pods = self.kube.pods(field_selector=f"spec.schedulerName={self.cluster.scheduler_name},spec.nodeName=")
        pods = self._in_governed(pods)
        submitted: list[PodJob] = []
        # labelled and told once the round's submissions are out
        told: list[tuple[list[Mapping[str, Any]], SubmitJob]] = []
        for group in group_new_pods(pods):
            try:
                job = pod_job(self.settings.executor_id, group, self.namespace_projects)
            except PodProblem as err:
                if "of its" not in str(err):  # a gang still arriving is no problem
                    for pod in group:
                        self._tell(pod, REJECTED_REASON, str(err), warning=True)
                continue
            job = self._unique(job, group)
            if self.manifest(job.command.job_id) is None:
                write_json(self._manifest_path(job.command.job_id), {
                    "pods": [dict(p) for p in sorted(group, key=key)], "gpus": list(job.gpus_per_pod),
                    "job": job.command.job_id})
                self._open_manifests.add(job.command.job_id)
                submitted.append(job)
            # else written before a crash, maybe never sent: sent again (the ledger keeps the first of a message id)
            told.append((list(group), job.command))
        if not told:
            return submitted
        # every submission of the round on the bus (acknowledged) before any pod says "queued"
        self.publisher.publish_many([self._envelope(c, f"submit-{c.job_id}") for _, c in told])
        # ADR 0074: one round's labels and conditions at once, not one pod's two or three calls after another's
        # the labels first (a placement may come back before the last), then what each pod says
        with ThreadPoolExecutor(max_workers=min(SUBMIT_THREADS, len(told)), thread_name_prefix="k8s-tell") as pool:
            list(pool.map(lambda done: self._label(done[0], done[1].job_id), told))
            list(pool.map(lambda done: self._tell_queued(done[0], done[1].job_id), told))
        for job in submitted:
            log.info("pods %s submitted as job %s", ", ".join(job.pods), job.command.job_id)
        return submitted

    def _tell_queued(self, group: Sequence[Mapping[str, Any]], job_id: str) -> None:
        for pod in group:
            self._tell(pod, QUEUED_REASON, queued_message(job_id))

    def _unique(self, job: PodJob, pods: Sequence[Mapping[str, Any]]) -> PodJob:
        """A pod deleted and created again under the same name is a new job: its id gains the pod's uid."""
        earlier = self.manifest(job.command.job_id)
        uids = sorted(str(p.get("metadata", {}).get("uid", "")) for p in pods)
        if earlier is None or sorted(str(p.get("metadata", {}).get("uid", "")) for p in earlier.get("pods") or []) \
                == uids:
            return job
        job_id = f"{job.command.job_id[:100 - 9]}.{uids[0].replace('-', '')[:8]}"
        return replace(job, command=replace(job.command, job_id=job_id))

    def _label(self, pods: Sequence[Mapping[str, Any]], job_id: str) -> None:
        for pod in pods:
            namespace, name = split(key(pod))
            with contextlib.suppress(KubeError):
                self.kube.patch_pod(namespace, name, {"metadata": {"labels": {JOB_LABEL: job_id,
                                                                             ATTEMPT_LABEL: "1"}}})

    def _tell(self, pod: Mapping[str, Any], reason: str, message: str, warning: bool = False,
              event: bool = True, unchanged: bool = False) -> bool:
        """The pod's PodScheduled condition and (`event`) an event, where `kubectl describe pod` shows them;
        nothing when the condition already says it. `unchanged`: only if the pod is still as listed (its
        resourceVersion as a precondition), so that a pod bound meanwhile keeps its PodScheduled=True.
        True when told."""
        namespace, name = split(key(pod))
        conditions = pod.get("status", {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("reason") == reason and c.get("message") == message
               for c in conditions):
            return False
        patch: dict[str, Any] = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}}
        version = pod.get("metadata", {}).get("resourceVersion")
        if unchanged and version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            self.kube.patch_pod(namespace, name, patch, status=True)
            if event:
                self.kube.event(namespace, pod, reason, message, "Warning" if warning else "Normal")
        except KubeError as err:
            if err.status != 409:  # 409: changed since listed (bound, say): the next round sees it as it is
                log.warning("could not tell pod %s/%s: %s", namespace, name, err)
            return False
        return True

    # -- what Steward says back ---------------------------------------------------------------------

    def refresh(self, now: float | None = None) -> bool:
        """Read Steward's namespace mappings and queue when `steward_read_s` has passed (True: read now). An
        API that does not answer leaves the last read in force (and, before any, submits nothing)."""
        now = time.monotonic() if now is None else now
        if self.steward is None or now - self._read_at < self.cluster.steward_read_s:
            return False
        self._read_at = now
        try:
            standing = self.steward()
        except StewardUnreachable as err:
            log.warning("Steward's API not read (namespace mappings and queue as last read): %s", err)
            return False
        if self.standing is None or standing.mappings != self.standing.mappings:
            log.info("namespace mappings in force: %s", ", ".join(f"{n}={p}" for n, p in
                                                                 sorted(standing.mappings.items())) or "none")
        self.standing, self.namespace_projects = standing, dict(standing.mappings)
        self.reject(standing.rejected)
        return True

    def read_first(self) -> bool:
        """Read Steward before the first registrations (ADR 0085: the clusters the ledger records for the nodes); an
        API not answering yet (`steward up` starts the executor before the API) is read again by the first round,
        not `steward_read_s` later. True: read."""
        if self.refresh():
            return True
        self._read_at = float("-inf")
        return False

    def reject(self, rejected: Mapping[str, Rejection]) -> list[str]:
        """The submissions the ledger rejected (ADR 0056): each job's manifest records why and is closed (no
        cancel when its pods go; nothing is submitted again for them), and its pods are told (`tell_rejected`).
        Returns the jobs newly rejected."""
        out = []
        for job_id, why in sorted(rejected.items()):
            data = self.manifest(job_id)
            if data is None or data.get("rejected"):
                continue  # not submitted by this executor's pods (or told already)
            message = rejected_message(job_id, why.code, why.reason)
            write_json(self._manifest_path(job_id), data | {"rejected": message, "closed": True})
            self.rejected[job_id] = message
            log.warning("the ledger rejected job %s (pods %s): %s", job_id,
                        ", ".join(key(p) for p in data.get("pods") or []), message)
            out.append(job_id)
        return out

    def tell_rejected(self, pods: Sequence[Mapping[str, Any]]) -> int:
        """Each unbound pod of a rejected job says so: its PodScheduled condition reads `StewardRejected` with the
        ledger's reason, and a Warning event says it once (not "queued" any more). Returns the pods told."""
        told = 0
        for pod, job_id in waiting_pods(pods):
            message = self.rejected.get(job_id)
            if message is not None and self._tell(pod, REJECTED_REASON, message, warning=True):
                told += 1
        return told

    def tell_waiting(self, pods: Sequence[Mapping[str, Any]]) -> int:
        """Each waiting pod's PodScheduled condition says its job's position and the scheduler's reason as last
        read; patched only when that changed, with an event only when the reason did (not at each move in the
        queue). A job not among the queue's first entries keeps what its pod says. Returns the pods patched."""
        if self.standing is None:
            return 0
        told = 0
        waiting = waiting_pods(pods)
        self._told = {k: r for k, r in self._told.items() if k in {key(p) for p, _ in waiting}}
        for pod, job_id in waiting:
            where = self.standing.waiting.get(job_id)
            if where is None:
                continue
            message = queued_message(job_id, where.position, where.of, where.reason, where.text)
            now = [c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
            if now and now[0].get("reason") == QUEUED_REASON and now[0].get("message") == message:
                continue
            pod_key = key(pod)
            if self._tell(pod, QUEUED_REASON, message, event=self._told.get(pod_key) != where.reason,
                          unchanged=True):
                self._told[pod_key] = where.reason
                told += 1
        return told

    def cancel_deleted(self, pods: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
        """Jobs whose pods were deleted before Steward started them: cancelled. A job once started (or
        cancelled) is not looked at again."""
        present = {key(p) for p in (self.steward_pods() if pods is None else pods)}
        cancelled = []
        for stem in sorted(self._open_manifests):
            path = self.manifests / f"{stem}.json"
            data = read_json(path) or {}
            job_id = str(data.get("job", ""))
            if (not job_id or data.get("closed") or data.get("bind_undone")
                    or self.attempts.load(job_id, 1) is not None):
                self._open_manifests.discard(stem)
                continue
            if any(key(p) in present for p in data.get("pods") or []):
                continue
            self._report_now(CancelJob(job_id, "its pods were deleted in Kubernetes"), f"cancel-{job_id}")
            write_json(path, data | {"closed": True})
            self._open_manifests.discard(stem)
            cancelled.append(job_id)
        return cancelled

    # -- activities -------------------------------------------------------------------------------

    def job_pods(self, job_id: str) -> list[dict[str, Any]]:
        """The job's pods that can still run (labelled with the job, not finished, not being deleted)."""
        return [p for p in self.kube.pods(label_selector=f"{JOB_LABEL}={job_id}")
                if not is_deleting(p) and not is_terminal(p)]

    def _pods_for(self, run: JobRunInput) -> tuple[list[dict[str, Any]], list[int]]:
        """The pods of this attempt: the user's for the first, recreated ones for a later attempt."""
        manifest = self.manifest(run.job_id)
        pods = self.job_pods(run.job_id)
        if manifest is not None and run.attempt == 1:
            pods = pods + self._not_yet_labelled(manifest, run.job_id, {key(p) for p in pods})
        if manifest is not None:
            gpus = [int(g) for g in manifest.get("gpus") or []]

            def current(p: Mapping[str, Any]) -> bool:  # this attempt's, or never bound (an attempt lost
                # before its pods were bound leaves them waiting: the next attempt takes them as they are)
                return (run.attempt == 1 or not p.get("spec", {}).get("nodeName")
                        or p.get("metadata", {}).get("labels", {}).get(ATTEMPT_LABEL) == str(run.attempt))

            submitted = {key(p) for p in manifest.get("pods") or []}
            if pods and all(current(p) for p in pods) and submitted <= {key(p) for p in pods}:
                return sorted(pods, key=key), gpus
            self._cancel_if_deleted_by_user(run, manifest, submitted - {key(p) for p in pods})
            for old in self.kube.pods(label_selector=f"{JOB_LABEL}={run.job_id}"):
                # an earlier attempt's pods (finished, or still bound though Steward ended that attempt): their
                # names are the new pods'
                if not current(old):
                    self._steward_deleted(run.job_id, key(old))
                    self.kube.delete_pod(*split(key(old)), 0)
            made = [p for p in pods if current(p)]
            kept = {key(p) for p in made}
            for original in manifest.get("pods") or []:
                if key(original) in kept:
                    continue
                pod = recreated(original, run.attempt, run.job_id)  # (a first attempt's: a pod gone before its bind)
                self._add_env(pod, run, resumed=run.attempt > 1)
                namespace = pod["metadata"].get("namespace", "default")
                made.append(self._create(namespace, pod))
            return sorted(made, key=key), gpus
        if pods:
            return pods, [sum(len(g) for g in run.assignments.values())]
        pod = command_pod(run.job_id, self.cluster.namespace, run.command,
                          sum(len(g) for g in run.assignments.values()), run.attempt, self.cluster.image,
                          self.cluster.scheduler_name, run.env)
        self._add_env(pod, run, resumed=bool(run.resume_from))
        return [self._create(self.cluster.namespace, pod)], [sum(len(g) for g in run.assignments.values())]

    def _steward_deleted(self, job_id: str, pod_key: str) -> None:
        """The manifest remembers a pod Steward deletes before it binds the job's next attempt (ADR 0089): its absence
        is then Steward's doing, not its user's."""
        manifest = self.manifest(job_id)
        if manifest is not None and pod_key not in (manifest.get("deleted_by_steward") or []):
            write_json(self._manifest_path(job_id),
                       manifest | {"deleted_by_steward": [*(manifest.get("deleted_by_steward") or []), pod_key]})

    def _cancel_if_deleted_by_user(self, run: JobRunInput, manifest: Mapping[str, Any], missing: set[str]) -> None:
        """ADR 0089: submitted pods gone before Steward ever bound or deleted any pod of the job (no attempt of it
        recorded here, no gang bind undone, no pod deleted by Steward) were deleted by their user (or whoever may
        delete pods in the namespace): the job is cancelled with that reason and the start fails for good
        (`POD_DELETED`), instead of making the pods again. A pod Steward deleted (a preemption, an undone gang) is made
        again for the next attempt, as before."""
        if not missing or manifest.get("bind_undone") or manifest.get("deleted_by_steward"):
            return
        if any(self.attempts.load(run.job_id, a) is not None for a in range(1, run.attempt + 1)):
            return
        why = (f"pod{'s' if len(missing) > 1 else ''} {', '.join(sorted(missing))} deleted in Kubernetes before "
               f"Steward bound {'them' if len(missing) > 1 else 'it'}")
        self._report_now(CancelJob(run.job_id, why), f"cancel-{run.job_id}")  # the round's cancel has the same id
        write_json(self._manifest_path(run.job_id), dict(manifest) | {"closed": True, "cancelled": why})
        self._open_manifests.discard(run.job_id)
        log.info("job %s cancelled: %s", run.job_id, why)
        raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {why}; the job is "
                               f"cancelled", type=POD_DELETED, non_retryable=True)

    def _not_yet_labelled(self, manifest: Mapping[str, Any], job_id: str, found: set[str]) -> list[dict[str, Any]]:
        """The submitted pods of a first attempt that its label does not find yet: the round labels a batch's pods
        after the whole batch is on the bus (ADR 0074), and a placement may come back first. Found by name, the same
        pod (its uid) still waiting; labelled now."""
        out = []
        for original in manifest.get("pods") or []:
            if key(original) in found:
                continue
            namespace, name = split(key(original))
            pod = self.kube.pod(namespace, name)
            uid = original.get("metadata", {}).get("uid")
            if (pod is None or pod.get("metadata", {}).get("uid") != uid or is_deleting(pod) or is_terminal(pod)
                    or pod_labels(pod).get(JOB_LABEL, job_id) != job_id):
                continue
            self._label([pod], job_id)
            out.append(pod)
        return out

    def _create(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.kube.create_pod(namespace, pod)
        except KubeError as err:
            if err.status == 409:  # the previous attempt's pod is still ending: a retry creates it
                raise ApplicationError(f"pod {namespace}/{pod['metadata'].get('name')} still exists: {err}",
                                       type=POD_ENDING) from None
            raise

    @staticmethod
    def _add_env(pod: dict[str, Any], run: JobRunInput, resumed: bool) -> None:
        checkpoint = pod_annotations(pod).get(CHECKPOINT, "")
        extra = {"STEWARD_JOB_ID": run.job_id, "STEWARD_ATTEMPT": str(run.attempt),
                 "STEWARD_RESUMED": "1" if resumed else "0"}
        if checkpoint:
            extra |= {"STEWARD_CHECKPOINT_DIR": checkpoint, "STEWARD_RESUME_FROM": checkpoint if resumed else ""}
        for container in pod.get("spec", {}).get("containers") or []:
            env = [e for e in container.get("env") or [] if e.get("name") not in extra]
            container["env"] = env + [{"name": k, "value": v} for k, v in extra.items()]

    def _bind(self, run: JobRunInput) -> AttemptRecord:
        """Bind the attempt's pods to the nodes Steward chose, all of them or none left bound: a bind that fails
        (the pod deleted or bound by someone else meanwhile, the API server refusing) deletes the pods already
        bound for this attempt (a bound pod cannot be unbound) and fails the start, not to be retried
        (`BIND_UNDONE`): the workflow reports the attempt lost with the reason and the ledger requeues the job;
        its next attempt makes the missing pods again from the submitted ones (`_pods_for`)."""
        pods, gpus = self._pods_for(run)
        if len(gpus) != len(pods):
            gpus = [sum(len(g) for g in run.assignments.values()) // max(len(pods), 1)] * len(pods)
        keys = [key(p) for p in pods]
        targets = bindings(keys, gpus, run.assignments)
        placed: list[Mapping[str, Any]] = []  # this attempt's pods bound where Steward placed them (earlier too)
        for pod in pods:
            try:
                self._bind_pod(pod, targets[key(pod)])
                placed.append(pod)
            except (KubeError, ApplicationError) as err:
                if len(pods) == 1:
                    raise
                why = err.message if isinstance(err, ApplicationError) else str(err)
                undone = self._undo_binds(run, placed, f"pod {key(pod)} not bound to {targets[key(pod)]}: {why}")
                where = f"pod {key(pod)} to {targets[key(pod)]}"
                raise ApplicationError(
                    f"job {shown(run.job_id)} attempt {run.attempt} not bound: gang of {len(pods)} pods not bound: "
                    f"{where}: {why}; undone: {', '.join(undone) or 'no pod was bound'} deleted", type=BIND_UNDONE,
                    non_retryable=True) from None
        log.info("job %s attempt %s: %s", run.job_id, run.attempt,
                 ", ".join(f"{p} -> {n}" for p, n in sorted(targets.items())))
        rec = AttemptRecord(run.job_id, run.attempt, list(run.command), dict(run.assignments), "", run.job_class,
                            pid=pid_of(run.job_id, run.attempt),
                            extra={"pods": keys, "grace_s": run.timings.grace_s})
        saved = self.attempts.save(rec)
        self._open_attempts.add((rec.job_id, rec.attempt))
        return saved

    def _bind_pod(self, pod: Mapping[str, Any], node: str) -> None:
        """Bind one pod to `node` (a pod bound there before is left as it is; one bound elsewhere is an error)."""
        namespace, name = split(key(pod))
        bound = pod.get("spec", {}).get("nodeName")
        if bound == node:
            return
        if bound:
            raise ApplicationError(f"pod {key(pod)} is bound to {bound}, Steward placed it on {node}",
                                   type=KUBE_FAILED, non_retryable=True)
        try:
            self.kube.bind(namespace, name, node)
        except KubeError as err:
            fresh = self.kube.pod(namespace, name)
            if fresh is None or fresh.get("spec", {}).get("nodeName") != node:
                raise
            log.info("pod %s was already bound to %s (%s)", key(pod), node, err)

    def _undo_binds(self, run: JobRunInput, placed: Sequence[Mapping[str, Any]], why: str) -> list[str]:
        """A gang's failed bind: the pods bound for this attempt are deleted (no grace: they have not been reported
        started), each told why; the manifest remembers it so that a round does not take the pods' absence for
        the user's cancel (`cancel_deleted`). The deleted pods' keys."""
        undone = []
        for pod in placed:
            namespace, name = split(key(pod))
            with contextlib.suppress(KubeError):
                self.kube.event(namespace, pod, BIND_UNDONE, f"Steward unbound job {run.job_id} attempt "
                                f"{run.attempt} (all of a gang's pods or none): {why}; the job is queued again",
                                "Warning")
            try:
                if self.kube.delete_pod(namespace, name, 0):
                    undone.append(key(pod))
            except KubeError as err:  # still bound: the next attempt deletes it before it binds (`_pods_for`)
                log.warning("job %s attempt %s: pod %s not deleted: %s", run.job_id, run.attempt, key(pod), err)
        manifest = self.manifest(run.job_id)
        if manifest is not None:
            write_json(self._manifest_path(run.job_id), manifest | {"bind_undone": run.attempt})
        log.warning("job %s attempt %s: %s; deleted the pods bound for it: %s", run.job_id, run.attempt, why,
                    ", ".join(undone) or "none")
        return undone

    @activity.defn(name="start_job")
    async def start_job(self, run: JobRunInput) -> ProcessStarted:
        try:
            self.attempts.job_dir(run.job_id)
        except UnsafePath as err:
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {err}",
                                   type=KUBE_FAILED, non_retryable=True) from None
        async with self._starting.setdefault((run.job_id, run.attempt), asyncio.Lock()):
            try:  # ADR 0088: the record (bound by an earlier start, or from the placement: claimed), or bound now
                rec = await asyncio.to_thread(self.binds.for_start, run)  # (refused for an attempt older than one here)
            except (KubeError, PodProblem, ApplicationError) as err:
                raise self._bind_failure(run, err, activity.info().attempt) from None
            if not rec.started_at:
                rec = await self._until_running(rec)
        self._starting.pop((run.job_id, run.attempt), None)
        await self._report(ReportJobStarted(run.job_id, run.attempt, rec.pid, rec.started_at),
                           f"started-{run.job_id}-{run.attempt}", run.correlation_id)
        self._changed.set()
        return ProcessStarted(run.job_id, run.attempt, rec.pid, rec.started_at, rec.checkpoint_dir, rec.resumed_from)

    def _bind_failure(self, run: JobRunInput, err: Exception, tries: int) -> ApplicationError:
        """ADR 0089: what a start that could not bind says: retried (`KUBE_FAILED`) until its `BIND_TRIES`th try, then
        not (`BIND_FAILED`, with the API server's answer): the JobRun reports the attempt lost with it. A failure that
        is final already (a gang undone, a pod deleted by its user) stays as it is, and so does the wait for an
        earlier attempt's pod to end (`POD_ENDING`: retried as long as its grace lasts)."""
        if isinstance(err, ApplicationError):
            if err.non_retryable or err.type == POD_ENDING:
                return err
            why = err.message
        else:
            why = str(err)
        if tries < BIND_TRIES:
            return ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not bound: {why}",
                                    type=KUBE_FAILED)
        log.warning("job %s attempt %s: not bound after %d tries: %s", run.job_id, run.attempt, tries, why)
        return ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not bound after {tries} tries: {why}",
                                type=BIND_FAILED, non_retryable=True)

    def pods_of(self, rec: AttemptRecord) -> list[dict[str, Any] | None]:
        return [self.kube.pod(*split(k)) for k in rec.extra.get("pods") or []]

    def _viewed(self) -> None:
        self._new_view.set()
        self._new_view = asyncio.Event()

    def _watched(self, kind: str, pod: Obj) -> None:
        """A change of Steward's pods from the watch (in its thread): the readers waiting for one are woken (once for
        a burst of changes), and the round at once for a pod added or deleted (a new job, a cancel)."""
        loop = self._loop
        if loop is None:
            return
        if kind in ("ADDED", "DELETED"):
            loop.call_soon_threadsafe(self._changed.set)
        if not self._wake_pending:
            self._wake_pending = True
            loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        self._wake_pending = False
        self._view_changed_at = time.monotonic()
        self._viewed()

    async def pods_seen(self, rec: AttemptRecord, after: float) -> list[dict[str, Any] | None]:
        """The attempt's pods as the first round's list asked for after `after` (monotonic) shows them (None: not
        there), waiting for that round; from the API server itself (a GET a pod) when no such list came within
        `VIEW_WAIT_S` or three polls (ADR 0074: thousands of watches read one list a round, not a GET each a second)."""
        if not self._rounds:  # no rounds (an executor driven by hand, as in its tests): ask the API server
            return await asyncio.to_thread(self.pods_of, rec)
        watched = self.view is not None and self.view.steward.live
        if watched and self._view_changed_at <= after:
            # ADR 0089: the watch keeps the view current; a reader that saw it after `after` waits for its next
            # change, a poll at most (a start waiting for its pods to run, a watch between two looks)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new_view.wait(), timeout=self.cluster.poll_s)
        deadline = time.monotonic() + max(VIEW_WAIT_S, 3 * self.cluster.poll_s)
        while True:
            if self.view is not None and self.view.steward.live:  # (or live since: its first list came meanwhile)
                return [self.view.steward.get(k) for k in rec.extra.get("pods") or []]
            if self._view_at > after:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return await asyncio.to_thread(self.pods_of, rec)
            with contextlib.suppress(TimeoutError):  # woken by the next round's list or the watch's (not a timer)
                await asyncio.wait_for(self._new_view.wait(), timeout=left)
        view = self._view
        return [view.get(k) for k in rec.extra.get("pods") or []]

    async def _until_running(self, rec: AttemptRecord) -> AttemptRecord:
        """Wait (heartbeating) until the kubelets run the pods (or end them), `start_wait_s` at most: each look is a
        round's list asked for after the last look (the first after the bind)."""
        began = after = time.monotonic()
        deadline = began + self.cluster.start_wait_s
        timeout = activity.info().heartbeat_timeout
        quiet_s = timeout.total_seconds() / 3 if timeout else 0.0
        while time.monotonic() < deadline:
            pods = await self.pods_seen(rec, after)
            after = time.monotonic()
            if all(p is None or p.get("status", {}).get("phase") not in (None, "Pending") for p in pods):
                break
            if after - began >= quiet_s:  # ADR 0074: a start that runs within a third of its heartbeat window sends
                activity.heartbeat("pods pending")  # no heartbeat (each is a write on the server)
        else:
            log.warning("job %s attempt %s: pods not running after %.0f s; reported started", rec.job_id,
                        rec.attempt, self.cluster.start_wait_s)
        return self.attempts.update(rec, started_at=time.time())

    @activity.defn(name="watch_job")
    async def watch_job(self, watch: WatchJob) -> ProcessOutcome:
        rec = self.attempts.load(watch.job_id, watch.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {watch.attempt} of {watch.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        return await watch_attempt(watch, rec, self.cluster.poll_s, self._outcome)

    async def _outcome(self, rec: AttemptRecord) -> ProcessOutcome | None:
        # a list at most one poll old: the watch was taken after its start saw the pods bound in a newer list
        pods = await self.pods_seen(rec, time.monotonic() - self.cluster.poll_s)
        current = self.attempts.load(rec.job_id, rec.attempt) or rec
        outcome = outcome_of(current, pods, time.time())
        if outcome is not None:
            self._changed.set()
            return outcome
        found = address_report(current, pods, time.time())
        if found is not None:  # a session says how to reach it, once per change (ADR 0063)
            await self._report(found, address_message_id(found.job_id, found.attempt, found.address))
            self.attempts.update(current, extra=current.extra | {"address_seen": found.address})
        return None

    def delete_pods(self, rec: AttemptRecord, grace_s: int, reason: str) -> bool:
        deleted = False
        for pod in self.pods_of(rec):
            if pod is None or is_terminal(pod):
                continue
            namespace, name = split(key(pod))
            with contextlib.suppress(KubeError):
                self.kube.event(namespace, pod, "StewardPreempted", reason, "Warning")
            deleted = self.kube.delete_pod(namespace, name, grace_s) or deleted
        return deleted

    @activity.defn(name="signal_job")
    async def signal_job(self, request: SignalJob) -> SignalResult:
        rec = self.attempts.load(request.job_id, request.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {request.attempt} of {request.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        grace = 0 if request.kill else int(float(rec.extra.get("grace_s", 0)))
        name = "SIGKILL" if request.kill else (request.signal or self.options.checkpoint_signal)
        # record first: a delete that lands while we crash must still read as Steward's on re-attach
        rec = self.attempts.update(rec, killed=rec.killed or request.kill,
                                   signalled_at=rec.signalled_at or time.time())
        why = stop_message(rec.job_id, rec.attempt, request.kill, grace, request.reason, request.for_job_id)
        try:
            delivered = await asyncio.to_thread(self.delete_pods, rec, grace, why)
        except KubeError as err:
            log.warning("%s not delivered to job %s attempt %s: %s", name, rec.job_id, rec.attempt, err)
            return SignalResult(rec.job_id, rec.attempt, False, name)
        log.info("%s: job %s attempt %s deleted with grace %d s", name, rec.job_id, rec.attempt, grace)
        self._changed.set()
        return SignalResult(rec.job_id, rec.attempt, delivered, name)

    @activity.defn(name="drain_node")
    async def drain_node(self, node: NodeRef) -> None:
        note = drain_note(node.reason)
        await asyncio.to_thread(self.kube.patch_node, node.node_id, {
            "metadata": {"annotations": {DRAIN_REASON: note}}, "spec": {"unschedulable": True}})
        self.attempts.set_drained(self.attempts.drained() | {node.node_id})
        self._changed.set()
        log.info("node %s cordoned (%s)", node.node_id, note)

    @activity.defn(name="resume_node")
    async def resume_node(self, node: NodeRef) -> None:
        """The node was resumed in Steward: uncordoned if the cordon was Steward's (one an operator made with
        `kubectl cordon` stays theirs). Read from the API server, not the watched view: a resume right after a
        drain came before the watch delivered the drain's cordon, and the node stayed cordoned for good."""
        current = await asyncio.to_thread(self.kube.node, node.node_id)
        notes = (current or {}).get("metadata", {}).get("annotations") or {}
        if current is not None and DRAIN_REASON in notes:
            await asyncio.to_thread(self.kube.patch_node, node.node_id, {
                "metadata": {"annotations": {DRAIN_REASON: None}}, "spec": {"unschedulable": False}})
            log.info("node %s uncordoned", node.node_id)
        self.attempts.set_drained(self.attempts.drained() - {node.node_id})
        self._changed.set()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.start_job, self.watch_job, self.signal_job, self.drain_node, self.resume_node]

    # -- lifecycle --------------------------------------------------------------------------------

    def running(self, pods: Sequence[Mapping[str, Any]] | None = None) -> list[AttemptRecord]:
        """The attempts whose pods still run (one list of Steward's pods for all of them). Only the open attempts
        are read: one is closed when none of its pods runs any more after a round saw one running or its start
        was reported (a pod that ended or went does not come back; a resumed job's pods are a new attempt's)."""
        recs = [r for job_id, attempt in sorted(self._open_attempts)
                if (r := self.attempts.load(job_id, attempt)) is not None and r.extra.get("pods")]
        if not recs:
            return []
        alive = {key(p) for p in (self.steward_pods() if pods is None else pods) if not is_terminal(p)}
        for r in recs:
            ident = (r.job_id, r.attempt)
            if any(k in alive for k in r.extra["pods"]):
                self._seen_alive.add(ident)
            elif ident in self._seen_alive or r.started_at:
                self._seen_alive.discard(ident)
                self._open_attempts.discard(ident)
        return [r for r in recs if outcome_of(r, [{} if k in alive else None for k in r.extra["pods"]], 0) is None
                and any(k in alive for k in r.extra["pods"])]

    def heartbeat(self, pods: Sequence[Mapping[str, Any]] | None = None) -> ReportHeartbeat:
        recs = self.running(pods)
        self.busy = busy = {n for r in recs for n in r.nodes}
        self.attempts_running = len(recs)
        down: list[str] = []
        foreign: dict[str, int] = {}
        if self.registered:
            nodes_now = self._nodes()
            down = down_nodes(nodes_now, set(self.registered))
            foreign = foreign_load(nodes_now, self._foreign(), {n: r.gpus for n, r in self.registered.items()})
        nodes = sorted(busy | self.attempts.drained())
        return ReportHeartbeat(self.settings.executor_id, {r.job_id: r.attempt for r in recs}, nodes, down, foreign)

    def round(self) -> ReportHeartbeat:
        """One pass over one list of Steward's pods: new ones submitted, deleted ones cancelled, changed nodes
        registered, the heartbeat, and nodes deleted from the cluster retired (ADR 0078)."""
        self.refresh()
        pods = self.steward_pods()
        self.submit_pods(pods)
        self.tell_rejected(pods)
        self.tell_waiting(pods)
        self.cancel_deleted(pods)
        self.register_nodes()
        beat = self.heartbeat(pods)
        retired = self.retire_nodes(self.busy)
        return replace(beat, down=[n for n in beat.down if n not in retired]) if retired else beat

    async def heartbeats(self, stop: asyncio.Event) -> None:
        """Every `poll_s`: new pods become jobs, and `ReportHeartbeat` goes out on every change (and at a low
        rate otherwise)."""
        self._rounds, self._loop = True, asyncio.get_running_loop()
        if self.cluster.watch:  # ADR 0089: list once, then watch; the rounds read the view
            self.view = ClusterView.of(self.kube, self.cluster.scheduler_name, on_steward=self._watched).start()
            if not await asyncio.to_thread(self.view.synced, VIEW_WAIT_S):
                log.warning("the API server's watches are not synced yet: the rounds list until they are")
        try:
            await heartbeat_loop(stop, self._changed, self.round, self._report, self.settings.executor_id,
                                 self.cluster.poll_s, self.options.heartbeat_report_s)
        finally:
            if self.view is not None:
                await asyncio.to_thread(self.view.stop)

    async def reconcile(self, client: Client) -> list[str]:
        """Delete the pods whose JobRun is over (they were left while this executor was down)."""
        stopped = []
        # ADR 0088: an attempt bound from its placement and not yet claimed by a start has no JobRun yet by design
        claimed_only = [r for r in await asyncio.to_thread(self.running) if claimed(r)]
        for rec in await runs_over(client, claimed_only):
            log.warning("deleting the orphan pods of job %s attempt %s (its run is over)", rec.job_id, rec.attempt)
            rec = self.attempts.update(rec, killed=True)
            await asyncio.to_thread(self.delete_pods, rec, 0, "its run in Steward is over")
            stopped.append(job_run_workflow_id(rec.job_id, rec.attempt))
        return stopped


async def run_kubernetes_executor(settings: Settings, stop: asyncio.Event | None = None) -> None:
    try:
        ExecutorSettings().checked_cluster()  # before anything starts: a bad name is the one line it prints
    except ClusterSettingError as err:
        raise SystemExit(str(err)) from None
    stop = stop or asyncio.Event()
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="k8s-io"))
    cluster = KubernetesSettings()
    kube = KubeClient(credentials(cluster.kubeconfig))
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                  interceptors=[CorrelationInterceptor()])
    serve_metrics("executor", settings)  # first: its /ready says so while the publisher waits for Kafka (ADR 0064)
    publisher = CommandPublisher(settings)
    api = StewardApi(cluster.api_url, cluster.api_token_file, settings.executor_id) if cluster.api_url else None
    if api is None:
        log.warning("STEWARD_K8S_API_URL is not set: namespace mappings from STEWARD_K8S_NAMESPACE_PROJECTS "
                    "(bootstrap), and pods are not told their queue position")
    elif cluster.namespace_projects:
        log.warning("STEWARD_K8S_NAMESPACE_PROJECTS is ignored: the mappings recorded in Steward hold "
                    "(`steward k8s map`)")
    try:
        executor = KubernetesExecutor(settings, publisher, kube, cluster=cluster,
                                      steward=api.read if api is not None else None)
    except PodProblem as err:
        raise SystemExit(f"STEWARD_K8S_NAMESPACE_PROJECTS: {err}") from None
    executor_jobs(settings.executor_id, lambda: executor.attempts_running)  # as of the last round
    await asyncio.to_thread(executor.read_first)  # the recorded clusters of its nodes first (ADR 0085)
    nodes = await asyncio.to_thread(executor.register_nodes)
    stopped = await executor.reconcile(client)
    if stopped:
        log.info("deleted the pods of %d orphan attempt(s): %s", len(stopped), ", ".join(stopped))
    log.info("Kubernetes executor %s serving %s as scheduler %r: %d node(s), %d GPU(s)", settings.executor_id,
             executor_task_queue(settings.executor_id), cluster.scheduler_name, len(nodes),
             sum(n.gpus for n in nodes))
    if api is not None and cluster.bind_placements:  # ADR 0088: binds from the placements read
        executor.binds.read = PlacementFeed(api).read  # the same connection to the API as the standing's

    async def loops() -> None:
        await asyncio.gather(executor.heartbeats(stop), executor.binds.run(stop, cluster.placements_read_s))

    await serve(client, settings, executor.activities(), loops(), stop, MAX_ACTIVITIES)
    publisher.close()
    kube.close()
    if api is not None:
        api.close()
