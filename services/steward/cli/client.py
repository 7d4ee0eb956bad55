"""A small GraphQL client over HTTP for the CLI: the bearer token comes from STEWARD_TOKEN, else the
token file in the run folder (written by `steward up`)."""

from __future__ import annotations

import os
from typing import Any

import httpx

from steward.api.settings import ApiSettings
from steward.cli.output import fail, read_text
from steward.config import Settings


def default_token() -> str | None:
    token = os.environ.get("STEWARD_TOKEN", "").strip()
    if token:
        return token
    path = ApiSettings().resolved_token_file
    if not path.is_file():
        return None
    return read_text(path, "the token file").strip() or None


def _refusal(resp: httpx.Response) -> str:
    try:
        return str(resp.json()["errors"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


class GraphQLClient:
    def __init__(self, settings: Settings, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = settings.resolved_api_url
        self.token = token if token is not None else default_token()
        self.headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.timeout = timeout

    def execute(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = httpx.post(self.url, json={"query": query, "variables": variables or {}},
                              headers=self.headers, timeout=self.timeout)
        except httpx.HTTPError as err:
            fail(f"cannot reach the API at {self.url} ({err.__class__.__name__}); start it with `make up`")
        if resp.status_code == 401:
            where = "STEWARD_TOKEN" if os.environ.get("STEWARD_TOKEN") else "the run folder's token file"
            why = _refusal(resp)
            if why.startswith("not authenticated: ") and "Bearer" not in why:  # a sign-in token, and why not
                fail(f"the API did not accept the token from {where}: {why.removeprefix('not authenticated: ')}")
            fail(f"the API did not accept the token from {where}; set STEWARD_TOKEN to a valid token "
                 "(an admin creates one with `steward token create --role ROLE --scope NODE`, "
                 "or sign in with `steward login`)")
        if resp.status_code == 429:
            fail(f"rate limited by the API; retry in {resp.headers.get('Retry-After', '1')} s")
        if resp.status_code == 413:
            fail("the request is larger than the API accepts; send less at once")
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
