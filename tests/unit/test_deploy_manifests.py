"""The deployment descriptions, checked here without a cluster or a Docker engine.

- The Helm chart (infra/k8s/steward) is rendered by `helm template` for several value sets; every
  rendered object is validated against the Kubernetes 1.33 OpenAPI schemas, strictly (unknown fields
  fail), with the schemas of the PyPI package kubernetes-validate; then cross-checked by
  `check_manifests` below: selectors match pod labels, Services' target ports exist, every referenced
  Secret, ConfigMap, key, volume and ServiceAccount is defined, STEWARD_* names are real settings, images
  are pinned, containers are non-root with limits, the Kafka bootstrap and store URL point at what the
  chart deploys. Value sets that must be refused (two ledgers, a one-node Kafka quorum...) are refused.
- infra/compose/compose.yaml: the Compose specification's JSON schema (as vendored by the PyPI package
  check-jsonschema), then dependencies, health conditions, settings names, commands, mounts, ports.
- infra/grafana/steward-dashboard.json against the metric names and types of docs/metrics.md.
- infra/docker/Dockerfile: the base image, the non-root user, the entrypoint, the migrations.

helm and the schema packages come from `bash infra/tools.sh install` (the Makefile's `tools` target, which
`make test` runs). Without them these tests skip on a developer's machine and fail under CI.
No network is used at test time.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "infra" / "k8s" / "steward"
COMPOSE = REPO / "infra" / "compose" / "compose.yaml"
DASHBOARD = REPO / "infra" / "grafana" / "steward-dashboard.json"
METRICS_DOC = REPO / "docs" / "metrics.md"
DOCKERFILE = REPO / "infra" / "docker" / "Dockerfile"
TOOLS = Path(os.environ.get("STEWARD_TOOLS_DIR", REPO / ".venv" / "tools"))
KUBE_VERSION = "1.33.0"
NAMESPACE = "steward"
RELEASE = "steward"

# Steward's processes (services/steward/infra/processes.py OWN_PROCESSES), read without importing.
PROCESSES = {"ledger", "scheduler", "worker", "executor", "api"}
# the standbys (processes.py STANDBYS, ADR 0060): `steward run ledger-2` runs as the ledger
STANDBY_PROCESSES = {"ledger-2", "scheduler-2"}
# Kinds from CRDs: no schema in the Kubernetes OpenAPI document; check_manifests covers them.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("postgresql.cnpg.io/v1", "Cluster")}
# Containers allowed a writable root filesystem, and why.
WRITABLE_ROOT = {"kafka": "the apache/kafka start script writes the broker configuration into the image",
                 "executor": "useradd writes each project's job user into /etc/passwd, /etc/group, /etc/shadow"}
# The one root container: the executor (DaemonSet), which runs each job as its project's OS user
# (STEWARD_EXECUTOR_ISOLATION=user; docs/security.md "Jobs") and needs exactly these capabilities for it:
# useradd and handing folders over (CHOWN, FOWNER), reaching the job users' 0700 folders (DAC_OVERRIDE),
# switching to the job's user (SETUID, SETGID), signalling jobs of other users (KILL).
EXECUTOR_CAPS = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}
# Processes that have no HTTP endpoint until /metrics is served (values: metrics.serving).
NO_ENDPOINT_YET = {"ledger", "scheduler", "worker", "executor", "kubernetes-executor"}
# The one Steward pod that calls the Kubernetes API (ADR 0051): the scheduler of GPU pods, with a ServiceAccount of
# its own and exactly these rights (templates/kubernetes-executor.yaml; ADR 0089). Cluster-wide it lists and watches
# nodes and pods (inventory, health, foreign load) and patches nodes (a drain's cordon); in each governed namespace
# it reads, creates, deletes and patches pods, binds them, patches their status (PodScheduled) and creates events.
KUBE_API_CALLERS = {"kubernetes-executor"}
K8S_CLUSTER_RULES = {("", "nodes"): {"list", "watch", "patch"}, ("", "pods"): {"list", "watch"}}
K8S_NAMESPACE_RULES = {("", "pods"): {"get", "create", "delete", "patch"}, ("", "pods/binding"): {"create"},
                       ("", "pods/status"): {"patch"}, ("", "events"): {"create"}}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


# ============================================================================================ tools


def _tool_missing(what: str) -> None:
    msg = f"{what} is not installed: run `bash infra/tools.sh install` (`make tools`; `make test` runs it)"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def helm_binary() -> str:
    for cand in (os.environ.get("STEWARD_HELM"), str(TOOLS / "bin" / "helm"), shutil.which("helm")):
        if cand and os.access(cand, os.X_OK):
            return cand
    _tool_missing("helm")
    raise AssertionError("unreachable")


def schema_pythonpath() -> str:
    path = TOOLS / "python"
    if not (path / "kubernetes_validate").is_dir():
        _tool_missing("kubernetes-validate (the Kubernetes JSON schemas)")
    return str(path)


def _flatten(values: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


NODES: dict[str, Any] = {"executor": {"nodes": ["gpu-a", "gpu-b"]}}


@functools.cache
def _render(values_json: str, upgrade: bool = False) -> tuple[int, str, str]:
    args = [helm_binary(), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
            "--kube-version", KUBE_VERSION, *(["--is-upgrade"] if upgrade else [])]
    # the GPU nodes' names, which the chart requires (each is a Kafka principal, ADR 0036), unless the values
    # name their own
    for key, value in [*_flatten(NODES), *_flatten(json.loads(values_json))]:
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def render(values: dict[str, Any] | None = None, upgrade: bool = False) -> list[dict[str, Any]]:
    code, out, err = _render(json.dumps(values or {}, sort_keys=True), upgrade)
    assert code == 0, f"helm template failed: {err.strip()}"
    return [d for d in yaml.safe_load_all(out) if d]


def render_error(values: dict[str, Any]) -> str:
    code, _, err = _render(json.dumps(values, sort_keys=True))
    assert code != 0, f"helm template accepted values it must refuse: {values}"
    return err


def schema_errors(docs: list[dict[str, Any]]) -> list[str]:
    """Validate every object against the Kubernetes OpenAPI schemas (strict), in one subprocess."""
    script = r"""
import json, sys
import kubernetes_validate.utils as u
out = []
for d in json.load(sys.stdin):
    what = "%s/%s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
    try:
        u.validate(d, sys.argv[1], strict=True)
    except u.SchemaNotFoundError as e:
        out.append("%s: no schema (%s)" % (what, e.message))
    except u.ValidationError as e:
        out.append("%s: %s: %s" % (what, ".".join(str(p) for p in e.path), e.message))
json.dump(out, sys.stdout)
"""
    env = os.environ | {"PYTHONPATH": schema_pythonpath()}
    proc = subprocess.run([sys.executable, "-c", script, KUBE_VERSION], input=json.dumps(docs), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout))


# ============================================================================================ settings


@functools.lru_cache(maxsize=1)
def known_setting_names() -> frozenset[str]:
    """Every STEWARD_* name the code reads: the fields of BaseSettings classes with env_prefix STEWARD_,
    and STEWARD_* string literals (os.environ lookups). Read from the source, nothing imported."""
    names: set[str] = set()
    for root in (REPO / "services" / "steward", REPO / "workflows" / "steward_workflows"):
        for path in root.rglob("*.py"):
            text = path.read_text()
            names.update(re.findall(r"""["'](STEWARD_[A-Z0-9_]+)["']""", text))
            prefix = re.search(r'env_prefix="(STEWARD_[A-Z0-9_]*)"', text)
            if "BaseSettings" not in text or prefix is None:
                continue
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", "")) == "BaseSettings" for b in node.bases
                ):
                    for stmt in node.body:
                        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                                and stmt.target.id != "model_config"):
                            names.add(prefix.group(1) + stmt.target.id.upper())
    return frozenset(names)


def test_settings_scan_finds_the_config_fields() -> None:
    names = known_setting_names()
    for expected in ("STEWARD_STORE_URL", "STEWARD_STORE_OWNER_URL", "STEWARD_KAFKA_BOOTSTRAP",
                     "STEWARD_TEMPORAL_ADDRESS", "STEWARD_EXECUTOR_ID", "STEWARD_API_HOST", "STEWARD_LOG_LEVEL",
                     "STEWARD_EXECUTOR_ISOLATION"):  # a class with its own prefix (ExecutorSettings)
        assert expected in names
    assert "STEWARD_NO_SUCH_SETTING" not in names


