"""Kubernetes benchmark: GPU pods bound by Steward through the whole stack, beside kube-scheduler binding the same
pods on the same API server in the same run (the reference anchor; issue 26).

    steward up --executor kubernetes                 # the stack to measure (its API server: infra/k8s.sh's, or
                                                     # the one STEWARD_K8S_KUBECONFIG names)
    steward bench k8s --nodes 200 --pods 2000 --json

Setup (not timed): `--nodes` kwok nodes `bench-k8s-<i>` of `--gpus` GPUs (Topograph labels: one block per 8
nodes), the namespace `bench-k8s` mapped (an admin's `MapNamespace`, which the ledger checks every submission
against: ADR 0056) to the project `bench-k8s`, share 0 under the root (unfunded, idle capacity); the bench waits
until Steward has registered every node.
Steward's round: `--pods` pods `st<run>-<i>` of `--gpus-per-pod` GPUs naming the scheduler `steward`, created by
`--concurrency` clients, each running `--run-s` seconds (kwok's completion stage). The anchor's round: the same
pods as `ks<run>-<i>` naming `default-scheduler`, bound by a kube-scheduler the bench starts on the same API server
(built by infra/k8s.sh). A pod's latency is from just before its create call to the watch event that first
shows it bound; `bound_per_s` is pods ÷ (last bound − first create). `ratio_p50` is Steward's p50 over
kube-scheduler's (same run, same machine)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from steward.bench.lease import _execute, _percentile
from steward.config import Settings
from steward.domain.commands import MapNamespace, SetAllocations
from steward.executor.kubernetes import KubernetesSettings
from steward.executor.kubernetes_api import KubeClient, KubeError, credentials
from steward.executor.kubernetes_pods import JOB_LABEL

PROJECT = "bench-k8s"
NAMESPACE = "bench-k8s"
REPO = Path(__file__).resolve().parents[3]


PROGRESS_S = 30.0  # a progress line on stderr at least this often while the bench waits or a round runs


def say(line: str) -> None:
    sys.stderr.write(f"steward bench k8s: {line}\n")
    sys.stderr.flush()


def round_progress(scheduler: str, bound: int, pods: int, elapsed_s: float) -> str:
    """One progress line of a round: how many of its pods are bound after how long."""
    return f"{scheduler}: {bound} of {pods} pods bound after {elapsed_s:.0f} s"


class BenchError(Exception):
    """The bench cannot run as asked; the message says why (printed, exit 2)."""


def kubeconfig(settings: Settings) -> str:
    named = KubernetesSettings().kubeconfig or os.environ.get("KUBECONFIG", "")
    return named or str(settings.run_dir / "k8s" / "kubeconfig")


def ensure(kube: KubeClient, path: str, body: dict[str, Any]) -> None:
    try:
        kube.call("POST", path, body=body)
    except KubeError as err:
        if err.status != 409:  # already there
            raise


def setup(settings: Settings, kube: KubeClient, nodes: int, gpus: int) -> list[str]:
    _execute(settings, SetAllocations("cluster", {PROJECT: 0.0}, "k8s benchmark (unfunded, idle capacity)"))
    _execute(settings, MapNamespace(settings.executor_id, NAMESPACE, PROJECT, "k8s benchmark: its pods' project"))
    ensure(kube, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    res = {"nvidia.com/gpu": str(gpus), "cpu": "256", "memory": "2Ti", "pods": "1000"}
    names = [f"bench-k8s-{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        ensure(kube, "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "nvidia.com/gpu.product": "BENCH",
                                    "network.topology.nvidia.com/spine": "bench-spine",
                                    "network.topology.nvidia.com/block": f"bench-block{i // 8}"}},
            "status": {"allocatable": res, "capacity": res}})
    return names


def node_states(settings: Settings) -> dict[str, str]:
    """Each registered node's state in Steward (empty when the CLI cannot answer yet)."""
    out = subprocess.run([sys.executable, "-m", "steward.cli.main", "node", "list", "--output", "json"],
                         capture_output=True, text=True, timeout=120, cwd=REPO, env=os.environ.copy())
    if out.returncode != 0:
        return {}
    return {str(n["id"]): str(n.get("state")) for n in json.loads(out.stdout)}


