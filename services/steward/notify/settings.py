"""Mail and webhook settings (prefix STEWARD_NOTIFY_, e.g. STEWARD_NOTIFY_SMTP_HOST=mail.lab.example);
docs/operator-guide.md "Notifications" lists them."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class NotifySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STEWARD_NOTIFY_", extra="ignore")

    enabled: bool = True  # the worker runs the notifier (it only reads the log: the ledger never waits on it)
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 25
    smtp_user: str = ""
    smtp_password: str = ""
    smtp_starttls: bool = False  # STARTTLS after connecting (port 587)
    smtp_ssl: bool = False  # TLS from the start (port 465)
    mail_from: str = "steward@localhost"
    smtp_timeout_s: float = 10.0
    webhook_timeout_s: float = 10.0
    webhook_secret: str = ""  # when set, each POST carries X-Steward-Signature: sha256=HMAC(secret, body)
    # retries of one delivery (a Temporal activity's retry policy): then it is recorded as failed
    max_attempts: int = 8
    first_retry_s: float = 2.0
    backoff: float = 2.0
    max_retry_s: float = 300.0
    poll_s: float = 1.0  # how often the notifier looks for new events
    batch: int = 500  # events read at once
