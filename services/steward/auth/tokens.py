"""API tokens for the CLI and scripts: random, shown once, stored only as a SHA-256 digest, scoped to
org-tree nodes, expiring and revocable.

A token reads `stw_<id>_<secret>`: the id finds the row, the secret (256 random bits) is compared in
constant time with the stored digest. A fast digest is right here: the secret is random, not a password.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from steward.auth.principal import ROLES, Principal, Role
from steward.auth.tables import api_tokens
from steward.store.eventstore import EventStore

PREFIX = "stw"


class TokenError(Exception):
    """A token that does not authenticate; the message never says which part was wrong."""


class InvalidTokenRequest(ValueError):
    """A token cannot be created as asked (unknown role, scope missing or not allowed)."""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    token_id: str
    subject: str
    role: str
    scopes: tuple[str, ...]
    created_at: float
    created_by: str
    expires_at: float | None
    revoked_at: float | None

    @staticmethod
    def of(row: Any) -> TokenInfo:
        return TokenInfo(row.token_id, row.subject, row.role, tuple(row.scopes or ()), row.created_at,
                         row.created_by, row.expires_at, row.revoked_at)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.token_id, "subject": self.subject, "role": self.role, "scopes": list(self.scopes),
                "created_at": self.created_at, "created_by": self.created_by, "expires_at": self.expires_at,
                "revoked_at": self.revoked_at}


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse(token: str) -> tuple[str, str]:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        raise TokenError("not an API token")
    return parts[1], parts[2]


def looks_like_api_token(token: str) -> bool:
    return token.startswith(PREFIX + "_")


def check_request(role: str, scopes: Sequence[str]) -> Role:
    """Managers and researchers need at least one scope; admins and auditors see everything."""
    if role not in ROLES:
        raise InvalidTokenRequest(f"unknown role '{role}'; one of {', '.join(ROLES)}")
    r = Role(role)
    if r in (Role.manager, Role.researcher) and not scopes:
        raise InvalidTokenRequest(f"a {role} token needs --scope NODE (the org-tree node it applies to)")
    if r in (Role.admin, Role.auditor) and scopes:
        raise InvalidTokenRequest(f"an {role} token sees everything; it takes no scope")
    return r


def principal_of(row: Any, token_id: str, secret: str, now: float | None = None) -> Principal:
    """The principal of a token's stored row and presented secret, or TokenError."""
    # Compare even when the row is missing, so timing says nothing about which ids exist.
    expected = row.secret_sha256 if row is not None else "0" * 64
    if not hmac.compare_digest(expected, digest(secret)) or row is None:
        raise TokenError("invalid token")
    now = time.time() if now is None else now
    if row.revoked_at is not None:
        raise TokenError("token revoked")
    if row.expires_at is not None and row.expires_at <= now:
        raise TokenError("token expired")
    return Principal(row.subject, Role(row.role), tuple(row.scopes or ()), token_id, "api-token")


class TokenStore:
    """API tokens in the store's `api_tokens` table."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def create(self, *, role: str, scopes: Sequence[str], subject: str, created_by: str,
               ttl_s: float | None = None, now: float | None = None) -> tuple[str, TokenInfo]:
        """Mint a token; returns the token (shown once) and what is stored about it."""
        r = check_request(role, scopes)
        now = time.time() if now is None else now
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        row = {"token_id": token_id, "secret_sha256": digest(secret), "subject": subject, "role": r.value,
               "scopes": list(scopes), "created_at": now, "created_by": created_by,
               "expires_at": now + ttl_s if ttl_s else None, "revoked_at": None, "revoked_by": None}
        with self.store.engine.begin() as conn:
            conn.execute(api_tokens.insert(), [row])
        expires_at = now + ttl_s if ttl_s else None
        info = TokenInfo(token_id, subject, r.value, tuple(scopes), now, created_by, expires_at, None)
        return f"{PREFIX}_{token_id}_{secret}", info

    def enroll(self, token: str, *, role: str, subject: str, created_by: str, replace: bool = False,
               now: float | None = None) -> tuple[TokenInfo, bool]:
        """Record a token whose value was made elsewhere (the Helm chart mints the Kubernetes executor's and
        keeps it in a Secret: docs/operator-guide.md "Steward on Kubernetes"), with `role` and no scope.
        Idempotent: a token already recorded so is left as it is (False: nothing new). A token id recorded
        with another secret, role or subject, or revoked, is refused (`InvalidTokenRequest`). `replace`: the
        other live tokens of `subject` that `created_by` enrolled are revoked (the Secret was rotated)."""
        r = check_request(role, [])
        try:
            token_id, secret = parse(token)
        except TokenError:
            raise InvalidTokenRequest("not an API token (stw_<id>_<secret>)") from None
        if len(secret) < 32:
            raise InvalidTokenRequest("the token's secret is too short (32 characters at least)")
        now = time.time() if now is None else now
        row = self.row(token_id)
        new = row is None
        if row is not None:
            same = hmac.compare_digest(row.secret_sha256, digest(secret)) and row.role == r.value \
                and row.subject == subject and not row.scopes
            if not same:
                raise InvalidTokenRequest(f"token id {token_id} is recorded for another token; mint a new one")
            if row.revoked_at is not None:
                raise InvalidTokenRequest(f"token {token_id} was revoked; mint a new one")
        with self.store.engine.begin() as conn:
            if new:
                conn.execute(api_tokens.insert(), [{
                    "token_id": token_id, "secret_sha256": digest(secret), "subject": subject, "role": r.value,
                    "scopes": [], "created_at": now, "created_by": created_by, "expires_at": None,
                    "revoked_at": None, "revoked_by": None}])
            if replace:
                conn.execute(update(api_tokens).where(
                    api_tokens.c.subject == subject, api_tokens.c.created_by == created_by,
                    api_tokens.c.token_id != token_id, api_tokens.c.revoked_at.is_(None),
                ).values(revoked_at=now, revoked_by=f"{created_by} (replaced by {token_id})"))
        info = self.get(token_id)
        assert info is not None
        return info, new

    def authenticate(self, token: str, now: float | None = None) -> Principal:
        token_id, secret = parse(token)
        return principal_of(self.row(token_id), token_id, secret, now)

    def row(self, token_id: str) -> Any:
        """The stored row of a token id (None: none)."""
        with self.store.engine.connect() as conn:
            row = conn.execute(select(api_tokens).where(api_tokens.c.token_id == token_id)).first()
            conn.rollback()
        return row

    def revoke(self, token_id: str, by: str, now: float | None = None) -> bool:
        """Revoke by id; False when there is no such live token."""
        now = time.time() if now is None else now
        with self.store.engine.begin() as conn:
            res = conn.execute(
                update(api_tokens)
                .where(api_tokens.c.token_id == token_id, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=now, revoked_by=by)
            )
        return bool(res.rowcount)

    def get(self, token_id: str) -> TokenInfo | None:
        with self.store.engine.connect() as conn:
            row = conn.execute(select(api_tokens).where(api_tokens.c.token_id == token_id)).first()
            conn.rollback()
        return TokenInfo.of(row) if row else None

    def list(self) -> list[TokenInfo]:
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(api_tokens).order_by(api_tokens.c.created_at)).all()
            conn.rollback()
        return [TokenInfo.of(r) for r in rows]

    def is_valid(self, token: str) -> bool:
        try:
            self.authenticate(token)
        except TokenError:
            return False
        return True
