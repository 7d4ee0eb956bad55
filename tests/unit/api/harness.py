"""A real API server for tests and benchmarks, without Kafka: the app as `steward up` builds it, on a
migrated SQLite store, with the ledger in process (LocalGateway), served by uvicorn on a loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from steward.api.app import Built, build_app
from steward.api.commands import LocalGateway
from steward.api.settings import ApiSettings
from steward.auth.tokens import TokenStore
from steward.bus.envelope import command_envelope
from steward.config import Settings
from steward.domain.commands import Command, PlaceJob, RegisterNode, ReportJobStarted, SetAllocations, SubmitJob
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

TREE: list[SetAllocations] = [
    SetAllocations("cluster", {"research": 0.6, "ops": 0.4}, "setup"),
    SetAllocations("research", {"team-a": 0.5, "team-b": 0.5}, "setup"),
    SetAllocations("team-a", {"a1": 0.6, "a2": 0.4}, "setup"),
    SetAllocations("team-b", {"b1": 1.0}, "setup"),
    SetAllocations("ops", {"o1": 1.0}, "setup"),
]
NODES: list[RegisterNode] = [
    RegisterNode("n1", 8, "h100", ["zone-a", "block-1", "n1"]),
    RegisterNode("n2", 8, "h100", ["zone-a", "block-2", "n2"]),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    ws_url: str
    built: Built
    store: EventStore
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def services(self) -> Any:
        return self.built.services

    def post(self, query: str, variables: dict[str, Any] | None = None, token: str | None = None,
             **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url, json={"query": query, "variables": variables or {}}, headers=headers,
                          timeout=30, **kw)

    def record(self, commands: Sequence[Command], actor: str = "setup", rules: int | None = None) -> None:
        """Record commands behind the API's back (as another writer would), then let the in-process
        ledger behind the mutations fold them (it is otherwise the only writer and keeps its state);
        `rules`: decided as a ledger of that rules version did (an old log), today's by default."""
        from steward.ledger.ledger import Ledger

        record(self.store, commands, actor, rules)
        gateway = self.built.services.gateway
        if isinstance(gateway, LocalGateway):
            with gateway._lock:
                gateway.ledger = Ledger(self.store, consumer_name="local")

    def gql(self, query: str, variables: dict[str, Any] | None = None, token: str | None = None) -> dict[str, Any]:
        resp = self.post(query, variables, token)
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body


def record(store: EventStore, commands: Sequence[Command], actor: str = "setup", rules: int | None = None) -> None:
    from steward.domain.rules_version import CURRENT
    from steward.ledger.ledger import Ledger

    ledger = Ledger(store, consumer_name="seed", rules=CURRENT if rules is None else rules)
    ledger.process([("seed", command_envelope(c, actor=actor, role="admin").encode()) for c in commands], {})
    for built in _SERVING.get(id(store), ()):
        # the API's read model follows the log on its own within `api_feed_poll_s`; a test reads at once
        built.services.read.reach(store.head())


_SERVING: dict[int, list[Built]] = {}  # the apps served on each store (by id), for `record`


def seed(store: EventStore, now: float | None = None) -> None:
    """The tree and nodes above, a running job in a1 and in b1, and waiting jobs in a1, a2 and b1."""
    record(store, [*TREE, *NODES])
    jobs = [SubmitJob("a1-run", "a1", 4, 600, ["sleep", "1"]), SubmitJob("b1-run", "b1", 8, 600, ["sleep", "1"]),
            SubmitJob("a1-wait", "a1", 8, 600, ["true"]), SubmitJob("a2-wait", "a2", 2, 0, ["true"]),
            SubmitJob("b1-wait", "b1", 16, 600, ["true"], job_class="interactive")]
    record(store, jobs, actor="alice")
    record(store, [PlaceJob("a1-run", {"n1": [0, 1, 2, 3]}, True, {"policy": "test"}),
                   PlaceJob("b1-run", {"n2": list(range(8))}, True, {"policy": "test"})], actor="scheduler")
    record(store, [ReportJobStarted("a1-run", 1, 100), ReportJobStarted("b1-run", 1, 101)], actor="executor")


@contextmanager
def serve(tmp: Path, api: ApiSettings | None = None, extra_extensions: Sequence[Any] = (),
          seeded: bool = True, port: int | None = None) -> Iterator[Server]:
    url = f"sqlite:///{tmp / 'steward.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    if seeded:
        seed(store)
    api = api or ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000)
    settings = Settings(run_dir=tmp, store_url=url)
    built = build_app(settings, api, store=store, gateway=LocalGateway(store), extra_extensions=extra_extensions)
    port = port or free_port()
    # loop="asyncio": "auto" would install uvloop's policy for the whole test process
    config = uvicorn.Config(built.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            loop="asyncio", ws="websockets-sansio", ws_max_size=api.api_max_ws_message_bytes)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test API server did not start")
        time.sleep(0.02)
    tokens = TokenStore(store)
    made = {
        "admin": tokens.create(role="admin", scopes=[], subject="root", created_by="test")[0],
        "auditor": tokens.create(role="auditor", scopes=[], subject="audrey", created_by="test")[0],
        "manager": tokens.create(role="manager", scopes=["team-a"], subject="maria", created_by="test")[0],
        "researcher": tokens.create(role="researcher", scopes=["a1"], subject="alice", created_by="test")[0],
        "other": tokens.create(role="researcher", scopes=["b1"], subject="bob", created_by="test")[0],
    }
    _SERVING.setdefault(id(store), []).append(built)
    try:
        yield Server(f"http://127.0.0.1:{port}/graphql", f"ws://127.0.0.1:{port}/graphql", built, store, made)
    finally:
        _SERVING[id(store)].remove(built)
        server.should_exit = True
        thread.join(timeout=10)
        store.engine.dispose()


def ws_messages(url: str, payload: dict[str, Any], token: str | None, count: int = 1, timeout: float = 10.0,
                origin: str | None = None) -> list[dict[str, Any]]:
    """Open a graphql-transport-ws connection with a real websocket client, subscribe once and return the
    first `count` messages for that subscription (next, error or complete)."""
    import json

    from websockets.sync.client import connect

    headers = {"Origin": origin} if origin else None
    out: list[dict[str, Any]] = []
    with connect(url, subprotocols=["graphql-transport-ws"], additional_headers=headers,  # type: ignore[list-item]
                 open_timeout=timeout, max_queue=None, close_timeout=2) as ws:
        init: dict[str, Any] = {"type": "connection_init"}
        if token:
            init["payload"] = {"Authorization": f"Bearer {token}"}
        ws.send(json.dumps(init))
        ack = json.loads(ws.recv(timeout=timeout))
        if ack["type"] != "connection_ack":
            return [ack]
        ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        while len(out) < count:
            msg = json.loads(ws.recv(timeout=timeout))
            if msg.get("type") == "ping":
                ws.send(json.dumps({"type": "pong"}))
                continue
            out.append(msg)
            if msg["type"] in ("error", "complete"):
                break
        else:
            ws.send(json.dumps({"id": "1", "type": "complete"}))
    return out
