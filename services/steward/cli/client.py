"""A small GraphQL client over HTTP for the CLI."""

from __future__ import annotations

from typing import Any

import httpx

from steward.cli.output import fail
from steward.config import Settings


class GraphQLClient:
    def __init__(self, settings: Settings, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = settings.resolved_api_url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout

    def execute(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = httpx.post(self.url, json={"query": query, "variables": variables or {}},
                              headers=self.headers, timeout=self.timeout)
        except httpx.HTTPError as err:
            fail(f"cannot reach the API at {self.url} ({err.__class__.__name__}); start it with `make up`")
        if resp.status_code >= 500:
            fail(f"the API at {self.url} failed with HTTP {resp.status_code}; see .run/logs/api.log")
        try:
            body = resp.json()
        except ValueError:
            fail(f"the API at {self.url} answered HTTP {resp.status_code} with a body that is not JSON")
        if body.get("errors"):
            messages = "; ".join(e.get("message", "?") for e in body["errors"])
            fail(f"the API refused the request: {messages}")
        data: dict[str, Any] = body["data"]
        return data