# ============================================================================================ manifests


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc.get("kind") in WORKLOADS:
        return doc.get("spec", {}).get("template", {}).get("spec")
    return None


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    return doc.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for c in spec.get("initContainers") or []:
        yield "init", c
    for c in spec.get("containers") or []:
        yield "main", c


def check_executor_isolation(c: dict[str, Any], pod_sc: dict[str, Any], volumes: dict[str, Any]) -> list[str]:
    """The executor isolates jobs (docs/security.md "Jobs"): root with exactly EXECUTOR_CAPS, isolation
    `user`, and Kafka password files that only root can read (mode 0400, no fsGroup to make them
    group-readable)."""
    problems = []
    sc = c.get("securityContext") or {}
    if sc.get("runAsUser", pod_sc.get("runAsUser")) != 0:
        problems.append("does not run as root (it cannot switch jobs to their projects' users)")
    added = set((sc.get("capabilities") or {}).get("add") or [])
    if added != EXECUTOR_CAPS:
        problems.append(f"capabilities {sorted(added)}, not exactly {sorted(EXECUTOR_CAPS)}")
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    if env.get("STEWARD_EXECUTOR_ISOLATION", "user") != "user":
        problems.append(f"STEWARD_EXECUTOR_ISOLATION={env['STEWARD_EXECUTOR_ISOLATION']}: jobs run as the agent")
    if "fsGroup" in pod_sc:
        problems.append("the pod has an fsGroup: its secret files become group-readable")
    for vname, vol in volumes.items():
        secret = vol.get("secret")
        if secret is not None and any("password" in (i.get("path") or "") for i in secret.get("items") or []):
            modes = {secret.get("defaultMode", 0o644), *(i.get("mode") for i in secret["items"] if "mode" in i)}
            if modes != {0o400}:
                problems.append(f"volume {vname}: password files of mode {sorted(oct(m) for m in modes)}, not 0o400")
    return problems


EXECUTOR_KEY = re.compile(r"^kafka-executor-(.+)-password$")
# the pods that create the executors' SCRAM users: the brokers (format) and the topics Job (enrolment)
ENROLLERS = {"kafka", "kafka-topics"}


def _env_value(spec: dict[str, Any], name: str) -> str | None:
    """The literal value of an environment variable of a pod's first container (None: not set literally)."""
    for env in (spec.get("containers") or [{}])[0].get("env") or []:
        if env.get("name") == name and "value" in env:
            return str(env["value"])
    return None


def _referenced_secrets(spec: dict[str, Any]) -> set[str]:
    """Every Secret a pod references (volumes, projected volumes, env, envFrom): with the Node authorizer,
    the kubelet of the pod's node may read each of them whole, whatever items the pod mounts."""
    names: set[str] = set()
    for vol in spec.get("volumes") or []:
        if "secret" in vol:
            names.add(vol["secret"]["secretName"])
        for source in (vol.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                names.add(source["secret"]["name"])
    for _, c in _containers(spec):
        for env in c.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                names.add(ref["name"])
        for src in c.get("envFrom") or []:
            if "secretRef" in src:
                names.add(src["secretRef"]["name"])
    for ref in spec.get("imagePullSecrets") or []:
        names.add(ref["name"])
    return names


def _pinned_node(spec: dict[str, Any]) -> str | None:
    """The one node a pod may run on (nodeName, or a required node affinity on metadata.name In [node])."""
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    nodes = set()
    for term in terms:
        fields = [f for f in term.get("matchFields") or [] if f["key"] == "metadata.name" and f["operator"] == "In"]
        if len(fields) != 1:
            return None  # a term that does not name nodes lets the pod run anywhere it matches
        nodes |= set(fields[0]["values"])
    return nodes.pop() if len(nodes) == 1 else None


def check_executor_credentials(docs: list[dict[str, Any]], external: Iterable[str] = ()) -> list[str]:
    """docs/security.md "Executor credentials in Kubernetes": no pod can mount another node's executor
    password. Each executor pod is pinned to one node and references only Secrets that hold that node's
    password and no other's; no other Steward pod references a Secret holding any executor's password (the
    Kafka brokers do, to create the SCRAM users at format time). A Secret provided outside the chart is
    judged by its name (`<existingSecret>-executor-<node>`). The pods that hold every executor's password (the
    brokers' format step and the enrolment Job, ENROLLERS) must not tolerate the executor nodes' taints, so
    that none of them runs on a GPU node."""
    problems: list[str] = []
    gpu_taints = {t.get("key") for d in docs if _pod_labels(d).get("app.kubernetes.io/component") == "executor"
                  for t in (_pod_spec(d) or {}).get("tolerations") or []}
    held: dict[str, set[str]] = {}  # Secret -> the nodes whose executor password it holds
    for d in docs:
        if d.get("kind") == "Secret":
            held[d["metadata"]["name"]] = {m.group(1) for k in _secret_keys(d) if (m := EXECUTOR_KEY.match(k))}
    ext = set(external)
    for d in docs:
        spec = _pod_spec(d)
        if spec is None:
            continue
        where = f"{d['kind']}/{d['metadata']['name']}"
        component = _pod_labels(d).get("app.kubernetes.io/component", "")
        if component in ENROLLERS:
            tolerated = {t.get("key") for t in spec.get("tolerations") or []} & gpu_taints
            if tolerated:
                problems.append(f"{where}: holds every executor's password and tolerates the GPU nodes' taint(s) "
                                f"{sorted(tolerated)}")
            continue
        node = _pinned_node(spec) if component == "executor" else (
            _env_value(spec, "STEWARD_EXECUTOR_ID") if component in KUBE_API_CALLERS else None)
        if component == "executor" and node is None:
            problems.append(f"{where}: an executor pod not pinned to one node (it could run, with its password, "
                            "on another)")
        for secret in sorted(_referenced_secrets(spec)):
            if secret in held:
                nodes = held[secret]
            else:  # provided by the operator: judged by its name
                nodes = {secret.split("-executor-", 1)[1]} if secret in ext and "-executor-" in secret else set()
            others = sorted(nodes - ({node} if node else set()))
            if others:
                problems.append(f"{where}: references Secret {secret!r}, which holds the executor password of "
                                f"node(s) {others}")
    return problems


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions) against a label set."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _pods_selected(docs: list[dict[str, Any]], selector: dict[str, Any]) -> list[dict[str, Any]]:
    """Workloads whose pods a selector picks. `statefulset.kubernetes.io/pod-name` is set by the
    StatefulSet controller (not in the template): it matches `<name>-<ordinal>` of an existing replica."""
    plain = {"matchLabels": {k: v for k, v in (selector.get("matchLabels") or {}).items()
                             if k != "statefulset.kubernetes.io/pod-name"},
             "matchExpressions": selector.get("matchExpressions") or []}
    pod_name = (selector.get("matchLabels") or {}).get("statefulset.kubernetes.io/pod-name")
    found = []
    for d in docs:
        if d.get("kind") not in WORKLOADS or not _matches(plain, _pod_labels(d)):
            continue
        if pod_name is not None:
            name, replicas = d["metadata"]["name"], int(d.get("spec", {}).get("replicas", 1))
            if d["kind"] != "StatefulSet" or pod_name not in {f"{name}-{i}" for i in range(replicas)}:
                continue
        found.append(d)
    return found


def _container_ports(workload: dict[str, Any]) -> tuple[set[str], set[int]]:
    names: set[str] = set()
    numbers: set[int] = set()
    for _, c in _containers(_pod_spec(workload) or {}):
        for p in c.get("ports") or []:
            numbers.add(int(p["containerPort"]))
            if "name" in p:
                names.add(p["name"])
    return names, numbers


def _secret_keys(doc: dict[str, Any]) -> set[str]:
    return set(doc.get("data") or {}) | set(doc.get("stringData") or {})


