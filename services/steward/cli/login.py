"""`steward login`: sign in as a person at the lab's OpenID provider with the device flow (RFC 8628): the
CLI prints a link and a code, the person opens it in any browser and signs in, the CLI receives the ID
token and stores it where the CLI's token lives (`STEWARD_TOKEN_FILE`, else the run folder's `token`,
mode 0600). `steward identity show|map` read and set the group mapping (admins)."""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
import typer

from steward.api.settings import ApiSettings
from steward.cli.client import GraphQLClient
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.cli.tokens import write_token_file
from steward.config import get_settings

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"

SHOW = """{ groupMapping { issuer position recordedAt setBy setByName reason rules { group role scopes } } }"""

MAP = """
mutation($rules: [GroupRuleInput!]!, $reason: String!) {
  setGroupMapping(rules: $rules, reason: $reason) {
    __typename
    ... on GroupMappingChanged { position rules }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


def _json(r: httpx.Response, what: str) -> dict[str, Any]:
    try:
        data = r.json()
    except ValueError:
        fail(f"the OpenID provider's {what} answered HTTP {r.status_code} with a body that is not JSON")
    if not isinstance(data, dict):
        fail(f"the OpenID provider's {what} answered something other than a JSON object")
    return data


def device_login(issuer: str, client_id: str, scope: str, timeout_s: float) -> dict[str, Any]:
    """The token response once the person approved the device code (prints the link to stderr)."""
    try:
        meta = _json(httpx.get(f"{issuer.rstrip('/')}/.well-known/openid-configuration", timeout=10), "discovery")
    except httpx.HTTPError as err:
        fail(f"cannot reach the OpenID provider at {issuer} ({err.__class__.__name__}); is STEWARD_OIDC_ISSUER right?")
    endpoint = meta.get("device_authorization_endpoint")
    if not isinstance(endpoint, str):
        fail(f"the OpenID provider at {issuer} offers no device flow; sign in through the web UI and paste the token")
    try:
        start = _json(httpx.post(endpoint, data={"client_id": client_id, "scope": scope}, timeout=10),
                      "device authorization")
        if "device_code" not in start:
            fail(f"the OpenID provider refused the sign-in: {start.get('error_description') or start.get('error')}")
        link = start.get("verification_uri_complete") or start.get("verification_uri")
        sys.stderr.write(f"To sign in, open {link}\nand confirm the code {start['user_code']}.\n")
        sys.stderr.flush()
        interval = float(start.get("interval", 5))
        deadline = time.monotonic() + min(timeout_s, float(start.get("expires_in", timeout_s)))
        while time.monotonic() < deadline:
            time.sleep(interval)
            answer = _json(httpx.post(meta["token_endpoint"], data={
                "grant_type": DEVICE_GRANT, "device_code": start["device_code"], "client_id": client_id},
                timeout=10), "token endpoint")
            error = answer.get("error")
            if error is None:
                return answer
            if error == "slow_down":
                interval += 5
            elif error != "authorization_pending":
                fail(f"sign-in refused by the provider: {answer.get('error_description') or error}")
    except httpx.HTTPError as err:
        fail(f"lost the OpenID provider at {issuer} during sign-in ({err.__class__.__name__})")
    fail(f"nobody confirmed the code within {timeout_s:.0f} s; run `steward login` again")


def register(app: typer.Typer) -> None:
    identity_app = typer.Typer(no_args_is_help=True, help="People: the group mapping (admins).")
    app.add_typer(identity_app, name="identity")

    @app.command("login")
    def login(
        issuer: str = typer.Option("", "--issuer", help="the OpenID provider (default: STEWARD_OIDC_ISSUER)"),
        client_id: str = typer.Option("steward-cli", "--client-id", help="Steward's CLI client at the provider"),
        wait: float = typer.Option(300.0, "--wait", help="seconds to wait for the person to confirm"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Sign in as yourself (device flow): the ID token is stored where the CLI's token lives."""
        settings = ApiSettings()
        issuer = issuer or settings.oidc_issuer
        if not issuer:
            fail("no OpenID provider: pass --issuer or set STEWARD_OIDC_ISSUER", 2)
        answer = device_login(issuer, client_id, "openid profile email groups", wait)
        token = answer.get("id_token")
        if not isinstance(token, str):
            fail("the provider answered without an ID token (is the 'openid' scope allowed for this client?)")
        path = settings.resolved_token_file
        write_token_file(path, token)
        me = GraphQLClient(get_settings(), token=token).execute("{ me { subject name role scopes } }")["me"]
        out = {**me, "token_file": str(path), "expires_in": answer.get("expires_in")}
        emit(out, output, [[me["name"], me["subject"], me["role"], ",".join(me["scopes"]), str(path)]],
             ["signed in as", "subject", "role", "scopes", "token file"])

    @identity_app.command("show")
    def show(output: OutputFormat = OutputOption) -> None:
        """The group mapping in force: which role and scopes each group of the provider gives."""
        m = GraphQLClient(get_settings()).execute(SHOW)["groupMapping"]
        emit(m, output, [[r["group"], r["role"], ",".join(r["scopes"])] for r in m["rules"]],
             ["group", "role", "scopes"])

    @identity_app.command("map")
    def map_groups(
        rules: list[str] = typer.Argument(..., help="GROUP=ROLE[:SCOPE,SCOPE...], one per group and role; the "
                                                     "whole mapping (what is not named is unmapped)"),
        reason: str = typer.Option(..., "--reason", help="why (recorded)"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Set the group mapping (admins), e.g. `steward identity map steward-admins=admin
        physics-researchers=researcher:physics --reason "lab groups"`."""
        parsed = []
        for rule in rules:
            group, eq, rest = rule.partition("=")
            role, _, scopes = rest.partition(":")
            if not eq or not group or not role:
                fail(f"'{rule}' is not GROUP=ROLE[:SCOPE,SCOPE...]", 2)
            parsed.append({"group": group, "role": role, "scopes": [s for s in scopes.split(",") if s]})
        res = GraphQLClient(get_settings()).execute(MAP, {"rules": parsed, "reason": reason})["setGroupMapping"]
        if res["__typename"] != "GroupMappingChanged":
            fail(f"group mapping refused: {res.get('reason') or res.get('message')}", 2)
        emit(res, output, [[res["rules"], res["position"]]], ["rules", "position"])
