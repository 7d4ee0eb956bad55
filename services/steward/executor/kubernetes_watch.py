"""The Kubernetes executor's view of the cluster, kept current by the API server's list+watch (ADR 0089), instead of a
list of every Steward pod, every bound pod and the nodes (twice) each round (ADR 0074).

A `Watched` collection lists once (a consistent read: its `resourceVersion` is where the watch starts), then watches
from there with `allowWatchBookmarks` (the server's bookmarks move the resourceVersion on while nothing changes, so a
re-watch after a quiet spell does not fall out of the server's window). A watch the server ends (`timeoutSeconds`,
5 to 10 minutes, as client-go's reflector) is opened again from the last resourceVersion; a broken stream likewise
after a backoff; a `410 Gone` (the resourceVersion is older than the server keeps) or any other refusal lists again.
Backoff doubles from `BACKOFF_S` up to `BACKOFF_MAX_S` (`steward.backoff.doubling_delay`), with jitter, and resets
once a list or watch succeeds.

Each collection keeps only what the executor reads (`keep`): Steward's pods whole, of the other bound pods only the
GPUs each holds on its node (foreign load), the nodes whole. Readers take copies under a lock; the watch runs in a
thread of its own (the executor's HTTP calls are blocking httpx calls in threads).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from steward.backoff import doubling_delay
from steward.executor.kubernetes_api import Hangup, KubeClient, KubeError
from steward.executor.kubernetes_pods import PodProblem, is_steward_pod, is_terminal, pod_gpus

log = logging.getLogger("steward.executor.kubernetes_watch")

BACKOFF_S = 0.5
BACKOFF_MAX_S = 30.0
WATCH_TIMEOUT_S = (300, 600)  # the server ends each watch after a random time in this range (client-go's)

Obj = dict[str, Any]
Keep = Callable[[Obj], Obj | None]


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else str(meta.get("name", ""))


def whole(obj: Obj) -> Obj | None:
    return obj


def foreign_holding(scheduler_name: str) -> Keep:
    """Of a bound pod, what foreign load needs (`kubernetes_inventory.foreign_gpus`' input, small): None for
    Steward's pods, finished pods and pods without GPUs."""
    def keep(pod: Obj) -> Obj | None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or is_steward_pod(pod, scheduler_name) or is_terminal(pod):
            return None
        try:
            gpus = pod_gpus(pod)
        except PodProblem:
            return None
        if not gpus:
            return None
        return {"metadata": {"name": (pod.get("metadata") or {}).get("name"),
                             "namespace": (pod.get("metadata") or {}).get("namespace")},
                "spec": {"nodeName": node, "containers": [
                    {"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    return keep


def apply_event(items: dict[str, Obj], event: Mapping[str, Any], keep: Keep) -> str | None:
    """One watch event applied to `items`; the new resourceVersion (bookmarks too), or None for an event that has
    none. Raises `Gone` for a 410 and `KubeError` for any other ERROR event."""
    kind = event.get("type")
    obj = event.get("object") or {}
    if kind == "ERROR":
        code = int(obj.get("code") or 0)
        if code == 410:
            raise Gone(str(obj.get("message", "")))
        raise KubeError(f"watch error: {code} {obj.get('message', '')}", code)
    version = (obj.get("metadata") or {}).get("resourceVersion")
    if kind in ("ADDED", "MODIFIED"):
        kept = keep(obj)
        if kept is None:
            items.pop(object_key(obj), None)
        else:
            items[object_key(obj)] = kept
    elif kind == "DELETED":
        items.pop(object_key(obj), None)
    return str(version) if version else None


@dataclass
class Backoff:
    """Doubling waits with jitter, from `first_s` up to `max_s`; `reset` after a success."""

    first_s: float = BACKOFF_S
    max_s: float = BACKOFF_MAX_S
    rand: Callable[[], float] = random.random
    waits: int = field(default=0, init=False)  # waits since the last success

    def wait_s(self) -> float:
        """The next wait (`steward.backoff.doubling_delay`), half to all of it at random."""
        wait = doubling_delay(self.waits, self.first_s, self.max_s, 0.5 + self.rand() / 2)
        self.waits += 1
        return wait

    def reset(self) -> None:
        self.waits = 0


class Watched:
    """One collection (`path` with `params`: a field selector), listed then watched in a thread of its own: `items`
    (key -> what `keep` made of the object) is current as long as `live`; `on_change(kind)` is called (in the watch's
    thread) after each change applied ("LIST" for a list)."""

    def __init__(self, kube: KubeClient, path: str, params: Mapping[str, str] | None = None, keep: Keep = whole,
                 name: str = "", on_change: Callable[[str, Obj], None] | None = None,
                 backoff: Backoff | None = None) -> None:
        self.kube = kube
        self.path = path
        self.params = dict(params or {})
        self.keep = keep
        self.name = name or path
        self.on_change = on_change
        self.backoff = backoff or Backoff()
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self.version = ""
        self.synced = threading.Event()  # the first list is applied
        self.live = False  # a watch is open and delivering (or a list was just applied)
        self.lists = 0  # how many lists (the first and every relist)
        self.watches = 0  # how many watch requests
        self._stop = threading.Event()
        self._hangup: Hangup | None = None  # the open watch's, which `stop` hangs up
        self._thread: threading.Thread | None = None

    # -- reading ----------------------------------------------------------------------------------

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    # -- running ----------------------------------------------------------------------------------

    def start(self) -> Watched:
        self._thread = threading.Thread(target=self.run, name=f"k8s-watch-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, without waiting long: the open stream is hung up (`Hangup`: its socket shut down, so the
        watch's blocked read returns and its own thread closes the connection), and the watch's thread is given 2 s
        to end (a daemon)."""
        self._stop.set()
        hangup = self._hangup
        if hangup is not None:
            hangup.hang_up()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def run(self, listed: bool = False) -> None:
        """List (unless `listed` already), then watch until stopped: a watch the server ended or a broken stream is
        watched again from the last resourceVersion (after a backoff when broken), a 410 or a refusal lists again."""
        need_list = not listed
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                self.watch_once()
                self.backoff.reset()
            except (Gone, KubeError) as err:
                if isinstance(err, KubeError) and err.status != 410:
                    if self._stop.is_set():
                        break
                    self.live, need_list = False, True
                    wait = self.backoff.wait_s()
                    log.warning("watch of %s refused (%s); listing again in %.1f s", self.name, err, wait)
                    self._stop.wait(wait)
                    continue
                log.info("watch of %s: resourceVersion %s gone (%s); listing again", self.name, self.version, err)
                self.live, need_list = False, True
            except (httpx.HTTPError, ValueError) as err:  # the stream broke: watched again from where it was
                if self._stop.is_set():
                    break
                self.live = False
                wait = self.backoff.wait_s()
                log.warning("watch of %s broken (%s); again in %.1f s", self.name, err, wait)
                self._stop.wait(wait)
        self.live = False

    def relist(self) -> None:
        data = self.kube.call("GET", self.path, params=self.params)
        self.lists += 1
        items = {}
        for obj in data.get("items") or []:
            kept = self.keep(obj)
            if kept is not None:
                items[object_key(obj)] = kept
        with self._lock:
            self._items = items
        self.version = str((data.get("metadata") or {}).get("resourceVersion") or "")
        self.live = True
        self.synced.set()
        self.backoff.reset()
        if self.on_change is not None:
            self.on_change("LIST", {})

    def watch_once(self) -> None:
        """One watch request from `version` until the server ends it (or `stop`)."""
        timeout_s = random.randint(*WATCH_TIMEOUT_S)
        params = self.params | {"watch": "1", "resourceVersion": self.version, "allowWatchBookmarks": "true",
                                "timeoutSeconds": str(timeout_s)}
        self.watches += 1
        self._hangup = hangup = Hangup(on_open=self._opened)
        if self._stop.is_set():  # `stop` came before this watch's hang-up existed
            return
        with contextlib.closing(self.kube.stream(self.path, params, timeout_s + 30, hangup)) as events:
            for event in events:
                with self._lock:
                    version = apply_event(self._items, event, self.keep)
                if version:
                    self.version = version
                self.live = True
                if self.on_change is not None and event.get("type") != "BOOKMARK":
                    self.on_change(str(event.get("type")), event.get("object") or {})
                if self._stop.is_set():
                    return

    def _opened(self) -> None:
        self.live = True


@dataclass
class ClusterView:
    """The three collections the executor reads: Steward's pods (whole), the GPUs other schedulers' bound pods hold,
    and the nodes."""

    steward: Watched
    foreign: Watched
    nodes: Watched

    @classmethod
    def of(cls, kube: KubeClient, scheduler_name: str,
           on_steward: Callable[[str, Obj], None] | None = None,
           on_nodes: Callable[[str, Obj], None] | None = None) -> ClusterView:
        return cls(
            Watched(kube, "/api/v1/pods", {"fieldSelector": f"spec.schedulerName={scheduler_name}"},
                    name="steward-pods", on_change=on_steward),
            Watched(kube, "/api/v1/pods", {"fieldSelector": "spec.nodeName!="}, foreign_holding(scheduler_name),
                    name="bound-pods"),
            Watched(kube, "/api/v1/nodes", name="nodes", on_change=on_nodes))

    def all(self) -> tuple[Watched, ...]:
        return (self.steward, self.foreign, self.nodes)

    def start(self) -> ClusterView:
        for w in self.all():
            w.start()
        return self

    def stop(self) -> None:
        for w in self.all():
            w._stop.set()
        for w in self.all():
            w.stop()

    def synced(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        return all(w.synced.wait(max(deadline - time.monotonic(), 0)) for w in self.all())

    @property
    def live(self) -> bool:
        return all(w.live and w.synced.is_set() for w in self.all())