def _probes(c: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        if kind in c:
            yield kind, c[kind]


def check_manifests(docs: list[dict[str, Any]], *, external_secrets: Iterable[str] = (),
                    external_claims: Iterable[str] = (), probes_required: bool = True) -> list[str]:
    """Cross-object checks the schemas cannot make. Returns the problems found (empty: all good)."""
    problems: list[str] = []
    ext_secrets, ext_claims = set(external_secrets), set(external_claims)
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    seen_names: dict[str, set[tuple[str, str]]] = {}
    for d in docs:
        for field in ("apiVersion", "kind"):
            if not d.get(field):
                problems.append(f"an object without {field}: {str(d)[:80]}")
        name = (d.get("metadata") or {}).get("name") or ""
        kind = d.get("kind", "?")
        pattern = DNS_LABEL if kind == "Service" else DNS_SUBDOMAIN
        if not pattern.match(name) or len(name) > (63 if kind == "Service" else 253):
            problems.append(f"{kind} has an invalid name {name!r}")
        namespace = (d.get("metadata") or {}).get("namespace") or ""
        if (namespace, name) in seen_names.setdefault(kind, set()):
            problems.append(f"{kind}/{name} is defined twice")
        seen_names[kind].add((namespace, name))
        by_kind.setdefault(kind, {})[name] = d
    secrets, configmaps = by_kind.get("Secret", {}), by_kind.get("ConfigMap", {})
    services, accounts = by_kind.get("Service", {}), set(by_kind.get("ServiceAccount", {})) | {"default"}
    claims = set(by_kind.get("PersistentVolumeClaim", {})) | ext_claims
    known = known_setting_names()

    def secret_key_ok(where: str, name: str, key: str | None) -> None:
        if name in ext_secrets:
            return
        if name not in secrets:
            problems.append(f"{where}: Secret {name!r} is not defined")
        elif key is not None and key not in _secret_keys(secrets[name]):
            problems.append(f"{where}: Secret {name!r} has no key {key!r}")

    def configmap_key_ok(where: str, name: str, key: str | None) -> None:
        if name not in configmaps:
            problems.append(f"{where}: ConfigMap {name!r} is not defined")
        elif key is not None and key not in (configmaps[name].get("data") or {}):
            problems.append(f"{where}: ConfigMap {name!r} has no key {key!r}")

    for d in docs:
        spec = _pod_spec(d)
        if spec is None:
            continue
        kind, name = d["kind"], d["metadata"]["name"]
        where = f"{kind}/{name}"
        component = _pod_labels(d).get("app.kubernetes.io/component", "")
        if kind != "Job":
            selector = d["spec"].get("selector") or {}
            if not selector.get("matchLabels") or not _matches(selector, _pod_labels(d)):
                problems.append(f"{where}: selector does not match its pod template's labels")
        if kind == "StatefulSet":
            svc = d["spec"].get("serviceName")
            if svc not in services:
                problems.append(f"{where}: serviceName {svc!r} is not a Service")
            elif services[svc]["spec"].get("clusterIP") != "None":
                problems.append(f"{where}: serviceName {svc!r} is not headless")
        if spec.get("serviceAccountName", "default") not in accounts:
            problems.append(f"{where}: ServiceAccount {spec.get('serviceAccountName')!r} is not defined")
        if spec.get("automountServiceAccountToken") is not False and component not in KUBE_API_CALLERS:
            problems.append(f"{where}: mounts a ServiceAccount token (none of these pods calls the API)")
        pod_sc = spec.get("securityContext") or {}
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        volumes.update({t["metadata"]["name"]: {"claimTemplate": True}
                        for t in d["spec"].get("volumeClaimTemplates") or []})
        for vname, vol in volumes.items():
            if "secret" in vol:
                for item in vol["secret"].get("items") or [{"key": None}]:
                    secret_key_ok(f"{where} volume {vname}", vol["secret"]["secretName"], item["key"])
            if "configMap" in vol:
                for item in vol["configMap"].get("items") or [{"key": None}]:
                    configmap_key_ok(f"{where} volume {vname}", vol["configMap"]["name"], item["key"])
            if "persistentVolumeClaim" in vol and vol["persistentVolumeClaim"]["claimName"] not in claims:
                problems.append(f"{where}: PersistentVolumeClaim {vol['persistentVolumeClaim']['claimName']!r}"
                                " is not defined")
        for role, c in _containers(spec):
            cw = f"{where} container {c.get('name')}"
            image = c.get("image", "")
            if not image or ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest"):
                problems.append(f"{cw}: image {image!r} is not pinned to a tag")
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in (res.get(part) or {}):
                        problems.append(f"{cw}: no {part}.{r}")
            sc = c.get("securityContext") or {}
            root = sc.get("runAsUser", pod_sc.get("runAsUser")) == 0 or not sc.get(
                "runAsNonRoot", pod_sc.get("runAsNonRoot", False))
            if kind == "DaemonSet" and component == "executor" and role == "main":
                problems.extend(f"{cw}: {p}" for p in check_executor_isolation(c, pod_sc, volumes))
            elif root:
                problems.append(f"{cw}: may run as root")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cw}: allowPrivilegeEscalation is not false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{cw}: capabilities are not dropped")
            if sc.get("readOnlyRootFilesystem") is not True and c.get("name") not in WRITABLE_ROOT:
                problems.append(f"{cw}: root filesystem is writable")
            if sc.get("privileged"):
                problems.append(f"{cw}: privileged")
            # the Steward image runs `steward run <process>`, the migration, or the enrolment of the token the
            # chart minted for the Kubernetes executor
            if image.split(":")[0].endswith("steward") and role == "main":
                args = list(c.get("command") or []) + list(c.get("args") or [])
                text = " ".join(args)
                if not ((args[:1] == ["run"] and args[1:2] and args[1] in PROCESSES) or "steward migrate" in text
                        or "steward token enroll" in text):
                    problems.append(f"{cw}: runs {text!r}, not `run <process>`, `steward migrate` or "
                                    "`steward token enroll`")
            port_names = {p["name"] for p in c.get("ports") or [] if "name" in p}
            port_numbers = {int(p["containerPort"]) for p in c.get("ports") or []}
            for pkind, probe in _probes(c):
                action = probe.get("httpGet") or probe.get("tcpSocket")
                if action is not None:
                    port = action["port"]
                    if (isinstance(port, str) and port not in port_names) or (
                        isinstance(port, int) and port not in port_numbers
                    ):
                        problems.append(f"{cw}: {pkind} port {port!r} is not a container port")
            if (role == "main" and kind != "Job" and probes_required and "readinessProbe" not in c
                    and component not in NO_ENDPOINT_YET):
                problems.append(f"{cw}: no readinessProbe")
            defined: set[str] = set()
            for env in c.get("env") or []:
                ename = env["name"]
                if ename.startswith("STEWARD_") and ename not in known:
                    problems.append(f"{cw}: {ename} is not a setting the code reads")
                if ename == "STEWARD_STORE_OWNER_URL" and component != "migrate":
                    problems.append(f"{cw}: only the migration may hold the schema owner's credentials")
                for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", str(env.get("value", ""))):
                    if ref not in defined:
                        problems.append(f"{cw}: {ename} refers to $({ref}), not defined before it")
                source = env.get("valueFrom") or {}
                if "secretKeyRef" in source:
                    secret_key_ok(cw, source["secretKeyRef"]["name"], source["secretKeyRef"]["key"])
                if "configMapKeyRef" in source:
                    configmap_key_ok(cw, source["configMapKeyRef"]["name"], source["configMapKeyRef"]["key"])
                defined.add(ename)
            for src in c.get("envFrom") or []:
                if "configMapRef" in src:
                    configmap_key_ok(cw, src["configMapRef"]["name"], None)
                    for key in (configmaps.get(src["configMapRef"]["name"]) or {}).get("data") or {}:
                        if key.startswith("STEWARD_") and key not in known:
                            problems.append(f"{cw}: {key} (from a ConfigMap) is not a setting the code reads")
                if "secretRef" in src:
                    secret_key_ok(cw, src["secretRef"]["name"], None)
            mounts = c.get("volumeMounts") or []
            for m in mounts:
                if m["name"] not in volumes:
                    problems.append(f"{cw}: mounts {m['name']!r}, which is not a volume")
            # a setting that names a file under /etc must name a file that a volume provides
            for env in c.get("env") or []:
                value = str(env.get("value", ""))
                if not value.startswith("/etc/"):
                    continue
                mount = next((m for m in mounts if value.startswith(m["mountPath"].rstrip("/") + "/")), None)
                vol = volumes.get(mount["name"], {}) if mount else {}
                items = [i["path"] for i in (vol.get("secret") or vol.get("configMap") or {}).get("items") or []]
                if mount is None:
                    problems.append(f"{cw}: {env['name']}={value} is on no mounted volume")
                elif items and value[len(mount["mountPath"].rstrip("/")) + 1:] not in items:
                    problems.append(f"{cw}: {env['name']}={value} is not a file of volume {mount['name']}")

    for name, svc in services.items():
        selector = svc["spec"].get("selector") or {}
        pods = _pods_selected(docs, {"matchLabels": selector})
        if not selector or not pods:
            problems.append(f"Service/{name}: selector {selector} matches no pod template")
            continue
        names: set[str] = set()
        numbers: set[int] = set()
        for w in pods:
            n, p = _container_ports(w)
            names |= n
            numbers |= p
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            if (isinstance(target, str) and target not in names) or (isinstance(target, int) and target not in numbers):
                problems.append(f"Service/{name}: targetPort {target!r} is not a port of the selected pods")

    for kind in ("PodDisruptionBudget",):
        for name, pdb in by_kind.get(kind, {}).items():
            if not _pods_selected(docs, pdb["spec"]["selector"]):
                problems.append(f"{kind}/{name}: selects no pods")
    for name, hpa in by_kind.get("HorizontalPodAutoscaler", {}).items():
        ref = hpa["spec"]["scaleTargetRef"]
        target = by_kind.get(ref["kind"], {}).get(ref["name"])
        if target is None:
            problems.append(f"HorizontalPodAutoscaler/{name}: target {ref['kind']}/{ref['name']} is not defined")
        elif "replicas" in target["spec"]:
            problems.append(f"HorizontalPodAutoscaler/{name}: {ref['name']} also fixes replicas (they would fight)")
    for name, np_ in by_kind.get("NetworkPolicy", {}).items():
        pods = [d for d in docs if d.get("kind") in WORKLOADS and _matches(np_["spec"]["podSelector"], _pod_labels(d))]
        if not pods:
            problems.append(f"NetworkPolicy/{name}: podSelector matches no pods")
        names = set().union(*(_container_ports(w)[0] for w in pods)) if pods else set()
        for rule in np_["spec"].get("ingress") or []:
            for port in rule.get("ports") or []:
                if isinstance(port.get("port"), str) and port["port"] not in names:
                    problems.append(f"NetworkPolicy/{name}: port {port['port']!r} is not a port of the selected pods")
            for peer in rule.get("from") or []:
                if "podSelector" in peer and "namespaceSelector" not in peer:
                    sel = peer["podSelector"]
                    if (sel.get("matchLabels") or sel.get("matchExpressions")) and not any(
                        _matches(sel, _pod_labels(d)) for d in docs if d.get("kind") in WORKLOADS
                    ) and "app.kubernetes.io/name" not in (sel.get("matchLabels") or {}):
                        problems.append(f"NetworkPolicy/{name}: a peer podSelector matches no pods of the release")
    for name, sm in by_kind.get("ServiceMonitor", {}).items():
        picked = [s for s in services.values() if _matches(sm["spec"]["selector"], s["metadata"].get("labels") or {})]
        if not picked:
            problems.append(f"ServiceMonitor/{name}: selects no Service")
        ports = {p.get("name") for s in picked for p in s["spec"].get("ports") or []}
        for ep in sm["spec"]["endpoints"]:
            if ep["port"] not in ports:
                problems.append(f"ServiceMonitor/{name}: endpoint port {ep['port']!r} is on no selected Service")
    problems.extend(check_executor_credentials(docs, ext_secrets))
    return problems


