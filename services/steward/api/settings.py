"""The API's own settings (prefix STEWARD_, the same files as steward.config): mode, protections and
identity. Production mode (the default) turns introspection and the GraphQL IDE off."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from steward.auth.jwt import JwtConfig
from steward.auth.oidc import OidcConfig
from steward.config import _default_run_dir, _settings_files


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STEWARD_", env_file=_settings_files(), extra="ignore")

    run_dir: Path = _default_run_dir()
    api_mode: Literal["production", "development"] = "production"
    # None: follow the mode (on in development, off in production).
    api_introspection: bool | None = None
    api_max_body_bytes: int = 64 * 1024
    api_max_ws_message_bytes: int = 64 * 1024
    api_max_depth: int = 10
    # JSON nesting of a request body (its variables), checked before the body is parsed
    api_max_json_depth: int = 32
    api_max_tokens: int = 2000
    api_max_aliases: int = 30
    api_max_subscriptions_per_connection: int = 20
    api_max_page: int = 500
    # per token (or JWT subject, or client address when unauthenticated), shared by every replica through
    # the store (taken in leases of `api_rate_lease` tokens: steward.api.ratelimits); `api_rate_shared`
    # off: each replica limits on its own
    api_rate_per_s: float = 50.0
    api_rate_burst: float = 100.0
    api_rate_shared: bool = True
    api_rate_lease: float = 10.0
    # Comma-separated origins whose pages may open a websocket (same-origin and no-Origin always may).
    api_allowed_origins: str = ""
    api_auth_cache_s: float = 2.0
    # Denials are audit events; per token (or subject, or client address) and window, the first
    # `api_denial_burst` are recorded one by one, the rest as one summary event (steward.auth.denials).
    api_denial_burst: int = 20
    api_denial_window_s: float = 60.0
    # The read model's feeder catches up with the log this often (steward.api.tail); a request finding it
    # more than 3 polls old catches up itself. Subscriptions wake with it.
    api_feed_poll_s: float = 0.1
    # The budget figures are as of a log position (ADR 0075), computed once per position for every request; while
    # the log moves they are computed at most this often (an answer is then as of a position up to this old, and
    # never older than a mutation this process answered).
    api_figures_every_s: float = Field(default=1.0, ge=0)
    # How many ended jobs (COMPLETED, FAILED, CANCELLED, RESTORED) the read model keeps in memory, the newest
    # ended first; older ones are read from the store's projections on demand (ADR 0070). Every job that has
    # not ended stays. 2,000 covers the jobs list's first pages (`api_max_page` 500) and a day of a busy lab
    # at a few MB (docs/benchmarks.md "Read model retention").
    api_ended_jobs_kept: int = Field(default=2000, ge=0)
    # Threads for the blocking work of requests (store reads, Kafka publishes) and the store connections
    # they may hold (PostgreSQL; pool plus overflow). Threads waiting on the store cost no CPU; too few of
    # them queue every request behind a handful of round trips (bench soak).
    api_threads: int = 32
    api_db_pool: int = 16
    api_db_overflow: int = 16
    # Query results cached per (token, document, store head, 5 s bucket); denials and non-queries never.
    api_result_cache: bool = True
    api_result_cache_size: int = 2048
    # JWT bearer tokens (off unless an issuer and a key are configured)
    jwt_issuer: str = ""
    jwt_audience: str = "steward"
    jwt_hs256_secret: str = ""
    jwt_jwks_file: str = ""
    jwt_jwks_url: str = ""
    jwt_role_claim: str = "steward_role"
    jwt_scopes_claim: str = "steward_scopes"
    # Single sign-on (off unless an issuer is set): ID tokens of the lab's OpenID provider, whose audience is
    # one of Steward's clients; groups map to roles by the recorded group mapping (ADR 0049)
    oidc_issuer: str = ""
    oidc_audiences: str = "steward-web steward-cli"
    oidc_groups_claim: str = "groups"
    oidc_name_claim: str = "name"
    oidc_web_client: str = "steward-web"  # the web UI's client id at the provider (public, PKCE)
    # The CLI's token when STEWARD_TOKEN is not set (written by `steward up`).
    token_file: Path | None = None

    @property
    def introspection(self) -> bool:
        return self.api_introspection if self.api_introspection is not None else self.api_mode == "development"

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        return tuple(o.strip() for o in self.api_allowed_origins.split(",") if o.strip())

    @property
    def resolved_token_file(self) -> Path:
        return self.token_file or self.run_dir / "token"

    def jwt_config(self) -> JwtConfig:
        return JwtConfig(audience=self.jwt_audience, issuer=self.jwt_issuer, hs256_secret=self.jwt_hs256_secret,
                         jwks_file=self.jwt_jwks_file, jwks_url=self.jwt_jwks_url, role_claim=self.jwt_role_claim,
                         scopes_claim=self.jwt_scopes_claim)

    def oidc_config(self) -> OidcConfig:
        return OidcConfig(issuer=self.oidc_issuer, audiences=tuple(self.oidc_audiences.replace(",", " ").split()),
                          groups_claim=self.oidc_groups_claim, name_claim=self.oidc_name_claim)


@lru_cache(maxsize=1)
def get_api_settings() -> ApiSettings:
    return ApiSettings()
