"""The few Kubernetes API calls the Kubernetes executor makes, as plain HTTPS with httpx (docs/adr/0051: no client
library): list pods and nodes, bind a pod (the Binding subresource), create and delete pods (a delete names its
grace period), patch a node (cordon) and a pod's labels and status conditions, and post an event.

Credentials come from a kubeconfig (its current context: server, CA, a bearer token or a client certificate)
or, inside a cluster, from the pod's service account."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# httpx logs every request at INFO: the executor polls the API server every second
logging.getLogger("httpx").setLevel(logging.WARNING)


class KubeError(Exception):
    """The API server refused a call, or could not be reached (one line: the call and its answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_file: str = ""
    token: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure: bool = False


def _data_file(data: str, suffix: str) -> str:
    """A kubeconfig's inline `*-data` (base64) as a private file (ssl loads certificates from files)."""
    fd, path = tempfile.mkstemp(prefix="steward-kube-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return path


def _relative(base: Path, value: str) -> str:
    return str(value if os.path.isabs(value) else base.parent / value)


def load_kubeconfig(path: str | Path, context: str = "") -> Credentials:
    """The current (or named) context of a kubeconfig file; `KubeError` naming what is missing."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise KubeError(f"cannot read kubeconfig {path}: {err}") from None
    wanted = context or config.get("current-context", "")

    def named(kind: str, name: str) -> dict[str, Any]:
        for item in config.get(f"{kind}s") or []:
            if item.get("name") == name:
                return dict(item.get(kind) or {})
        raise KubeError(f"kubeconfig {path} has no {kind} named {name!r}")

    ctx = named("context", wanted)
    cluster = named("cluster", ctx.get("cluster", ""))
    user = named("user", ctx.get("user", "")) if ctx.get("user") else {}
    if not cluster.get("server"):
        raise KubeError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} names no server")
    ca = cluster.get("certificate-authority", "")
    ca = _relative(path, ca) if ca else (_data_file(cluster["certificate-authority-data"], ".crt")
                                         if cluster.get("certificate-authority-data") else "")
    token = user.get("token", "")
    if not token and user.get("tokenFile"):
        token = Path(_relative(path, user["tokenFile"])).read_text().strip()
    cert = user.get("client-certificate", "")
    cert = _relative(path, cert) if cert else (_data_file(user["client-certificate-data"], ".crt")
                                               if user.get("client-certificate-data") else "")
    key = user.get("client-key", "")
    key = _relative(path, key) if key else (_data_file(user["client-key-data"], ".key")
                                            if user.get("client-key-data") else "")
    return Credentials(cluster["server"], ca, token, cert, key, bool(cluster.get("insecure-skip-tls-verify")))


def in_cluster() -> Credentials | None:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (SERVICE_ACCOUNT / "token").is_file():
        return None
    return Credentials(f"https://{host}:{port}", str(SERVICE_ACCOUNT / "ca.crt"),
                       (SERVICE_ACCOUNT / "token").read_text().strip())


def credentials(kubeconfig: str = "") -> Credentials:
    """Where the API server is: the kubeconfig named (else $KUBECONFIG, else ~/.kube/config), or the pod's
    service account when running in a cluster without one."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    if not path:
        found = in_cluster()
        if found is not None:
            return found
        path = str(Path.home() / ".kube" / "config")
    return load_kubeconfig(path)


class Hangup:
    """How another thread ends a watch stream: it shuts the connection's socket down (the reading thread's blocked
    read returns at once, and that thread closes the connection), it never closes it. Closing a socket another
    thread is reading frees the descriptor while that thread's OpenSSL read still holds its number: the next
    connection the process opens can get the number, and the old read then consumes that connection's TLS records
    (seen in CI: `DECRYPTION_FAILED_OR_BAD_RECORD_MAC` on an unrelated GET). The lock keeps `hang_up` off a socket
    the reader has already let go of (its number may belong to another connection by then)."""

    def __init__(self, on_open: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.hung_up = False
        self.on_open = on_open  # called once the server has accepted the watch

    def attach(self, sock: socket.socket | None) -> bool:
        """The reader's stream is open on `sock`; False when it was hung up already (the reader stops)."""
        with self._lock:
            if self.hung_up:
                return False
            self._sock = sock
        if self.on_open is not None:
            self.on_open()
        return True

    def detach(self) -> None:
        """The reader lets go of the socket (before it closes it)."""
        with self._lock:
            self._sock = None

    def hang_up(self) -> None:
        with self._lock:
            self.hung_up = True
            if self._sock is not None:
                with contextlib.suppress(OSError):  # the peer may have ended it already
                    # the plain socket's shutdown: `SSLSocket.shutdown` also drops its SSL object under the reader
                    socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


class KubeClient:
    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        if creds.insecure:
            verify: ssl.SSLContext | bool = False
        else:
            verify = ssl.create_default_context(cafile=creds.ca_file or None)
            if creds.cert_file:
                verify.load_cert_chain(creds.cert_file, creds.key_file or None)
        headers = {"Authorization": f"Bearer {creds.token}"} if creds.token else {}
        self.http = httpx.Client(base_url=creds.server, verify=verify, headers=headers, timeout=timeout)
        # ADR 0089: the requests made, by `VERB path-kind` (LIST pods, WATCH nodes, POST binding...): what a round
        # costs the API server, read by the tests and benchmarks
        self.requests: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # the calls answered 4xx or 5xx, by `VERB resource status`
        self._counting = threading.Lock()

    def _count(self, kind: str) -> None:
        with self._counting:
            self.requests[kind] += 1

    @staticmethod
    def kind_of(method: str, path: str, params: Mapping[str, str] | None = None) -> str:
        """`VERB resource` of a call: `LIST pods`, `WATCH nodes`, `GET pods`, `POST pods/binding`, `PATCH nodes`."""
        parts = [p for p in path.split("?")[0].split("/") if p][2:]  # after /api/v1
        if parts[:1] == ["namespaces"] and len(parts) >= 3:
            parts = parts[2:]
        resource = parts[0] if parts else ""
        if len(parts) >= 3:
            resource = f"{parts[0]}/{parts[2]}"
        verb = method
        if method == "GET":
            verb = "WATCH" if (params or {}).get("watch") else ("LIST" if len(parts) == 1 else "GET")
        return f"{verb} {resource}"

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
             body: Mapping[str, Any] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        self._count(self.kind_of(method, path, params))
        try:
            resp = self.http.request(method, path, params=params, json=body,
                                     headers={"Content-Type": content_type} if body is not None else None)
        except httpx.HTTPError as err:
            raise KubeError(f"{method} {path}: {err}") from None
        if resp.status_code >= 400:
            with self._counting:
                self.refused[f"{self.kind_of(method, path, params)} {resp.status_code}"] += 1
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise KubeError(f"{method} {path}: {resp.status_code} {message}", resp.status_code)
        data = resp.json() if resp.content else {}
        return data if isinstance(data, dict) else {}

    def stream(self, path: str, params: Mapping[str, str], read_timeout_s: float,
               hangup: Hangup | None = None) -> Generator[dict[str, Any], None, None]:
        """A watch: the events the API server streams (one JSON object a line) until it ends the stream, or until
        another thread calls `hangup.hang_up()`; `KubeError` when it refuses (410 included: `status` says which),
        `httpx.HTTPError` when the stream breaks (a hang-up included)."""
        self._count(self.kind_of("GET", path, params))
        timeout = httpx.Timeout(10.0, read=read_timeout_s)
        with self.http.stream("GET", path, params=params, timeout=timeout) as resp:
            if resp.status_code >= 400:
                with self._counting:
                    self.refused[f"{self.kind_of('GET', path, params)} {resp.status_code}"] += 1
                resp.read()
                try:
                    message = resp.json().get("message", resp.text)
                except ValueError:
                    message = resp.text
                raise KubeError(f"GET {path} (watch): {resp.status_code} {message}", resp.status_code)
            if hangup is not None:
                network = resp.extensions.get("network_stream")
                if not hangup.attach(network.get_extra_info("socket") if network is not None else None):
                    return
            try:
                for line in resp.iter_lines():
                    if line.strip():
                        yield json.loads(line)
            finally:
                if hangup is not None:
                    hangup.detach()

    # -- reads ------------------------------------------------------------------------------------

    def pods(self, field_selector: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        params = {k: v for k, v in (("fieldSelector", field_selector), ("labelSelector", label_selector)) if v}
        return list(self.call("GET", "/api/v1/pods", params=params).get("items") or [])

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except KubeError as err:
            if err.status == 404:
                return None
            raise

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/api/v1/nodes").get("items") or [])

    def node(self, name: str) -> dict[str, Any] | None:
        """One node as the API server has it now (a list by name: the executor's role lists nodes, it does not
        get them), None when there is none."""
        items = self.call("GET", "/api/v1/nodes", params={"fieldSelector": f"metadata.name={name}"}).get("items")
        return dict(items[0]) if items else None

    # -- writes -----------------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)

    def delete_pod(self, namespace: str, name: str, grace_s: int) -> bool:
        """Delete with this grace period (seconds); False when the pod is already gone."""
        try:
            self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                      body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": max(grace_s, 0)})
        except KubeError as err:
            if err.status == 404:
                return False
            raise
        return True

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any], status: bool = False) -> None:
        suffix = "/status" if status else ""
        self.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}{suffix}", body=patch,
                  content_type="application/strategic-merge-patch+json")

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        self.call("PATCH", f"/api/v1/nodes/{name}", body=patch,
                  content_type="application/strategic-merge-patch+json")

    def event(self, namespace: str, pod: Mapping[str, Any], reason: str, message: str, kind: str = "Normal",
              component: str = "steward") -> None:
        meta = pod.get("metadata", {})
        self.call("POST", f"/api/v1/namespaces/{namespace}/events", body={
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'pod')}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "namespace": namespace,
                               "uid": meta.get("uid")},
            "reason": reason, "message": message[:1024], "type": kind, "source": {"component": component},
        })
