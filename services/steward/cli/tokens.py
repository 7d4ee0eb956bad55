"""Operator commands for API tokens: `steward token create|revoke|list`.

`create` goes through the API when an admin token is at hand (STEWARD_TOKEN or the run folder's token
file), and straight to the store otherwise (or with --direct): that is how the first admin token is
minted. `steward up` mints one into the run folder, which every CLI command then uses by default.
`enroll` records a token minted elsewhere (the Helm chart's for the Kubernetes executor), straight in the store.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

import typer

from steward.api.settings import ApiSettings
from steward.auth.tokens import InvalidTokenRequest, TokenStore, check_request, looks_like_api_token
from steward.cli.client import GraphQLClient, default_token
from steward.cli.output import OutputFormat, OutputOption, emit, fail, read_text
from steward.config import Settings, get_settings
from steward.store.eventstore import EventStore

CREATE = """
mutation($role: String!, $subject: String!, $scopes: [String!], $ttlS: Float) {
  createToken(role: $role, subject: $subject, scopes: $scopes, ttlS: $ttlS) {
    __typename
    ... on TokenCreated { token info { id subject role scopes createdAt expiresAt } }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""

REVOKE = """
mutation($id: String!) {
  revokeToken(id: $id) {
    __typename
    ... on TokenRevoked { id }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""

LIST = "{ tokens { id subject role scopes createdAt createdBy expiresAt revokedAt } }"


def _store(settings: Settings) -> Any:
    return TokenStore(EventStore.from_url(settings.resolved_store_url))


def write_token_file(path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)


def ensure_token(store_url: str, path: Path, role: str, subject: str) -> Path:
    """Keep the token in `path` if the store still knows it; otherwise mint a new one of `role` (no scopes)."""
    store = EventStore.from_url(store_url)
    try:
        tokens = TokenStore(store)
        current = path.read_text().strip() if path.exists() else ""
        if current and tokens.is_valid(current):
            return path
        token, _ = tokens.create(role=role, scopes=[], subject=subject, created_by="steward up")
        write_token_file(path, token)
    finally:
        store.engine.dispose()
    return path


def ensure_admin_token(settings: Settings, store_url: str) -> Path:
    """Keep the run folder's admin token if the store still knows it; otherwise mint a new one."""
    return ensure_token(store_url, ApiSettings(run_dir=settings.run_dir).resolved_token_file, "admin", "operator")


def register(app: typer.Typer) -> None:
    token_app = typer.Typer(no_args_is_help=True, help="API tokens (operators).")
    app.add_typer(token_app, name="token")

    @token_app.command("create")
    def create(
        role: str = typer.Option(..., "--role", help="admin, manager, researcher or auditor"),
        scope: list[str] = typer.Option([], "--scope", help="org-tree node the role applies to (repeatable)"),
        subject: str = typer.Option(None, "--subject", help="who the token is for (default: the role and scope; "
                                                             "yourself when signed in with `steward login`)"),
        ttl: float = typer.Option(None, "--ttl", help="lifetime in seconds (default: until revoked)"),
        direct: bool = typer.Option(False, "--direct", help="write to the store, not through the API"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Create a token; prints it once (`--output json` gives {"token": ...})."""
        who = subject or (f"{role}:{','.join(scope)}" if scope else role)
        try:
            check_request(role, scope)
        except InvalidTokenRequest as err:
            fail(str(err), 2)
        settings = get_settings()
        current = default_token()
        if subject is None and current and not looks_like_api_token(current):
            # a person signed in (steward login): the token is theirs, no wider than they are (ADR 0049)
            who = GraphQLClient(settings).execute("{ me { subject } }")["me"]["subject"]
        if not direct and current:
            res = GraphQLClient(settings).execute(CREATE, {"role": role, "subject": who, "scopes": scope,
                                                           "ttlS": ttl})["createToken"]
            if res["__typename"] != "TokenCreated":
                fail(f"token refused: {res['message']}", 2)
            info = res["info"]
            out = {"token": res["token"], "id": info["id"], "role": info["role"], "scopes": info["scopes"],
                   "subject": info["subject"], "expires_at": info["expiresAt"], "via": "api"}
        else:
            try:
                token, tinfo = _store(settings).create(role=role, scopes=scope, subject=who,
                                                       created_by=f"cli:{getpass.getuser()}", ttl_s=ttl)
            except InvalidTokenRequest as err:
                fail(str(err), 2)
            except Exception as err:
                fail(f"cannot reach the store to mint a token ({err.__class__.__name__}); is the stack up "
                     "(`steward up`), and has the store been migrated (`steward migrate`)?")
            out = {"token": token, "id": tinfo.token_id, "role": tinfo.role, "scopes": list(tinfo.scopes),
                   "subject": tinfo.subject, "expires_at": tinfo.expires_at, "via": "store"}
        emit(out, output, [[out["id"], out["role"], ",".join(out["scopes"]), out["subject"], out["token"]]],
             ["id", "role", "scopes", "subject", "token"])

    @token_app.command("enroll")
    def enroll(
        role: str = typer.Option(..., "--role", help="admin or auditor (a token that takes no scope)"),
        subject: str = typer.Option(..., "--subject", help="who the token is for"),
        token_file: Path = typer.Option(..., "--token-file", help="a file holding the token (stw_<id>_<secret>)"),
        created_by: str = typer.Option("enrolled", "--by", help="who enrolls it (recorded)"),
        replace: bool = typer.Option(False, "--replace",
                                     help="revoke the other live tokens of this subject enrolled --by the same"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Record a token made elsewhere (the Helm chart's, kept in a Secret), straight in the store: idempotent,
        so a hook may run it at every install and upgrade."""
        token = read_text(token_file, "the token file").strip()
        settings = get_settings()
        try:
            info, new = _store(settings).enroll(token, role=role, subject=subject, created_by=created_by,
                                                replace=replace)
        except InvalidTokenRequest as err:
            fail(f"token not enrolled: {err}", 2)
        except Exception as err:
            fail(f"cannot reach the store to enroll a token ({err.__class__.__name__}); has it been migrated "
                 "(`steward migrate`)?")
        out = {"id": info.token_id, "role": info.role, "subject": info.subject, "enrolled": new}
        emit(out, output, [[out["id"], out["role"], out["subject"], "enrolled" if new else "already enrolled"]],
             ["id", "role", "subject", "status"])

    @token_app.command("revoke")
    def revoke(token_id: str = typer.Argument(..., help="the token's id (not the token)"),
               direct: bool = typer.Option(False, "--direct", help="write to the store, not through the API"),
               output: OutputFormat = OutputOption) -> None:
        """Revoke a token by id; it stops working at once through this API, within seconds elsewhere."""
        settings = get_settings()
        if not direct and default_token():
            res = GraphQLClient(settings).execute(REVOKE, {"id": token_id})["revokeToken"]
            if res["__typename"] != "TokenRevoked":
                fail(f"not revoked: {res['message']}", 2)
        elif not _store(settings).revoke(token_id, by=f"cli:{getpass.getuser()}"):
            fail(f"no live token '{token_id}'; list them with `steward token list`", 2)
        emit({"revoked": token_id}, output)

    @token_app.command("list")
    def list_tokens(output: OutputFormat = OutputOption) -> None:
        """Tokens (never their secrets)."""
        rows = GraphQLClient(get_settings()).execute(LIST)["tokens"]
        emit(rows, output, [[t["id"], t["role"], ",".join(t["scopes"]), t["subject"],
                             "revoked" if t["revokedAt"] else "live"] for t in rows],
             ["id", "role", "scopes", "subject", "status"])
