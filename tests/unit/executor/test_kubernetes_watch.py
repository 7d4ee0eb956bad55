"""ADR 0089: the Kubernetes executor's view kept by list+watch. The events applied to the view, the reflector's
answers to a watch the server ended, a 410 Gone, a broken stream and a refusal (scripted HTTP answers; the real API
server's are in tests/integration/test_kubernetes_executor.py), the backoff, and a round that reads the view asks the
API server for nothing."""

from __future__ import annotations

import asyncio
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from steward.config import Settings
from steward.executor.kubernetes import KubernetesExecutor, KubernetesSettings
from steward.executor.kubernetes_api import Credentials, Hangup, KubeClient, KubeError
from steward.executor.kubernetes_watch import (
    Backoff,
    ClusterView,
    Gone,
    Watched,
    apply_event,
    foreign_holding,
    object_key,
    whole,
)


def pod(name: str, *, rv: str = "1", node: str = "", gpus: int = 1, scheduler: str = "default-scheduler",
        phase: str = "Running", ns: str = "team") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
            "spec": {"nodeName": node, "schedulerName": scheduler,
                     "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}] if gpus else [{}]},
            "status": {"phase": phase}}


# -- one event applied to the view ------------------------------------------------------------------------------

EVENTS: list[tuple[str, dict[str, Any], dict[str, str], str | None]] = [
    # (event, what the view holds after it (key -> resourceVersion), the resourceVersion returned)
    ("added", {"type": "ADDED", "object": pod("a", rv="5")}, {"team/a": "5", "team/b": "1"}, "5"),
    ("modified", {"type": "MODIFIED", "object": pod("b", rv="6")}, {"team/b": "6"}, "6"),
    ("deleted", {"type": "DELETED", "object": pod("b", rv="7")}, {}, "7"),
    ("deleted, unknown", {"type": "DELETED", "object": pod("zz", rv="7")}, {"team/b": "1"}, "7"),
    ("bookmark moves the version only", {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
     {"team/b": "1"}, "9"),
    ("no version", {"type": "MODIFIED", "object": {"metadata": {"name": "b", "namespace": "team"}}},
     {"team/b": ""}, None),
]


@pytest.mark.parametrize(("case", "event", "after", "version"), EVENTS, ids=[e[0] for e in EVENTS])
def test_an_event_changes_the_view(case: str, event: dict[str, Any], after: dict[str, str],
                                   version: str | None) -> None:
    items = {"team/b": pod("b")}
    assert apply_event(items, event, whole) == version
    assert {k: v["metadata"].get("resourceVersion", "") for k, v in items.items()} == after


@pytest.mark.parametrize(("code", "error"), [(410, Gone), (500, KubeError), (403, KubeError)])
def test_an_error_event_relists_on_410_and_fails_otherwise(code: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        apply_event({}, {"type": "ERROR", "object": {"kind": "Status", "code": code, "message": "too old"}}, whole)


HOLDING = [
    ("a foreign pod bound with GPUs is kept, small", pod("f", node="n1", gpus=2), {"n1": 2}),
    ("Steward's own pod is not foreign", pod("f", node="n1", scheduler="steward"), {}),
    ("a finished pod holds nothing", pod("f", node="n1", phase="Succeeded"), {}),
    ("a pod without GPUs holds none", pod("f", node="n1", gpus=0), {}),
    ("an unbound pod holds none", pod("f"), {}),
]


@pytest.mark.parametrize(("case", "obj", "held"), HOLDING, ids=[h[0] for h in HOLDING])
def test_the_foreign_view_keeps_what_foreign_load_needs(case: str, obj: dict[str, Any], held: dict[str, int]) -> None:
    from steward.executor.kubernetes_inventory import foreign_gpus
    items: dict[str, Any] = {"team/f": {"stale": True}}
    apply_event(items, {"type": "MODIFIED", "object": obj}, foreign_holding("steward"))
    assert foreign_gpus(items.values(), "steward") == held
    assert "stale" not in str(items)  # a pod that stops holding GPUs leaves the view


def test_object_keys() -> None:
    assert object_key(pod("a")) == "team/a"
    assert object_key({"metadata": {"name": "gpu-1"}}) == "gpu-1"


def test_the_backoff_doubles_to_its_cap_with_jitter_and_resets() -> None:
    b = Backoff(0.5, 4.0, rand=lambda: 1.0)
    assert [b.wait_s() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.wait_s() == 0.5
    assert Backoff(0.5, 4.0, rand=lambda: 0.0).wait_s() == 0.25  # jitter: half to all of it


# -- the reflector's loop, against scripted answers ----------------------------------------------------------------

Step = Callable[[], Any]


class ScriptedKube(KubeClient):
    """Answers a list or a watch from a script (each list answer a dict or an exception; each watch a list of events,
    ending with an exception to break the stream); records what was asked. The watch stops after the script."""

    def __init__(self, lists: list[Any], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.asked: list[str] = []
        self.stop: Callable[[], None] = lambda: None

    def call(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
             body: Mapping[str, Any] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        self.asked.append("list")
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    def stream(self, path: str, params: Mapping[str, str], read_timeout_s: float,
               hangup: Hangup | None = None) -> Generator[dict[str, Any], None, None]:
        self.asked.append(f"watch@{params['resourceVersion']}")
        assert params["allowWatchBookmarks"] == "true" and 300 <= int(params["timeoutSeconds"]) <= 600
        if not self.watches:
            self.stop()
            return
        for item in self.watches.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


def listed(rv: str, *pods: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv}, "items": list(pods)}


def added(name: str, rv: str) -> dict[str, Any]:
    return {"type": "ADDED", "object": pod(name, rv=rv)}


LOOPS: list[tuple[str, list[Any], list[list[Any]], list[str], set[str], int]] = [
    # (case, list answers, watch streams, requests in order, pods in the view at the end, backoffs waited)
    ("a watch the server ended is opened again from the last version, no list",
     [listed("10", pod("a"))], [[added("b", "11")], [{"type": "BOOKMARK", "object": {"metadata": {
         "resourceVersion": "15"}}}]],
     ["list", "watch@10", "watch@11", "watch@15"], {"team/a", "team/b"}, 0),
    ("410 Gone in the stream: list again, watch from the new list",
     [listed("10", pod("a")), listed("20", pod("c"))],
     [[{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}]],
     ["list", "watch@10", "list", "watch@20"], {"team/c"}, 0),
    ("410 at the watch's open: list again",
     [listed("10"), listed("30", pod("d"))], [[KubeError("GET /api/v1/pods (watch): 410 Gone", 410)]],
     ["list", "watch@10", "list", "watch@30"], {"team/d"}, 0),
    ("a watch refused otherwise (403): list again after a backoff",
     [listed("10"), listed("31", pod("d"))], [[KubeError("GET /api/v1/pods (watch): 403 forbidden", 403)]],
     ["list", "watch@10", "list", "watch@31"], {"team/d"}, 1),
    ("a broken stream: after a backoff, watched again from the last version, no list",
     [listed("10")], [[added("a", "12"), httpx.ReadError("connection reset")]],
     ["list", "watch@10", "watch@12"], {"team/a"}, 1),
    ("a list refused: after a backoff, listed again",
     [KubeError("GET /api/v1/pods: 503 unavailable", 503), listed("40", pod("e"))], [],
     ["list", "list", "watch@40"], {"team/e"}, 1),
]


@pytest.mark.parametrize(("case", "lists", "watches", "asked", "held", "backoffs"), LOOPS, ids=[c[0] for c in LOOPS])
def test_the_reflector_relists_only_when_it_must(case: str, lists: list[Any], watches: list[list[Any]],
                                                 asked: list[str], held: set[str], backoffs: int) -> None:
    kube = ScriptedKube(lists, watches)
    waits: list[float] = []
    w = Watched(kube, "/api/v1/pods", backoff=Backoff(0.01, 0.01, rand=lambda: 1.0))
    kube.stop = w._stop.set
    w._stop.wait = lambda timeout=None: waits.append(float(timeout or 0)) or False  # type: ignore[assignment,method-assign,func-returns-value]
    w.run()
    assert kube.asked == asked
    assert {object_key(p) for p in w.items()} == held
    assert len(waits) == backoffs  # only after a failure, not after a 410 or a watch the server ended


# -- a round reads the view: no list ---------------------------------------------------------------------------------


class Refusing(KubeClient):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def call(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
             body: Mapping[str, Any] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        self.asked.append(f"{method} {path}")
        return {"items": []}


class Publisher:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def publish(self, envelope: Any, **_: Any) -> None:
        self.sent.append(envelope)

    def publish_many(self, envelopes: Any, **_: Any) -> None:
        self.sent.extend(envelopes)


def synced(w: Watched, objs: list[dict[str, Any]]) -> None:
    for o in objs:
        apply_event(w._items, {"type": "ADDED", "object": o}, w.keep)
    w.live = True
    w.synced.set()


@pytest.mark.parametrize(("watching", "reads"), [(True, []), (False, ["GET /api/v1/nodes", "GET /api/v1/pods"])])
def test_a_round_reads_the_watched_view_and_asks_the_api_server_nothing(tmp_path: Path, watching: bool,
                                                                       reads: list[str]) -> None:
    kube = Refusing()
    ex = KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), Publisher(), kube,  # type: ignore[arg-type]
                            cluster=KubernetesSettings(namespace_projects="team=vision"))
    node = {"metadata": {"name": "gpu-1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"},
                                                      "conditions": [{"type": "Ready", "status": "True"}]}}
    if watching:
        ex.view = ClusterView.of(kube, "steward")
        synced(ex.view.steward, [pod("s", scheduler="steward", node="gpu-1")])
        synced(ex.view.foreign, [pod("f", node="gpu-1", gpus=3)])
        synced(ex.view.nodes, [node])
    ex.round()
    ex.round()
    assert sorted({a.split("?")[0] for a in kube.asked if a.startswith("GET")}) == reads
    if watching:
        assert ex.heartbeat().foreign == {"gpu-1": 3}


def test_a_reader_waiting_while_the_watch_makes_its_first_list_reads_the_view_not_the_api_server(
        tmp_path: Path) -> None:
    """At start, a watch or a start may wait for a view before the watches have listed: the first list wakes it and it
    reads the view (before, it waited for a round's list that never comes with the watches, then asked for its pods)."""
    from steward.executor.attempts import AttemptRecord
    kube = Refusing()
    ex = KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), Publisher(), kube,  # type: ignore[arg-type]
                            cluster=KubernetesSettings(namespace_projects="team=vision"))
    rec = AttemptRecord("k8s.team.s", 1, ["x"], {"gpu-1": [0]}, "", "batch", pid=1, extra={"pods": ["team/s"]})

    def no_get(rec: object) -> list[dict[str, Any] | None]:
        raise AssertionError("asked the API server for its pods")

    ex.pods_of = no_get  # type: ignore[method-assign]

    async def scenario() -> list[dict[str, Any] | None]:
        ex._rounds, ex._loop = True, asyncio.get_running_loop()
        ex.view = ClusterView.of(kube, "steward", on_steward=ex._watched)
        reader = asyncio.create_task(ex.pods_seen(rec, time.monotonic()))
        await asyncio.sleep(0.1)
        w = ex.view.steward
        await asyncio.to_thread(lambda: (apply_event(w._items, {"type": "ADDED", "object": pod(
            "s", scheduler="steward")}, w.keep), setattr(w, "live", True), w.synced.set(), ex._watched("LIST", {})))
        return await asyncio.wait_for(reader, 2.0)

    (seen,) = asyncio.run(scenario())
    assert seen is not None and object_key(seen) == "team/s"


