"""What the Kubernetes executor reads back from Steward (issue 26; ADR 0054): the namespace mappings admins
recorded (`namespaceMappings`) and where each waiting job stands (`queue`: its position and the scheduler's
reason), in one GraphQL request to the API with the executor's own read-only (auditor) token, every
`STEWARD_K8S_STEWARD_READ_S` seconds. The API, not the store: the executor holds no database credential (it
runs in the cluster it governs, beside the users' pods), and the API already answers both questions from its
read model, for every client alike.

`standing_of` is pure (the API's JSON in, a `Standing` out); `StewardApi` is the HTTP call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

QUERY = """query($e: String!, $n: Int!) {
  namespaceMappings(executor: $e) { namespace project }
  queue(first: $n) { waiting entries { position job { id } reason text } }
}"""


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
class Standing:
    """One read: namespace -> project, and the waiting jobs (by id) among the queue's first entries."""

    mappings: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, Waiting] = field(default_factory=dict)


def standing_of(data: Mapping[str, Any]) -> Standing:
    """The `Standing` in the API's answer to `QUERY` (entries without a visible job are skipped)."""
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
    return Standing(mappings, waiting)


class StewardApi:
    """The API at `url`, with the bearer token in `token_file` (read again at every call, so a rotated
    Secret takes effect without a restart)."""

    def __init__(self, url: str, token_file: str, executor_id: str, first: int = 500, timeout: float = 10.0) -> None:
        self.url = url
        self.token_file = Path(token_file)
        self.executor_id = executor_id
        self.first = first
        self.client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def read(self) -> Standing:
        try:
            token = self.token_file.read_text().strip()
            resp = self.client.post(self.url, json={"query": QUERY, "variables": {"e": self.executor_id,
                                                                                  "n": self.first}},
                                    headers={"Authorization": f"Bearer {token}"})
            body = resp.json()
        except (OSError, httpx.HTTPError, ValueError) as err:
            raise StewardUnreachable(f"{self.url}: {err.__class__.__name__}: {err}") from None
        if resp.status_code != 200 or body.get("errors") or not isinstance(body.get("data"), dict):
            errors = "; ".join(str(e.get("message")) for e in body.get("errors") or [])
            raise StewardUnreachable(f"{self.url}: HTTP {resp.status_code} {errors}".strip())
        return standing_of(body["data"])