def not_ready(names: list[str], states: dict[str, str]) -> str | None:
    """Why the bench's nodes are not all ready in Steward, in words (None when they are): how many are not
    registered yet and how many are in each other state (draining ones are usually a previous run's drain
    left in the same run folder, which Steward keeps: the bench never places on them)."""
    missing = [n for n in names if n not in states]
    others: dict[str, int] = {}
    for n in names:
        if n in states and states[n] != "ready":
            others[states[n]] = others.get(states[n], 0) + 1
    if not missing and not others:
        return None
    parts = [f"{len(missing)} not registered yet"] if missing else []
    parts += [f"{count} {state}" for state, count in sorted(others.items())]
    hint = (" (a drain left by an earlier run in this run folder: `steward node resume NODE --reason ...`, or a "
            "fresh STEWARD_RUN_DIR)" if "draining" in others else "")
    return f"{len(names) - len(missing) - sum(others.values())} of the bench's {len(names)} nodes ready in Steward; " \
           f"{', '.join(parts)}{hint}"


def wait_ready(names: list[str], states: Callable[[], dict[str, str]], timeout: float,
               tell: Callable[[str], None] = say, every_s: float = PROGRESS_S, poll_s: float = 1.0) -> None:
    """Until every node of `names` is ready in Steward: says why it waits every `every_s`, and that the wait is over
    once it said it waited (the last line must not read "waiting" through the rounds that follow); gives up after
    `timeout` with the reason."""
    deadline, said = time.monotonic() + timeout, None
    while (why := not_ready(names, states())) is not None:
        if time.monotonic() >= deadline:
            raise BenchError(f"steward bench k8s: gave up after {timeout:.0f} s: {why}")
        if said is None or time.monotonic() - said >= every_s:  # say why it waits, not nothing for the whole timeout
            tell(f"waiting: {why}")
            said = time.monotonic()
        time.sleep(poll_s)
    if said is not None:
        tell(f"all {len(names)} of the bench's nodes ready in Steward")


def pod(name: str, scheduler: str, gpus: int, run_s: float) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"steward.io/project": PROJECT},
                         "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{run_s}s"}},
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "job", "image": "bench:1",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


