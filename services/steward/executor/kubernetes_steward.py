"""What the Kubernetes executor reads back from Steward (issue 26; ADR 0054): the namespace mappings admins
recorded (`namespaceMappings`) and where each waiting job stands (`queue`: its position and the scheduler's
reason), in one GraphQL request to the API with the executor's own read-only (auditor) token, every
`STEWARD_K8S_STEWARD_READ_S` seconds. The API, not the store: the executor holds no database credential (it
runs in the cluster it governs, beside the users' pods), and the API already answers both questions from its
read model, for every client alike.

The same request reads the submissions of this executor that the ledger rejected (ADR 0056): the
`CommandRejected` events of its jobs' streams (`auditEvents`, after the cursor of the last read), so that a pod
whose job was refused (an unmapped namespace, an unknown project, more GPUs than the cluster has) says so
instead of "queued".

And each registered node's cluster (`nodes`), so that an executor without a cluster setting registers a node
again in the cluster the ledger records for it, an operator's choice included (ADR 0085).

`standing_of` is pure (the API's JSON in, a `Standing` out); `StewardApi` is the HTTP call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

QUERY = """query($e: String!, $n: Int!, $r: Int!, $after: String, $jobs: String!) {
  namespaceMappings(executor: $e) { namespace project }
  nodes { id cluster }
  queue(first: $n) { waiting entries { position job { id } reason text } }
  rejected: auditEvents(first: $r, after: $after, filter: {streamPrefix: $jobs, types: ["CommandRejected"]}) {
    edges { node { streamId payload metadata } } pageInfo { endCursor }
  }
}"""
JOB_STREAM = "job-"  # the stream of a job's events: job-<job id> (steward.domain.commands)


class StewardUnreachable(Exception):
    """The API did not answer the executor's read (one line saying why)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """Where a waiting job stands: its place in the queue (1 first) of `of`, the reason code and plain words."""

    position: int
    of: int
    reason: str
    text: str


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why the ledger rejected a job this executor submitted: the rule's stable code and its words."""

    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Standing:
    """One read: namespace -> project, the waiting jobs (by id) among the queue's first entries, and the
    submissions of this executor rejected since the last read (by job id), with the cursor to read on from."""

    mappings: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, Waiting] = field(default_factory=dict)
    rejected: dict[str, Rejection] = field(default_factory=dict)
    cursor: str | None = None
    clusters: dict[str, str] | None = None  # node -> its recorded cluster (None: the answer had no nodes)


def rejections_of(data: Mapping[str, Any], actor: str) -> tuple[dict[str, Rejection], str | None]:
    """The `SubmitJob`s that `actor` sent and the ledger rejected, by job id, in the answer's `rejected`
    events, and the cursor after them (None: none given)."""
    page = data.get("rejected") or {}
    out = {}
    for edge in page.get("edges") or []:
        node = edge.get("node") or {}
        payload, meta = node.get("payload") or {}, node.get("metadata") or {}
        stream = str(node.get("streamId") or "")
        if payload.get("command") != "SubmitJob" or meta.get("actor") != actor or not stream.startswith(JOB_STREAM):
            continue
        out[stream[len(JOB_STREAM):]] = Rejection(str(payload.get("code") or ""), str(payload.get("reason") or ""))
    cursor = (page.get("pageInfo") or {}).get("endCursor")
    return out, str(cursor) if cursor else None


def standing_of(data: Mapping[str, Any], actor: str = "") -> Standing:
    """The `Standing` in the API's answer to `QUERY` (entries without a visible job are skipped); `actor`: the
    executor's, whose rejected submissions it reads."""
    mappings = {str(m["namespace"]): str(m["project"]) for m in data.get("namespaceMappings") or []
                if m.get("project")}
    queue = data.get("queue") or {}
    total = int(queue.get("waiting") or 0)
    waiting = {}
    for entry in queue.get("entries") or []:
        job = entry.get("job") or {}
        if job.get("id"):
            waiting[str(job["id"])] = Waiting(int(entry["position"]), total, str(entry.get("reason") or ""),
                                              str(entry.get("text") or ""))
    rejected, cursor = rejections_of(data, actor)
    nodes = data.get("nodes")
    clusters = None if nodes is None else {str(n["id"]): str(n.get("cluster") or "") for n in nodes if n.get("id")}
    return Standing(mappings, waiting, rejected, cursor, clusters)


def ask(client: httpx.Client, url: str, token_file: Path, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
    """One GraphQL request to the API with the bearer token in `token_file` (read at every call, so a rotated Secret
    takes effect without a restart): the answer's `data`, or `StewardUnreachable` saying why not."""
    try:
        token = token_file.read_text().strip()
        resp = client.post(url, json={"query": query, "variables": dict(variables)},
                           headers={"Authorization": f"Bearer {token}"})
        body = resp.json()
    except (OSError, httpx.HTTPError, ValueError) as err:
        raise StewardUnreachable(f"{url}: {err.__class__.__name__}: {err}") from None
    if resp.status_code != 200 or body.get("errors") or not isinstance(body.get("data"), dict):
        errors = "; ".join(str(e.get("message")) for e in body.get("errors") or [])
        raise StewardUnreachable(f"{url}: HTTP {resp.status_code} {errors}".strip())
    data: dict[str, Any] = body["data"]
    return data


class StewardApi:
    """The executor's one connection to Steward's API: the API at `url`, with the bearer token in `token_file` (read
    again at every call, so a rotated Secret takes effect without a restart), as `executor_id`, over one HTTP client
    (httpx's client is safe to share between threads). `read` is the standing (ADR 0054); the placements feed
    (`kubernetes_binds.PlacementFeed`, ADR 0088) asks its own query through `ask`."""

    def __init__(self, url: str, token_file: str, executor_id: str, first: int = 500, timeout: float = 10.0,
                 rejections: int = 200) -> None:
        self.url = url
        self.token_file = Path(token_file)
        self.executor_id = executor_id
        self.first = first
        self.rejections = rejections
        self.after: str | None = None  # the cursor of the rejections read so far (from the log's start at first)
        self.client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def ask(self, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """One GraphQL request (`ask`): the answer's `data`, or `StewardUnreachable` saying why not."""
        return ask(self.client, self.url, self.token_file, query, variables)

    def read(self) -> Standing:
        variables = {"e": self.executor_id, "n": self.first, "r": self.rejections, "after": self.after,
                     "jobs": f"{JOB_STREAM}{self.executor_id}."}
        data = self.ask(QUERY, variables)
        standing = standing_of(data, f"executor:{self.executor_id}")
        self.after = standing.cursor or self.after
        return standing