def check_addresses(docs: list[dict[str, Any]]) -> list[str]:
    """The Kafka bootstrap names the Kafka pods; the store URLs name the PostgreSQL Service (bundled)."""
    problems: list[str] = []
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    sets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
    config = next(d for d in docs if d["kind"] == "ConfigMap" and "STEWARD_KAFKA_BOOTSTRAP" in (d.get("data") or {}))
    for hostport in config["data"]["STEWARD_KAFKA_BOOTSTRAP"].split(","):
        host, _, port = hostport.partition(":")
        parts = host.split(".")
        pod, svc = parts[0], parts[1]
        sts, _, ordinal = pod.rpartition("-")
        if host != f"{pod}.{svc}.{NAMESPACE}.svc.cluster.local" or port != "9092":
            problems.append(f"bootstrap {hostport}: not <pod>.<service>.{NAMESPACE}.svc.cluster.local:9092")
        elif sts not in sets or int(ordinal) >= int(sets[sts]["spec"]["replicas"]):
            problems.append(f"bootstrap {hostport}: no such Kafka pod")
        elif sets[sts]["spec"]["serviceName"] != svc:
            problems.append(f"bootstrap {hostport}: {svc} is not {sts}'s governing Service")
    for secret in (d for d in docs if d["kind"] == "Secret" and "store-url" in (d.get("stringData") or {})):
        for key in ("store-url", "store-owner-url"):
            url = urlsplit(secret["stringData"][key])
            if url.scheme != "postgresql+psycopg" or url.path.lstrip("/") == "":
                problems.append(f"{key}: {url.scheme}://...{url.path} is not a PostgreSQL URL with a database")
            if url.hostname in services:
                ports = {p["port"] for p in services[url.hostname]["spec"]["ports"]}
                if url.port not in ports:
                    problems.append(f"{key}: Service {url.hostname} has no port {url.port}")
            elif "." not in (url.hostname or "") and not (url.hostname or "").endswith("-rw"):
                problems.append(f"{key}: host {url.hostname!r} is neither a Service of the chart nor a DNS name")
        user = urlsplit(secret["stringData"]["store-url"]).username
        if user != "steward_app":
            problems.append(f"store-url connects as {user!r}, not the application role steward_app")
    return problems


def topic_partitions(docs: list[dict[str, Any]]) -> dict[str, int]:
    """What the topics Job creates: {topic: partitions}."""
    job = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].endswith("kafka-topics"))
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    return {m[0]: int(m[1]) for m in re.findall(r"^\s*ensure (\S+) (\d+)\s*$", script, re.M)}


# The value sets a deployment is likely to use; each must render, validate and cross-check.
SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "production": {
        "kafka": {"antiAffinity": "hard", "topics": {"commands": {"partitions": 24}}},
        "metrics": {"serving": True, "serviceMonitor": {"enabled": True}},
        "executor": {"workdir": {"type": "pvc", "claimName": "steward-checkpoints"}, "nodes": ["gpu-a"]},
        "api": {"autoscaling": {"enabled": False}, "replicas": 4},
        "networkPolicy": {"apiFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]},
        "postgresql": {"replica": {"replicas": 2}, "synchronousReplicas": 1},
    },
    "cloudnativepg": {"postgresql": {"mode": "cloudnativepg"}},
    "external": {
        "postgresql": {"mode": "external", "external": {"host": "steward-db.example.internal"}},
        "kafka": {"enabled": False, "external": {"bootstrap": "kafka-0.example.internal:9092"}},
        "secrets": {"existingSecret": "steward-managed"},
        "executor": {"workdir": {"type": "emptyDir"}, "nodes": ["gpu-a"]},
    },
    "failover": {"postgresql": {"failover": {"promoted": True}}},
    "kubernetes": {"kubernetesExecutor": {"enabled": True, "namespaces": ["team-a", "team-b"],
                                          "apiTokenSecret": "k8s-api-token"}},
    "kubernetes-bootstrap": {"executor": {"enabled": False}, "metrics": {"serving": False},
                             "kubernetesExecutor": {"enabled": True, "id": "gpu-cluster", "namespaces": ["ml"],
                                                    "mintApiToken": False, "namespaceProjects": "ml=vision"}},
    "kubernetes-minted-token": {"kubernetesExecutor": {"enabled": True, "namespaces": ["team-a"]},
                                "networkPolicy": {"enabled": True}},
}


@pytest.fixture(scope="module")
def defaults() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module", autouse=True)
def _prefetch_renders() -> None:
    """Run every `helm template` of this module at once (each mostly waits; together about 1 s)."""
    from concurrent.futures import ThreadPoolExecutor

    if not (os.environ.get("STEWARD_HELM") or (TOOLS / "bin" / "helm").exists() or shutil.which("helm")):
        return
    keys = [json.dumps(v, sort_keys=True) for v in [*SCENARIOS.values(), *(v for v, _ in REFUSED), JWT_VALUES]]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(_render, keys))
        pool.submit(_render, "{}", True).result()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_chart_renders_and_cross_checks(scenario: str) -> None:
    values = SCENARIOS[scenario]
    docs = render(values)
    external = {"steward-managed", "steward-managed-executor-gpu-a"} if scenario == "external" else set()
    external |= {"k8s-api-token"} if scenario == "kubernetes" else set()
    claims = {"steward-checkpoints"} if scenario == "production" else set()
    assert check_manifests(docs, external_secrets=external, external_claims=claims) == []
    bundled = values.get("postgresql", {}).get("mode", "bundled") != "external"
    if values.get("kafka", {}).get("enabled", True) and bundled:
        assert check_addresses(docs) == []


