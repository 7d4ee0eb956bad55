"""Single sign-on: ID tokens from the lab's OpenID provider (issue 24, ADR 0049).

The provider is found by discovery (`<issuer>/.well-known/openid-configuration`, whose `issuer` must be the
configured one) and its signing keys by the `jwks_uri` it names (fetched again when a token names a key id
not seen yet). A token is accepted when its signature verifies with an asymmetric algorithm (RS256, PS256,
ES256: never `none` or a shared secret), its issuer is the configured issuer, its audience is one of
Steward's clients, and it has not expired; it then names the person (`sub`, display name) and their groups.
Which role and scopes those groups give is the group mapping an admin recorded (steward.domain.identity);
no mapped group, no access.

Each refusal says what was wrong in one line (the issuer, the audience, the expiry, the signature), since
none of them is a secret, so a person or an operator can tell a misconfiguration from a stale sign-in.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from steward.auth.principal import Principal, Role
from steward.auth.tokens import TokenError
from steward.domain.identity import GroupRule, resolve

ALGORITHMS: tuple[str, ...] = ("RS256", "PS256", "ES256")
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]

Fetch = Callable[[str], dict[str, Any]]
Rules = Callable[[], Sequence[GroupRule]]


class SignInRefused(TokenError):
    """A sign-in token Steward does not accept; the message (one line) says why and may be shown."""


@dataclass(frozen=True, slots=True)
class OidcConfig:
    issuer: str
    audiences: tuple[str, ...] = ("steward-web", "steward-cli")
    groups_claim: str = "groups"
    name_claim: str = "name"
    leeway_s: float = 30.0
    timeout_s: float = 5.0

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)


@dataclass(frozen=True, slots=True)
class Identity:
    """A person as the provider vouches for them."""

    subject: str
    name: str
    groups: tuple[str, ...]
    expires_at: float


def http_json(timeout_s: float) -> Fetch:
    def fetch(url: str) -> dict[str, Any]:
        import httpx  # lazy: only an API with single sign-on configured talks to a provider

        try:
            answer = httpx.get(url, timeout=timeout_s, follow_redirects=False)
            answer.raise_for_status()
            data = answer.json()
        except (httpx.HTTPError, json.JSONDecodeError) as err:
            raise SignInRefused(f"the OpenID provider does not answer at {url}: {err}") from None
        if not isinstance(data, dict):
            raise SignInRefused(f"the OpenID provider's answer at {url} is not a JSON object")
        return data
    return fetch


def issuer_of(token: str) -> str | None:
    """The `iss` a JWT claims, unverified (to choose which verifier checks it); None when not a JWT."""
    import jwt as pyjwt

    try:
        iss = pyjwt.decode(token, options={"verify_signature": False}).get("iss")
    except pyjwt.PyJWTError:
        return None
    return iss if isinstance(iss, str) else None


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class OidcVerifier:
    def __init__(self, config: OidcConfig, rules: Rules, fetch: Fetch | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.rules = rules
        self.fetch = fetch or http_json(config.timeout_s)
        self.clock = clock
        self._keys: dict[str, Any] = {}  # kid -> key
        self._jwks_uri = ""
        self._lock = threading.Lock()

    def discover(self) -> dict[str, Any]:
        url = self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
        meta = self.fetch(url)
        if meta.get("issuer") != self.config.issuer:
            raise SignInRefused(f"the OpenID provider at {url} names issuer {meta.get('issuer')!r}, "
                                f"not the configured {self.config.issuer!r} (STEWARD_OIDC_ISSUER)")
        if not isinstance(meta.get("jwks_uri"), str):
            raise SignInRefused(f"the OpenID provider at {url} names no jwks_uri")
        return meta

    def _load_keys(self) -> None:
        import jwt as pyjwt

        if not self._jwks_uri:
            self._jwks_uri = self.discover()["jwks_uri"]
        try:
            keyset = pyjwt.PyJWKSet.from_dict(self.fetch(self._jwks_uri))
        except pyjwt.PyJWTError as err:
            raise SignInRefused(f"the OpenID provider's keys at {self._jwks_uri} do not read: {err}") from None
        self._keys = {k.key_id or "": k.key for k in keyset.keys}

    def _key(self, kid: str) -> Any:
        with self._lock:
            if kid not in self._keys:
                self._load_keys()  # first use, or the provider rotated its keys
            key = self._keys.get(kid)
        if key is None:
            raise SignInRefused(f"the sign-in token is signed with key {kid!r}, which {self.config.issuer} "
                                "does not publish")
        return key

    def identity(self, token: str) -> Identity:
        """The person a token names, when it verifies; `SignInRefused` saying why otherwise."""
        import jwt as pyjwt

        cfg = self.config
        try:
            header = pyjwt.get_unverified_header(token)
        except pyjwt.PyJWTError:
            raise SignInRefused("the token is neither a Steward API token nor a signed JWT") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise SignInRefused(f"the sign-in token is signed with {alg!r}; Steward accepts {', '.join(ALGORITHMS)}")
        try:
            unverified = pyjwt.decode(token, options={"verify_signature": False})
        except pyjwt.PyJWTError:
            raise SignInRefused("the sign-in token's claims do not read") from None
        iss = unverified.get("iss")
        if iss != cfg.issuer:
            raise SignInRefused(f"the sign-in token was issued by {iss!r}; Steward trusts {cfg.issuer!r}")
        key = self._key(str(header.get("kid") or ""))
        try:
            # expiry and issue time are checked below against this verifier's clock (one clock for both)
            claims = pyjwt.decode(token, key, algorithms=[alg], audience=list(cfg.audiences), issuer=cfg.issuer,
                                  leeway=cfg.leeway_s, options={"require": REQUIRED_CLAIMS, "verify_exp": False,
                                                                "verify_iat": False})
        except pyjwt.InvalidAudienceError:
            raise SignInRefused(f"the sign-in token is for audience {unverified.get('aud')!r}, not one of "
                                f"Steward's clients ({', '.join(cfg.audiences)}; STEWARD_OIDC_AUDIENCES)") from None
        except pyjwt.MissingRequiredClaimError as err:
            raise SignInRefused(f"the sign-in token has no '{err.claim}' claim") from None
        except pyjwt.ImmatureSignatureError:
            raise SignInRefused("the sign-in token is not valid yet (is this machine's clock right?)") from None
        except pyjwt.InvalidSignatureError:
            raise SignInRefused(f"the sign-in token's signature does not verify with {cfg.issuer}'s keys") from None
        except pyjwt.PyJWTError as err:
            raise SignInRefused(f"the sign-in token does not verify: {err}") from None
        now = self.clock()
        exp, iat = claims["exp"], claims["iat"]
        if not isinstance(exp, int | float) or not isinstance(iat, int | float):
            raise SignInRefused("the sign-in token's 'exp' and 'iat' are not times")
        if exp <= now - cfg.leeway_s:
            raise SignInRefused(f"the sign-in token expired at {_utc(float(exp))}; sign in again (steward login)")
        if iat > now + cfg.leeway_s:
            raise SignInRefused("the sign-in token is not valid yet (is this machine's clock right?)")
        raw_groups = claims.get(cfg.groups_claim) or []
        groups = (raw_groups.split() if isinstance(raw_groups, str)
                  else [str(g) for g in raw_groups] if isinstance(raw_groups, list) else [])
        name = claims.get(cfg.name_claim) or claims.get("preferred_username") or claims.get("email") or claims["sub"]
        return Identity(str(claims["sub"]), str(name)[:200], tuple(groups), float(claims["exp"]))

    def verify(self, token: str) -> Principal:
        person = self.identity(token)
        found = resolve(self.rules(), person.groups)
        if found is None:
            shown = ", ".join(person.groups) if person.groups else "none"
            raise SignInRefused(f"{person.name} ({person.subject}) is signed in, but their groups ({shown}) map to "
                                "no Steward role; an admin maps groups with `steward identity map`")
        role, scopes = found
        return Principal(person.subject, Role(role), scopes, None, "oidc", person.name)
