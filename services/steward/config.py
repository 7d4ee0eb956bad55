"""Configuration by environment (prefix STEWARD_) and an optional settings file (STEWARD_SETTINGS_FILE,
KEY=VALUE lines). Every server binds to loopback by default."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]


def _default_run_dir() -> Path:
    return Path(os.environ.get("STEWARD_RUN_DIR", REPO_ROOT / ".run"))


def _settings_files() -> tuple[Path, ...]:
    """The stack file written by `steward up` (so every command talks to the stack it started), then an
    explicit STEWARD_SETTINGS_FILE, which wins. Environment variables win over both."""
    files = [_default_run_dir() / "stack.env"]
    if os.environ.get("STEWARD_SETTINGS_FILE"):
        files.append(Path(os.environ["STEWARD_SETTINGS_FILE"]))
    return tuple(files)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STEWARD_", env_file=_settings_files(), extra="ignore"
    )

    run_dir: Path = _default_run_dir()
    # The application's store URL; empty means the embedded SQLite file under the run folder.
    store_url: str = ""
    # The schema owner's URL (migrations); empty means the same as store_url.
    store_owner_url: str = ""
    kafka_bootstrap: str = "127.0.0.1:9092"
    # Which Steward component this process is (steward.bus.identity.COMPONENTS): its Kafka principal and
    # command topic. `steward up` sets it per process; the operator's tools are `admin`.
    component: str = "admin"
    # The folder of the Kafka passwords `infra/kafka.sh` generated (mode 0700, one 0600 file a principal);
    # empty means `<run_dir>/secrets/kafka`.
    kafka_secrets_dir: str = ""
    # How long a Kafka client's start waits for the broker before the process gives up (ADR 0064): long, so
    # that a process started while Kafka restarts waits for it instead of exiting into its supervisor's backoff
    kafka_wait_s: float = 600.0
    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = "default"
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_url: str = ""
    topic_prefix: str = "steward"
    executor_id: str = "local"
    executor_gpus: int = 4
    scheduler_interval_s: float = 0.5
    mutation_timeout_s: float = 15.0
    pg_port: int = 55432

    @property
    def resolved_store_url(self) -> str:
        if self.store_url:
            return self.store_url
        return f"sqlite:///{self.run_dir / 'steward.db'}"

    @property
    def resolved_owner_url(self) -> str:
        return self.store_owner_url or self.resolved_store_url

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}/graphql"

    @property
    def resolved_kafka_secrets_dir(self) -> Path:
        return Path(self.kafka_secrets_dir) if self.kafka_secrets_dir else self.run_dir / "secrets" / "kafka"

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    def postgres_urls(self) -> tuple[str, str]:
        """The app and owner URLs of the PostgreSQL that `infra/postgres.sh` starts."""
        app_pw = os.environ.get("STEWARD_PG_APP_PASSWORD", "steward_app")
        owner_pw = os.environ.get("STEWARD_PG_OWNER_PASSWORD", "steward_owner")
        base = f"127.0.0.1:{self.pg_port}/steward"
        return (
            f"postgresql+psycopg://steward_app:{app_pw}@{base}",
            f"postgresql+psycopg://steward_owner:{owner_pw}@{base}",
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