def test_chart_objects_match_the_kubernetes_schemas(defaults: list[dict[str, Any]]) -> None:
    """Every object of the main value sets, strictly; plus one broken copy that must be the only error
    (so a validator that accepts anything fails here)."""
    seen: dict[str, dict[str, Any]] = {}
    for scenario in ("defaults", "production", "cloudnativepg", "external", "kubernetes"):
        for d in render(SCENARIOS[scenario]):
            if (d["apiVersion"], d["kind"]) not in CRD_KINDS:
                seen.setdefault(json.dumps(d, sort_keys=True), d)
    broken = copy.deepcopy(_first(defaults, "Deployment", "-api"))
    broken["metadata"]["name"] = "broken-on-purpose"
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/healthz"
    docs = [*seen.values(), broken]
    assert len(docs) > 40
    errors = schema_errors(docs)
    assert len(errors) == 1 and errors[0].startswith("Deployment/broken-on-purpose") and "paht" in errors[0], errors


def test_helm_lint_strict() -> None:
    proc = subprocess.run([helm_binary(), "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_topology(defaults: list[dict[str, Any]]) -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in defaults}
    for expected in [("StatefulSet", "steward-kafka"), ("StatefulSet", "steward-postgres-primary"),
                     ("StatefulSet", "steward-postgres-replica"), ("StatefulSet", "steward-ledger"),
                     ("StatefulSet", "steward-scheduler"), ("Deployment", "steward-api"),
                     ("Deployment", "steward-worker"), ("DaemonSet", "steward-executor-gpu-a"),
                     ("DaemonSet", "steward-executor-gpu-b"), ("Secret", "steward-secrets-executor-gpu-a"),
                     ("HorizontalPodAutoscaler", "steward-api"), ("PodDisruptionBudget", "steward-api"),
                     ("Job", "steward-migrate"), ("Job", "steward-kafka-topics"), ("Secret", "steward-secrets")]:
        assert expected in kinds, f"{expected} missing"
    objs = {(d["kind"], d["metadata"]["name"]): d for d in defaults}
    assert objs[("StatefulSet", "steward-kafka")]["spec"]["replicas"] == 3
    # one active and one standby of each (ADR 0060)
    assert objs[("StatefulSet", "steward-scheduler")]["spec"]["replicas"] == 2
    assert objs[("StatefulSet", "steward-ledger")]["spec"]["replicas"] == 2
    partitions = topic_partitions(defaults)
    assert partitions["steward.commands"] >= 12
    # a command topic per component and per GPU node: the topic names the sender (ADR 0036)
    assert set(partitions) == {"steward.commands", "steward.events", "steward.deadletter", "steward.commands.scheduler",
                               "steward.commands.workflows", "steward.commands.executor.gpu-a",
                               "steward.commands.executor.gpu-b"}
    secret = objs[("Secret", "steward-secrets")]["stringData"]
    # the components' passwords; each executor node's is in a Secret of its own (no pod referencing this one
    # brings an executor's password within its node's kubelet's reach)
    assert {k for k in secret if k.startswith("kafka-") and k.endswith("-password")} == {
        f"kafka-{c}-password" for c in ("admin", "controller", "api", "ledger", "scheduler", "workflows")}
    (users,) = [v for v in objs[("StatefulSet", "steward-kafka")]["spec"]["template"]["spec"]["volumes"]
                if v["name"] == "kafka-users"]  # the brokers' format step creates every SCRAM user
    assert {src["secret"]["name"] for src in users["projected"]["sources"]} == {
        "steward-secrets", "steward-secrets-executor-gpu-a", "steward-secrets-executor-gpu-b"}
    for kind, name, component in (("StatefulSet", "steward-ledger", "ledger"), ("Deployment", "steward-api", "api"),
                                  ("StatefulSet", "steward-scheduler", "scheduler"),
                                  ("Deployment", "steward-worker", "workflows")):
        (kafka,) = [v for v in objs[(kind, name)]["spec"]["template"]["spec"]["volumes"] if v["name"] == "kafka"]
        assert kafka["secret"]["items"] == [{"key": f"kafka-{component}-password",
                                            "path": f"steward-{component}.password"}]  # its own password only
    assert objs[("StatefulSet", "steward-ledger")]["spec"]["replicas"] <= partitions["steward.commands"]
    # the schema owner migrates: on install as a plain Job (the bundled database comes with the release),
    # before every upgrade as a hook; the executors claim the GPUs of GPU nodes only
    assert objs[("Job", "steward-migrate")]["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    assert "annotations" not in objs[("Job", "steward-migrate-install")]["metadata"]
    for job in ("steward-migrate", "steward-migrate-install"):
        env = {e["name"] for e in objs[("Job", job)]["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "STEWARD_STORE_OWNER_URL" in env
    for node in ("gpu-a", "gpu-b"):
        executor = objs[("DaemonSet", f"steward-executor-{node}")]["spec"]["template"]["spec"]
        assert executor["nodeSelector"]
        assert executor["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] >= 1
        assert _pinned_node(executor) == node
        # its node's Secret alone, holding that node's password alone
        assert _referenced_secrets(executor) == {f"steward-secrets-executor-{node}"}
        assert set(objs[("Secret", f"steward-secrets-executor-{node}")]["stringData"]) == {
            f"kafka-executor-{node}-password"}
        # enrolled by the topics Job (a node added by an upgrade gets its SCRAM user there)
        script = objs[("Job", "steward-kafka-topics")]["spec"]["template"]["spec"]["containers"][0]["args"][0]
        assert f"--entity-name steward-executor-{node}" in script
    api = objs[("Deployment", "steward-api")]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/healthz"


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_the_kubernetes_executor_has_only_the_rights_it_uses() -> None:
    """ADR 0051: the scheduler of GPU pods reads nodes and pods cluster-wide and cordons nodes; it binds,
    creates, deletes and patches pods, patches their status and creates events in the governed namespaces alone;
    it is the one Steward pod with a ServiceAccount token, and holds its own executor password alone."""
    docs = render(SCENARIOS["kubernetes"])
    assert not [d for d in render() if "kubernetes-executor" in d["metadata"]["name"]]  # off by default
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert _rules(cluster_role) == K8S_CLUSTER_RULES
    roles = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "Role"}
    assert set(roles) == {"team-a", "team-b"}
    assert all(_rules(r) == K8S_NAMESPACE_RULES for r in roles.values())
    account = "steward-kubernetes-executor"
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    callers = [d for d in docs if (_pod_spec(d) or {}).get("automountServiceAccountToken")]
    assert [(d["kind"], d["metadata"]["name"]) for d in callers] == [("StatefulSet", account)]
    (executor,) = callers
    spec = executor["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == account and executor["spec"]["replicas"] == 1
    assert _referenced_secrets(spec) == {"steward-secrets-executor-k8s", "k8s-api-token"}
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["STEWARD_EXECUTOR_KIND"] == "kubernetes" and env["STEWARD_K8S_NAMESPACES"] == "team-a,team-b"
    assert env["STEWARD_K8S_API_URL"] == "http://steward-api:80/graphql"
    assert "STEWARD_K8S_NAMESPACE_PROJECTS" not in env  # the recorded mappings hold (ADR 0054)
    # a Kafka principal and command topic of its own, enrolled like a node agent's
    assert "steward.commands.executor.k8s" in topic_partitions(docs)
    # it reaches the API even where networkPolicy.apiFrom names the allowed clients
    limited = render(SCENARIOS["kubernetes"] | {"networkPolicy": SCENARIOS["production"]["networkPolicy"]})
    (api_policy,) = [d for d in limited if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "steward-api"]
    peers = api_policy["spec"]["ingress"][0]["from"]
    assert any(_matches(p.get("podSelector") or {"matchLabels": {"x": "y"}}, _pod_labels(executor)) for p in peers)


def test_the_kubernetes_executors_api_token_is_minted_and_enrolled_by_the_chart() -> None:
    """Nothing by hand (docs/operator-guide.md "Steward on Kubernetes"): the chart mints the executor's read-only
    token into a Secret of its own, which only the executor and a post-install/post-upgrade hook Job mount; the
    Job enrolls it as an auditor's with the application's store credential, and may reach PostgreSQL; a
    Secret of the user's own replaces both, and the bootstrap has neither."""
    docs = render(SCENARIOS["kubernetes-minted-token"])
    secret_name = "steward-kubernetes-executor-api-token"
    (secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == secret_name]
    assert re.fullmatch(r"stw_[a-z0-9]{16}_[A-Za-z0-9]{48}", secret["stringData"]["token"])
    assert "helm.sh/hook" not in secret["metadata"].get("annotations", {})  # made before the executor's pod
    mounting = sorted((d["kind"], d["metadata"]["name"]) for d in docs
                      if secret_name in _referenced_secrets(_pod_spec(d) or {}))
    assert mounting == [("Job", secret_name), ("StatefulSet", "steward-kubernetes-executor")]
    (job,) = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == secret_name]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    spec = job["spec"]["template"]["spec"]
    assert not spec["automountServiceAccountToken"] and _referenced_secrets(spec) == {secret_name, "steward-secrets"}
    script = spec["containers"][0]["args"][0]
    assert "steward token enroll --role auditor --subject \"kubernetes-executor:k8s\"" in script
    assert "--token-file /etc/steward/api/token" in script and "--replace" in script
    assert {e["name"]: e.get("valueFrom") for e in spec["containers"][0]["env"]}["STEWARD_STORE_URL"] == {
        "secretKeyRef": {"name": "steward-secrets", "key": "store-url"}}
    (executor,) = [d for d in docs if d["kind"] == "StatefulSet" and "kubernetes-executor" in d["metadata"]["name"]]
    env = {e["name"]: e.get("value") for e in executor["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["STEWARD_K8S_API_URL"] and env["STEWARD_K8S_API_TOKEN_FILE"] == "/etc/steward/api/token"
    (db_policy,) = [d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "steward-postgres"]
    peers = db_policy["spec"]["ingress"][0]["from"]
    assert any(_matches(p["podSelector"], _pod_labels(job)) for p in peers if "podSelector" in p)
    for own in (render(SCENARIOS["kubernetes"]), render(SCENARIOS["kubernetes-bootstrap"])):
        assert not [d for d in own if d["metadata"]["name"].endswith("-api-token")]


@pytest.mark.parametrize(("cluster", "env"), [("", None), ("ceres", "ceres"), ("lab-2.east", "lab-2.east")])
def test_the_kubernetes_executor_names_its_cluster(cluster: str, env: str | None) -> None:
    """ADR 0085: `kubernetesExecutor.cluster` is the executor's STEWARD_EXECUTOR_CLUSTER (unset when empty: each
    node keeps the cluster Steward records for it)."""
    values = {"kubernetesExecutor": SCENARIOS["kubernetes"]["kubernetesExecutor"] | {"cluster": cluster}}
    (executor,) = [d for d in render(values) if d["kind"] == "StatefulSet" and "kubernetes-executor" in
                   d["metadata"]["name"]]
    given = {e["name"]: e.get("value") for e in executor["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert given.get("STEWARD_EXECUTOR_CLUSTER") == env


@pytest.mark.parametrize("bad", ["two words", "-lead", "a/b"])
def test_a_bad_kubernetes_executor_cluster_is_refused_naming_it(bad: str) -> None:
    err = render_error({"kubernetesExecutor": SCENARIOS["kubernetes"]["kubernetesExecutor"] | {"cluster": bad}})
    assert f'kubernetesExecutor.cluster "{bad}" must be 1 to 100 ASCII letters' in err


def test_upgrade_runs_only_the_hooks() -> None:
    jobs = {d["metadata"]["name"]: d for d in render(upgrade=True) if d["kind"] == "Job"}
    assert set(jobs) == {"steward-migrate", "steward-kafka-topics"}
    assert all(j["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade" for j in jobs.values())


def test_external_database_migrates_before_install() -> None:
    docs = render(SCENARIOS["external"])
    migrate = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].endswith("migrate"))
    assert migrate["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "steward-secrets"]


def test_failover_fences_the_old_primary() -> None:
    docs = render(SCENARIOS["failover"])
    objs = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert objs[("StatefulSet", "steward-postgres-primary")]["spec"]["replicas"] == 0
    selector = objs[("Service", "steward-postgres-primary")]["spec"]["selector"]
    assert selector["statefulset.kubernetes.io/pod-name"] == "steward-postgres-replica-0"


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"ledger": {"replicas": 0}}, "at least 1"),
    ({"scheduler": {"replicas": 0}}, "at least 1"),
    ({"kafka": {"replicas": 1}}, "at least 3"),
    ({"kafka": {"minInsyncReplicas": 4}}, "minInsyncReplicas"),
    ({"postgresql": {"mode": "sqlite"}}, "postgresql.mode"),
    ({"postgresql": {"mode": "external"}}, "postgresql.external.host"),
    ({"kafka": {"enabled": False}}, "kafka.external.bootstrap"),
    ({"api": {"autoscaling": {"minReplicas": 1}}}, "minAvailable"),
    ({"auth": {"jwt": {"enabled": True}}}, "jwksUrl"),
    ({"postgresql": {"synchronousReplicas": 2}}, "wait forever"),
    ({"kubernetesExecutor": {"enabled": True}}, "kubernetesExecutor.namespaces"),
]
JWT_VALUES = {"auth": {"jwt": {"enabled": True, "issuer": "https://idp.example", "hs256Secret": "s3cret"}}}


@pytest.mark.parametrize(("values", "message"), REFUSED)
def test_chart_refuses_unsafe_values(values: dict[str, Any], message: str) -> None:
    assert message in render_error(values)


def test_jwt_settings_are_names_the_api_reads() -> None:
    docs = render(JWT_VALUES)
    assert check_manifests(docs) == []


# The checks must be able to fail: break a rendered chart in known ways and expect each to be caught.
def _first(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix))


BREAKAGES = {
    "target port": (lambda ds: _first(ds, "Service", "-api")["spec"]["ports"][0].update(targetPort="htp"),
                    "targetPort 'htp'"),
    "selector": (lambda ds: _first(ds, "Deployment", "-worker")["spec"]["selector"]["matchLabels"].update(
        {"app.kubernetes.io/component": "wrker"}), "selector does not match"),
    "secret": (lambda ds: ds.remove(_first(ds, "Secret", "-secrets")), "Secret 'steward-secrets' is not defined"),
    "secret key": (lambda ds: _first(ds, "Secret", "-secrets")["stringData"].pop("store-url"), "no key 'store-url'"),
    "setting": (lambda ds: _first(ds, "ConfigMap", "-config")["data"].update(STEWARD_KAFKA_SERVERS="x"),
                "STEWARD_KAFKA_SERVERS"),
    "root": (lambda ds: _first(ds, "Deployment", "-api")["spec"]["template"]["spec"]["securityContext"].update(
        runAsNonRoot=False), "may run as root"),
    "executor caps": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "containers"][0]["securityContext"]["capabilities"]["add"].append("SYS_ADMIN"), "not exactly"),
    "executor isolation": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "containers"][0]["env"].append({"name": "STEWARD_EXECUTOR_ISOLATION", "value": "none"}),
        "jobs run as the agent"),
    "executor non-root": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "containers"][0]["securityContext"].update(runAsUser=10001), "does not run as root"),
    "executor fsGroup": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "securityContext"].update(fsGroup=10001), "group-readable"),
    "password mode": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"]["volumes"][-1][
        "secret"].update(defaultMode=0o440), "not 0o400"),
    # another node's credential within an executor's reach, however it gets there
    "other node's secret": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "volumes"][-1]["secret"].update(secretName="steward-secrets-executor-gpu-b"), "of node(s) ['gpu-b']"),
    "projected": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "volumes"].append({"name": "x", "projected": {"sources": [
            {"secret": {"name": "steward-secrets-executor-gpu-b"}}]}}),
        "Secret 'steward-secrets-executor-gpu-b', which holds the executor password of node(s) ['gpu-b']"),
    "enroller on a gpu node": (lambda ds: _first(ds, "Job", "-kafka-topics")["spec"]["template"]["spec"].update(
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]), "tolerates the GPU nodes' taint"),
    "env from another node": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"][
        "containers"][0]["env"].append({"name": "X", "valueFrom": {"secretKeyRef": {
            "name": "steward-secrets-executor-gpu-b", "key": "kafka-executor-gpu-b-password"}}}), "['gpu-b']"),
    "unpinned executor": (lambda ds: _first(ds, "DaemonSet", "-executor-gpu-a")["spec"]["template"]["spec"].pop(
        "affinity"), "not pinned to one node"),
    "api with a node's secret": (lambda ds: _first(ds, "Deployment", "-api")["spec"]["template"]["spec"][
        "volumes"].append({"name": "x", "secret": {"secretName": "steward-secrets-executor-gpu-a"}}),
        "Deployment/steward-api: references Secret 'steward-secrets-executor-gpu-a'"),
    "limits": (lambda ds: _first(ds, "StatefulSet", "-ledger")["spec"]["template"]["spec"]["containers"][0][
        "resources"].pop("limits"), "no limits.cpu"),
    "probe port": (lambda ds: _first(ds, "Deployment", "-api")["spec"]["template"]["spec"]["containers"][0][
        "readinessProbe"]["httpGet"].update(port="web"), "readinessProbe port 'web'"),
    "process": (lambda ds: _first(ds, "StatefulSet", "-scheduler")["spec"]["template"]["spec"]["containers"][0]
                .update(args=["run", "planner"]), "not `run <process>`"),
    "owner url": (lambda ds: _first(ds, "Deployment", "-api")["spec"]["template"]["spec"]["containers"][0][
        "env"].append({"name": "STEWARD_STORE_OWNER_URL", "value": "x"}), "schema owner"),
    "image tag": (lambda ds: _first(ds, "StatefulSet", "-kafka")["spec"]["template"]["spec"]["containers"][0]
                  .update(image="apache/kafka"), "not pinned"),
    "hpa": (lambda ds: _first(ds, "Deployment", "-api")["spec"].update(replicas=3), "would fight"),
    "key file": (lambda ds: _first(ds, "StatefulSet", "-ledger")["spec"]["template"]["spec"]["volumes"][-1][
        "secret"]["items"][0].update(path="key.pem"), "is not a file of volume keys"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_check_manifests_catches(defaults: list[dict[str, Any]], breakage: str) -> None:
    docs = copy.deepcopy(defaults)
    breaker, expected = BREAKAGES[breakage]
    breaker(docs)
    problems = check_manifests(docs)
    assert any(expected in p for p in problems), problems


def test_check_addresses_catches_a_wrong_bootstrap(defaults: list[dict[str, Any]]) -> None:
    docs = copy.deepcopy(defaults)
    config = _first(docs, "ConfigMap", "-config")
    config["data"]["STEWARD_KAFKA_BOOTSTRAP"] = config["data"]["STEWARD_KAFKA_BOOTSTRAP"].replace("kafka-2", "kafka-3")
    assert any("no such Kafka pod" in p for p in check_addresses(docs))


# ============================================================================================ compose

COMPOSE_TOP = {"name", "services", "volumes", "networks", "configs", "secrets"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


def _depends(service: dict[str, Any]) -> dict[str, str]:
    dep = service.get("depends_on") or {}
    if isinstance(dep, list):
        return {d: "service_started" for d in dep}
    return {k: (v or {}).get("condition", "service_started") for k, v in dep.items()}


def check_compose_privileges(svc: dict[str, Any], command: list[str], env: dict[str, Any]) -> list[str]:
    """A Steward container runs as the image's unprivileged user with no capabilities, except the executor:
    root with exactly EXECUTOR_CAPS and isolation `user` (docs/security.md "Jobs")."""
    problems = []
    user = str(svc.get("user", "")).split(":")[0]
    added = set(svc.get("cap_add") or [])
    if "ALL" not in (svc.get("cap_drop") or []):
        problems.append("capabilities are not dropped")
    if "no-new-privileges:true" not in (svc.get("security_opt") or []):
        problems.append("no-new-privileges is not set")
    if command[:2] == ["run", "executor"]:
        if user not in ("0", "root"):
            problems.append(f"the executor runs as user {user or 'of the image'!r}, not root: it cannot isolate jobs")
        if added != EXECUTOR_CAPS:
            problems.append(f"the executor's capabilities {sorted(added)} are not exactly {sorted(EXECUTOR_CAPS)}")
        if env.get("STEWARD_EXECUTOR_ISOLATION", "user") != "user":
            problems.append(f"STEWARD_EXECUTOR_ISOLATION={env['STEWARD_EXECUTOR_ISOLATION']}: jobs run as the agent")
    else:
        if user in ("0", "root"):
            problems.append("runs as root")
        if added:
            problems.append(f"adds capabilities {sorted(added)}")
        if svc.get("read_only") is not True:
            problems.append("root filesystem is writable")
    return problems


def check_compose(doc: dict[str, Any], base: Path) -> list[str]:
    problems: list[str] = []
    for key in doc:
        if key not in COMPOSE_TOP and not key.startswith("x-"):
            problems.append(f"unknown top-level key {key!r}")
    services: dict[str, dict[str, Any]] = doc.get("services") or {}
    volumes = set(doc.get("volumes") or {})
    known = known_setting_names()
    host_ports: dict[str, str] = {}
    for name, svc in services.items():
        where = f"service {name}"
        if not svc.get("image") and not svc.get("build"):
            problems.append(f"{where}: neither image nor build")
        image = str(svc.get("image", ""))
        if image and ":" not in image.rsplit("/", 1)[-1]:
            problems.append(f"{where}: image {image!r} has no tag")
        for dep, cond in _depends(svc).items():
            if dep not in services:
                problems.append(f"{where}: depends on {dep!r}, which is not a service")
            elif cond not in CONDITIONS:
                problems.append(f"{where}: unknown condition {cond!r}")
            elif cond == "service_healthy" and "healthcheck" not in services[dep]:
                problems.append(f"{where}: waits for {dep} to be healthy, but {dep} has no healthcheck")
            elif cond == "service_completed_successfully" and services[dep].get("restart", "no") not in ("no", None):
                problems.append(f"{where}: waits for {dep} to complete, but {dep} restarts")
            if dep in services and set(services[dep].get("profiles") or []) - set(svc.get("profiles") or []):
                problems.append(f"{where}: depends on {dep}, which is only in a profile")
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env)
        for key in env:
            if key.startswith("STEWARD_") and key not in known:
                problems.append(f"{where}: {key} is not a setting the code reads")
        command = svc.get("command") or []
        if str(svc.get("image", "")).startswith("${STEWARD_IMAGE") or svc.get("build"):
            ok = ((command[:1] == ["run"] and command[1:2] and command[1] in PROCESSES | STANDBY_PROCESSES)
                  or command == ["migrate"])
            if not ok:
                problems.append(f"{where}: command {command} is not `run <process>` or `migrate`")
            if command[:2] == ["run", "api"] and env.get("STEWARD_API_HOST") != "0.0.0.0":
                problems.append(f"{where}: the API binds to loopback inside its container (STEWARD_API_HOST)")
            if "STEWARD_STORE_OWNER_URL" in env and command != ["migrate"]:
                problems.append(f"{where}: only the migration may hold the schema owner's credentials")
            problems.extend(f"{where}: {p}" for p in check_compose_privileges(svc, command, env))
        for vol in svc.get("volumes") or []:
            source = (vol.split(":")[0] if isinstance(vol, str) else vol.get("source", ""))
            if source.startswith((".", "/")):
                if not (base / source).exists():
                    problems.append(f"{where}: bind mount {source} does not exist")
            elif source not in volumes:
                problems.append(f"{where}: volume {source!r} is not declared")
        for port in svc.get("ports") or []:
            parts = str(port).split(":")
            if len(parts) != 3 or parts[0] != "127.0.0.1":
                problems.append(f"{where}: port {port} is not published on 127.0.0.1 only")
            host = ":".join(parts[:-1])
            if host in host_ports:
                problems.append(f"{where}: host port {host} is also used by {host_ports[host]}")
            host_ports[host] = name
    # no dependency cycles
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 1:
            problems.append("dependency cycle: " + " -> ".join([*path, n]))
            return
        if state.get(n) == 2 or n not in services:
            return
        state[n] = 1
        for dep in _depends(services[n]):
            visit(dep, [*path, n])
        state[n] = 2

    for n in services:
        visit(n, [])
    return problems


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def compose_schema_errors(docs: list[dict[str, Any]]) -> list[list[str]]:
    """Validate compose documents against the Compose specification's JSON schema (as vendored by
    check-jsonschema), in one subprocess; one list of errors per document."""
    script = r"""
import json, sys
from importlib.resources import files
import jsonschema
schema = json.loads(files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text())
validator = jsonschema.validators.validator_for(schema)(schema)
out = [["%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
        for e in sorted(validator.iter_errors(d), key=lambda e: list(map(str, e.absolute_path)))]
       for d in json.load(sys.stdin)]
json.dump(out, sys.stdout)
"""
    path = schema_pythonpath()
    if not (Path(path) / "check_jsonschema").is_dir():
        _tool_missing("check-jsonschema (the Compose specification's schema)")
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(docs), capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": path}, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout))


def test_compose_is_consistent(compose: dict[str, Any]) -> None:
    assert check_compose(compose, COMPOSE.parent) == []


def test_compose_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["ledger"]["imagee"] = "steward:local"
    good, bad = compose_schema_errors([compose, broken])
    assert good == []
    assert len(bad) == 1 and "imagee" in bad[0], bad


def test_compose_topology(compose: dict[str, Any]) -> None:
    services = compose["services"]
    commands = {n: s.get("command") for n, s in services.items()}
    running = {c[1] for c in commands.values() if isinstance(c, list) and c[:1] == ["run"]}
    assert running == PROCESSES | STANDBY_PROCESSES  # a standby ledger and scheduler (ADR 0060)
    assert sum(1 for c in commands.values() if c == ["run", "api"]) >= 2
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "temporalio/auto-setup" in services["temporal"]["image"]
    assert _depends(services["postgres-replica"]) == {"postgres": "service_healthy"}
    assert commands["migrate"] == ["migrate"]
    topics = " ".join(services["kafka-topics"]["command"])
    assert "steward.commands:12" in topics


def test_check_compose_catches(compose: dict[str, Any]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["ledger"]["depends_on"] = {"kafak": {"condition": "service_started"}}
    broken["services"]["scheduler"]["environment"] = {"STEWARD_SCHEDULER_INTERVAL": "1"}
    broken["services"]["worker"]["depends_on"] = {"api-1": {"condition": "service_completed_successfully"}}
    broken["services"]["migrate"]["depends_on"] = {"scheduler": {"condition": "service_started"}}
    broken["services"]["ledger"]["volumes"] = ["./no-such-file:/x"]
    broken["services"]["api-1"]["user"] = "0:0"
    broken["services"]["executor"]["cap_add"].append("SYS_ADMIN")
    broken["services"]["executor"]["environment"]["STEWARD_EXECUTOR_ISOLATION"] = "none"
    del broken["services"]["executor-gpu"]["user"]
    problems = "\n".join(check_compose(broken, COMPOSE.parent))
    for expected in ("'kafak'", "STEWARD_SCHEDULER_INTERVAL", "api-1 restarts", "dependency cycle", "no-such-file",
                     "service api-1: runs as root", "service executor: the executor's capabilities",
                     "service executor: STEWARD_EXECUTOR_ISOLATION=none", "service executor-gpu: the executor runs as"):
        assert expected in problems


# ============================================================================================ metrics


def documented_metrics() -> dict[str, str]:
    """{name: type} from the table of docs/metrics.md (rows starting with | `steward_...` |)."""
    found = {}
    for line in METRICS_DOC.read_text().splitlines():
        m = re.match(r"^\|\s*`(steward_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|", line)
        if m:
            found[m[1]] = m[2]
    return found


def _exprs(panel: dict[str, Any]) -> Iterator[str]:
    for t in panel.get("targets") or []:
        if t.get("expr"):
            yield t["expr"]
    for p in panel.get("panels") or []:
        yield from _exprs(p)


def check_dashboard(dashboard: dict[str, Any], metrics: dict[str, str]) -> list[str]:
    """Every steward_* name a panel queries is documented, used as its type allows; every documented
    metric is on some panel."""
    problems: list[str] = []
    if not (dashboard.get("title") and dashboard.get("uid") and dashboard.get("schemaVersion", 0) >= 36):
        problems.append("the dashboard needs a title, a uid and schemaVersion >= 36")
    if not any(v.get("name") == "datasource" for v in dashboard.get("templating", {}).get("list", [])):
        problems.append("no datasource variable")
    panels = dashboard.get("panels") or []
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    used: set[str] = set()
    for panel in panels:
        title = panel.get("title")
        if "gridPos" not in panel or not title:
            problems.append(f"panel {panel.get('id')}: no gridPos or title")
        for expr in _exprs(panel):
            for ident in re.findall(r"\bsteward_[a-z0-9_]+", expr):
                base = re.sub(r"_(bucket|sum|count)$", "", ident)
                if base != ident and metrics.get(base) == "histogram":
                    used.add(base)
                    if ident.endswith("_bucket") and "histogram_quantile" not in expr and "le=" not in expr:
                        problems.append(f"{title!r}: {ident} outside histogram_quantile")
                elif ident not in metrics:
                    problems.append(f"{title!r} uses {ident}, which is not in docs/metrics.md")
                elif metrics[ident] == "histogram":
                    problems.append(f"{title!r}: {ident} is a histogram: query _bucket, _sum or _count")
                else:
                    if metrics[ident] == "counter" and not re.search(rf"(rate|increase)\(\s*{ident}", expr):
                        problems.append(f"{title!r}: {ident} is a counter: rate() or increase() it")
                    used.add(ident)
    unused = sorted(set(metrics) - used)
    if unused:
        problems.append(f"documented but on no panel: {unused}")
    return problems


def test_metrics_doc_names_the_required_metrics() -> None:
    metrics = documented_metrics()
    for required in ("steward_pending_jobs", "steward_admission_wait_seconds", "steward_preemptions_total",
                     "steward_owed_gpu_seconds", "steward_delivered_gpu_seconds", "steward_owed_delivered_ratio",
                     "steward_ledger_lag_messages", "steward_api_request_seconds"):
        assert required in metrics, f"{required} is not in docs/metrics.md"
    assert metrics["steward_admission_wait_seconds"] == "histogram"
    assert metrics["steward_api_request_seconds"] == "histogram"
    for name, kind in metrics.items():
        assert (kind == "counter") == name.endswith("_total"), f"{name}: counters and only counters end in _total"


def test_dashboard_uses_exactly_the_documented_metrics() -> None:
    assert check_dashboard(json.loads(DASHBOARD.read_text()), documented_metrics()) == []


def test_check_dashboard_catches() -> None:
    metrics = documented_metrics()
    dashboard = json.loads(DASHBOARD.read_text())
    target = dashboard["panels"][1]["targets"]
    target += [{"refId": "X", "expr": "steward_no_such_metric"},
               {"refId": "Y", "expr": "sum(steward_deadletter_total)"},
               {"refId": "Z", "expr": "steward_api_request_seconds"}]
    problems = "\n".join(check_dashboard(dashboard, {**metrics, "steward_unplotted": "gauge"}))
    for expected in ("steward_no_such_metric", "rate() or increase()", "is a histogram", "steward_unplotted"):
        assert expected in problems


# ============================================================================================ image


def test_dockerfile() -> None:
    text = DOCKERFILE.read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)", text, re.M)
    assert base and base[1].startswith("python:3.11-slim")
    runtime = froms[-1]
    assert runtime == "${PYTHON_IMAGE}" or runtime.startswith("python:3.11-slim"), "the runtime is python:3.11-slim"
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["steward"\]', text, re.M)
    for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.M):
        for copied in line.split()[:-1]:
            assert (REPO / copied).exists(), f"the Dockerfile copies {copied}, which is not in the repository"
    assert "migrations" in text and "alembic.ini" in text
    # the processes the image runs: `steward run NAME` (the entrypoint is steward)
    assert re.search(r'^CMD \["run", "api"\]', text, re.M)
    # every data file the code finds relative to the repository root is copied beside the package
    needed: set[str] = set()
    for path in (REPO / "services" / "steward").rglob("*.py"):
        needed.update(re.findall(r'REPO_ROOT\s*/\s*"([^"]+)"', path.read_text()))
    runtime_stage = text[text.rindex("\nFROM "):]
    # not in the image: the run folder (STEWARD_RUN_DIR) and the local stack's scripts (`steward up`)
    for name in sorted(needed - {".run", "infra"}):
        assert re.search(rf"^COPY\s+(--from=\S+\s+)?\S*{re.escape(name)}\S*\s", runtime_stage, re.M), (
            f"the code reads REPO_ROOT/{name}, which the image does not copy")