# -- stopping a watch another thread reads --------------------------------------------------------------------------


class SilentWatchServer(socketserver.ThreadingTCPServer):
    """A plain HTTP API server on 127.0.0.1: lists answer an empty list at resourceVersion 1; a watch sends its
    headers and one bookmark, then says nothing (holding the connection) until the client hangs up."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.hung_up = threading.Event()  # a watch connection saw the client end it
        super().__init__(("127.0.0.1", 0), self.Handler)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            server = self.server
            assert isinstance(server, SilentWatchServer)
            while True:
                request = self.rfile.readline()
                if not request:
                    return
                while self.rfile.readline() not in (b"\r\n", b""):
                    pass
                if b"watch=1" not in request:
                    body = json.dumps({"items": [], "metadata": {"resourceVersion": "1"}}).encode()
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                     + str(len(body)).encode() + b"\r\n\r\n" + body)
                    continue
                line = json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "2"}}}) + "\n"
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n"
                                 + f"{len(line):x}\r\n{line}\r\n".encode())
                self.wfile.flush()
                if self.rfile.read(1) == b"":  # silent until the client's side ends
                    server.hung_up.set()
                return


def test_stopping_ends_a_watch_blocked_on_a_silent_stream_and_its_own_thread_closes_the_connection() -> None:
    """Closing a socket another thread reads frees its descriptor under that thread's read (over TLS the old read
    then consumes whichever connection gets the number next: CI's `DECRYPTION_FAILED_OR_BAD_RECORD_MAC`), and does
    not even wake the read. `stop` hangs up instead: the socket is shut down, the blocked read returns, the watch's
    thread ends and closes the connection itself."""
    server = SilentWatchServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kube = KubeClient(Credentials(server=f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        w = Watched(kube, "/api/v1/pods", name="pods").start()
        deadline = time.monotonic() + 10
        while w.version != "2" and time.monotonic() < deadline:  # the bookmark read: the watch is blocked now
            time.sleep(0.01)
        assert w.version == "2" and w.live
        w.stop()
        assert w._thread is not None and not w._thread.is_alive()  # ended within stop's 2 s
        assert server.hung_up.wait(5)
        assert not w.live and w.watches == 1
    finally:
        kube.close()
        server.shutdown()
        server.server_close()


def test_a_hang_up_shuts_down_only_a_socket_the_reader_still_holds() -> None:
    """Before the stream opened, a hang-up makes the reader stop at once; while it is open, the socket is shut down;
    after the reader let go (its descriptor may be another connection's by then), nothing is touched."""
    opened: list[bool] = []
    early = Hangup(on_open=lambda: opened.append(True))
    early.hang_up()
    a, b = socket.socketpair()
    with a, b:
        assert not early.attach(a) and opened == []

        held = Hangup(on_open=lambda: opened.append(True))
        assert held.attach(a) and opened == [True]
        held.hang_up()
        assert b.recv(1) == b""  # the reader's side was shut down: the peer sees the end

    c, d = socket.socketpair()
    with c, d:
        let_go = Hangup()
        assert let_go.attach(c)
        let_go.detach()
        let_go.hang_up()
        c.sendall(b"x")
        assert d.recv(1) == b"x"  # untouched