class BindWatch:
    """The first time each pod of the namespace is seen bound, from one watch stream."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.bound: dict[str, float] = {}
        self.stop = threading.Event()
        listed = kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        self.version = str(listed.get("metadata", {}).get("resourceVersion", ""))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        params = {"watch": "1", "resourceVersion": self.version, "allowWatchBookmarks": "false"}
        while not self.stop.is_set():
            try:
                with self.kube.http.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params,
                                           timeout=httpx.Timeout(10.0, read=None)) as resp:
                    for line in resp.iter_lines():
                        if self.stop.is_set():
                            return
                        obj = json.loads(line).get("object", {})
                        name = obj.get("metadata", {}).get("name", "")
                        if obj.get("spec", {}).get("nodeName") and name not in self.bound:
                            self.bound[name] = time.time()
                        params["resourceVersion"] = obj.get("metadata", {}).get("resourceVersion", "")
            except (httpx.HTTPError, ValueError):
                time.sleep(0.2)


def one_round(kube: KubeClient, prefix: str, scheduler: str, pods: int, gpus: int, run_s: float,
              concurrency: int, timeout: float) -> dict[str, Any]:
    watch = BindWatch(kube)
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"{prefix}-{i}"
        created[name] = time.time()
        kube.create_pod(NAMESPACE, pod(name, scheduler, gpus, run_s))

    began = time.monotonic()
    said = began
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(create, range(pods)))
    deadline = time.monotonic() + timeout
    while (done := len([n for n in created if n in watch.bound])) < pods and time.monotonic() < deadline:
        if time.monotonic() - said >= PROGRESS_S:  # a line per interval while the round runs (it takes minutes)
            say(round_progress(scheduler, done, pods, time.monotonic() - began))
            said = time.monotonic()
        time.sleep(0.2)
    say(round_progress(scheduler, len([n for n in created if n in watch.bound]), pods, time.monotonic() - began))
    watch.stop.set()
    latencies = [watch.bound[n] - t for n, t in created.items() if n in watch.bound]
    bound = [watch.bound[n] for n in created if n in watch.bound]
    span = (max(bound) - min(created.values())) if bound else float("nan")
    return {"scheduler": scheduler, "pods": pods, "bound": len(bound),
            "bound_per_s": round(len(bound) / span, 2) if bound and span > 0 else 0.0,
            "submit_to_bound_ms": {"p50": round(_percentile(latencies, 0.5) * 1000, 1),
                                   "p95": round(_percentile(latencies, 0.95) * 1000, 1)}}


def start_kube_scheduler(settings: Settings, config: str) -> subprocess.Popen[bytes]:
    paths = subprocess.run(["bash", str(REPO / "infra" / "k8s.sh"), "paths"], capture_output=True, text=True,
                           check=True, timeout=60).stdout
    binary = dict(line.split("=", 1) for line in paths.split())["STEWARD_KUBE_SCHEDULER"]
    log = (settings.run_dir / "logs" / "bench-kube-scheduler.log").open("ab")
    return subprocess.Popen([binary, f"--kubeconfig={config}", "--leader-elect=false", "--secure-port=0"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def run(nodes: int = 200, gpus: int = 8, pods: int = 2000, gpus_per_pod: int = 1, run_s: float = 30.0,
        concurrency: int = 8, timeout: float = 600.0) -> dict[str, Any]:
    settings = Settings()
    config = kubeconfig(settings)
    kube = KubeClient(credentials(config))
    names = setup(settings, kube, nodes, gpus)
    wait_ready(names, lambda: node_states(settings), timeout)
    tag = uuid.uuid4().hex[:6]  # pod names, hence job ids, of this run only
    steward_round = one_round(kube, f"st{tag}", "steward", pods, gpus_per_pod, run_s, concurrency, timeout)
    ended, until = {"Succeeded", "Failed"}, time.monotonic() + timeout
    while time.monotonic() < until and any(  # Steward's pods end (kwok): GPUs free for the anchor
            p.get("status", {}).get("phase") not in ended for p in kube.pods(label_selector=f"{JOB_LABEL}")
            if p["metadata"]["namespace"] == NAMESPACE):
        time.sleep(1.0)
    anchor = start_kube_scheduler(settings, config)
    try:
        anchor_round = one_round(kube, f"ks{tag}", "default-scheduler", pods, gpus_per_pod, run_s, concurrency, timeout)
    finally:
        anchor.terminate()
        anchor.wait(30)
    kube.close()
    p50 = anchor_round["submit_to_bound_ms"]["p50"]
    return {"bench": "k8s", "nodes": nodes, "gpus_per_node": gpus, "steward": steward_round,
            "kube_scheduler": anchor_round,
            "ratio_p50": round(steward_round["submit_to_bound_ms"]["p50"] / p50, 2) if p50 else None}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="steward bench k8s", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--gpus-per-pod", type=int, default=1)
    ap.add_argument("--run-s", type=float, default=30.0, help="how long each pod runs (kwok)")
    ap.add_argument("--concurrency", type=int, default=8, help="clients creating pods at once")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = ap.parse_args(argv)
    try:
        result = run(args.nodes, args.gpus, args.pods, args.gpus_per_pod, args.run_s, args.concurrency, args.timeout)
    except BenchError as err:
        sys.stderr.write(f"{err}\n")
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["steward"]["bound"] == args.pods == result["kube_scheduler"]["bound"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
