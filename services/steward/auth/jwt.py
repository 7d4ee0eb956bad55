"""JWT bearer tokens: HS256 with a shared secret (a single machine) or RS256 with keys from a JWKS file
or URL (an OIDC provider). The algorithm list is hard-coded; the token's header only selects among the
algorithms that are configured, so `none`, and HS256 signed with an RSA public key, never verify.
Audience, issuer, expiry and subject are required."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steward.auth.principal import ROLES, Principal, Role
from steward.auth.tokens import TokenError

ALGORITHMS: tuple[str, ...] = ("HS256", "RS256")
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]
MIN_HS256_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class JwtConfig:
    audience: str
    issuer: str
    hs256_secret: str = ""
    jwks_file: str = ""
    jwks_url: str = ""
    role_claim: str = "steward_role"
    scopes_claim: str = "steward_scopes"
    leeway_s: float = 30.0

    @property
    def enabled(self) -> bool:
        return bool(self.issuer and (self.hs256_secret or self.jwks_file or self.jwks_url))


class JwtVerifier:
    def __init__(self, config: JwtConfig) -> None:
        if config.hs256_secret and len(config.hs256_secret.encode()) < MIN_HS256_SECRET_BYTES:
            raise ValueError(f"the HS256 secret must be at least {MIN_HS256_SECRET_BYTES} bytes")
        import jwt as pyjwt  # PyJWT, needed only when JWTs are configured

        self.config = config
        self._jwks: Any = None
        self._jwks_client: Any = None
        if config.jwks_file:
            self._jwks = pyjwt.PyJWKSet.from_json(Path(config.jwks_file).read_text())
        elif config.jwks_url:
            self._jwks_client = pyjwt.PyJWKClient(config.jwks_url, cache_keys=True, lifespan=300, timeout=5)

    def _enabled_algorithms(self) -> set[str]:
        algs = set()
        if self.config.hs256_secret:
            algs.add("HS256")
        if self._jwks is not None or self._jwks_client is not None:
            algs.add("RS256")
        return algs & set(ALGORITHMS)

    def _key(self, alg: str, token: str, kid: str | None) -> Any:
        if alg == "HS256":
            return self.config.hs256_secret
        if self._jwks is not None:
            keys = [k for k in self._jwks.keys if kid is None or k.key_id == kid]
            if len(keys) != 1:
                raise TokenError("no single JWKS key matches the token")
            return keys[0].key
        assert self._jwks_client is not None
        return self._jwks_client.get_signing_key_from_jwt(token).key

    def verify(self, token: str) -> Principal:
        import jwt as pyjwt

        cfg = self.config
        try:
            header = pyjwt.get_unverified_header(token)
            alg = header.get("alg")
            if alg not in self._enabled_algorithms():
                raise TokenError("algorithm not accepted")
            claims = pyjwt.decode(
                token, self._key(alg, token, header.get("kid")), algorithms=[alg], audience=cfg.audience,
                issuer=cfg.issuer, leeway=cfg.leeway_s, options={"require": REQUIRED_CLAIMS},
            )
        except (pyjwt.PyJWTError, pyjwt.PyJWKClientError, ValueError, KeyError) as err:
            raise TokenError("invalid JWT") from err
        role = claims.get(cfg.role_claim)
        if role not in ROLES:
            raise TokenError("JWT carries no known role")
        raw_scopes = claims.get(cfg.scopes_claim) or []
        scopes = raw_scopes.split() if isinstance(raw_scopes, str) else [str(s) for s in raw_scopes]
        r = Role(role)
        if r in (Role.manager, Role.researcher) and not scopes:
            raise TokenError("JWT for a scoped role carries no scope")
        return Principal(str(claims["sub"]), r, tuple(scopes) if r not in (Role.admin, Role.auditor) else (),
                         None, "jwt")
