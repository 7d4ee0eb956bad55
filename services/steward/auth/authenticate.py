"""Bearer token -> Principal: API tokens (`stw_...`) are looked up in the store, anything else must be a
JWT. Positive answers are cached briefly (`cache_s`), so a revocation made elsewhere takes effect within
that time; one made through this process takes effect at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from steward.auth.jwt import JwtVerifier
from steward.auth.oidc import OidcVerifier, issuer_of
from steward.auth.principal import Principal
from steward.auth.tokens import TokenError, TokenStore, looks_like_api_token, parse


class Authenticator:
    def __init__(self, tokens: TokenStore, jwt: JwtVerifier | None, cache_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic, oidc: OidcVerifier | None = None) -> None:
        self.tokens = tokens
        self.jwt = jwt
        self.oidc = oidc
        self.cache_s = cache_s
        self.clock = clock
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def authenticate(self, token: str) -> Principal:
        if not token or len(token) > 8192:
            raise TokenError("invalid token")
        now = self.clock()
        with self._lock:
            hit = self._cache.get(token)
        if hit is not None and now - hit[0] < self.cache_s:
            return hit[1]
        if looks_like_api_token(token):
            principal = self.tokens.authenticate(token)
        elif self.oidc is not None and self._for_oidc(issuer_of(token)):
            principal = self.oidc.verify(token)  # a person signed in through the lab's provider
        elif self.jwt is not None:
            principal = self.jwt.verify(token)
        else:
            raise TokenError("invalid token")
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[token] = (now, principal)
        return principal

    def _for_oidc(self, issuer: str | None) -> bool:
        """A JWT from the provider, or (when no other JWTs are configured) any JWT, so that one from another
        issuer is refused saying which issuer Steward trusts; anything that is no JWT is simply invalid."""
        assert self.oidc is not None
        return issuer == self.oidc.config.issuer or (self.jwt is None and issuer is not None)

    def forget_people(self) -> None:
        """Drop cached answers for people signed in through the provider (the group mapping changed)."""
        with self._lock:
            for key in [k for k, (_, p) in self._cache.items() if p.via == "oidc"]:
                del self._cache[key]

    def forget(self, token_id: str) -> None:
        """Drop cached answers for a revoked token id."""
        with self._lock:
            for key in [k for k in self._cache if looks_like_api_token(k) and _id(k) == token_id]:
                del self._cache[key]


def _id(token: str) -> str:
    try:
        return parse(token)[0]
    except TokenError:
        return ""


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
