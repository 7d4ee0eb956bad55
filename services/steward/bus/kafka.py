"""Thin kafka-python wrappers: an idempotent producer and consumers with auto-commit off, each
authenticated as this process's component (SASL SCRAM-SHA-512, ADR 0036)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from steward.bus.envelope import Envelope
from steward.bus.identity import command_topic, principal
from steward.config import Settings

log = logging.getLogger(__name__)

SASL_MECHANISM = "SCRAM-SHA-512"
# kafka-python warns "Exchanging credentials in the clear" on every SCRAM handshake over SASL_PLAINTEXT; SCRAM
# sends a salted proof, never the password, so the warning (one per connection) is noise in every log
logging.getLogger("kafka.net.sasl.scram").setLevel(logging.ERROR)


class MissingCredentials(RuntimeError):
    """This process has no Kafka password to authenticate with (there is no unauthenticated mode)."""


def settings_principal(settings: Settings) -> str:
    return principal(settings.component, settings.executor_id)


def credentials(settings: Settings, user: str | None = None) -> tuple[str, str]:
    """(user, password) of this process's principal (or `user`), read from the secrets folder that
    `infra/kafka.sh` wrote when it formatted the broker's storage."""
    user = user or settings_principal(settings)
    path = settings.resolved_kafka_secrets_dir / f"{user}.password"
    try:
        password = path.read_text().strip()
    except OSError as err:
        raise MissingCredentials(f"no Kafka password for {user} at {path} ({err.strerror}; the broker's "
                                 f"start writes it: infra/kafka.sh start)") from None
    if not password:
        raise MissingCredentials(f"the Kafka password file {path} is empty")
    return user, password


def ca_file(env: dict[str, str] | None = None) -> Path | None:
    """STEWARD_KAFKA_CA_FILE: the CA that signed the brokers' TLS certificate (`infra/kafka.sh tls-paths`);
    set, clients speak SASL_SSL (the bootstrap address must then be the TLS listener's). A file that is not
    there is an error naming it, never a silent fall back to plain text."""
    raw = (env if env is not None else os.environ).get("STEWARD_KAFKA_CA_FILE", "").strip()
    if not raw:
        return None
    path = Path(raw)
    if not path.is_file():
        raise MissingCredentials(f"STEWARD_KAFKA_CA_FILE names {path}, which is not a file (infra/kafka.sh "
                                 "tls-paths prints the CA's path)")
    return path


def client_options(settings: Settings, user: str | None = None) -> dict[str, Any]:
    """The connection options every kafka-python client of this process uses: the bootstrap address and
    SASL SCRAM-SHA-512 as this process's principal, over the SASL_PLAINTEXT listener, or over the SASL_SSL
    one (the broker's certificate checked against STEWARD_KAFKA_CA_FILE, host name included) when that is
    set (ADR 0039)."""
    name, password = credentials(settings, user)
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": SASL_MECHANISM,
        "sasl_plain_username": name,
        "sasl_plain_password": password,
    }
    ca = ca_file()
    if ca is not None:
        options |= {"security_protocol": "SASL_SSL", "ssl_cafile": str(ca), "ssl_check_hostname": True}
    return options


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    options: dict[str, Any] = {
        **client_options(settings),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": 2,
        "retries": 2**31 - 1,
        "max_in_flight_requests_per_connection": 5,
        "client_id": "steward",
    }
    options.update(overrides)
    return KafkaProducer(**options)


def make_consumer(settings: Settings, group: str | None, **overrides: Any) -> KafkaConsumer:
    options: dict[str, Any] = {
        **client_options(settings),
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": 500,
        "client_id": f"steward-{group or 'reader'}",
    }
    options.update(overrides)
    return KafkaConsumer(**options)


class CommandPublisher:
    """Publishes command envelopes to this component's command topic (the topic vouches for the sender:
    ADR 0036), keyed by aggregate."""

    def __init__(self, settings: Settings, producer: KafkaProducer | None = None) -> None:
        self.settings = settings
        self.topic = command_topic(settings.topic_prefix, settings.component, settings.executor_id)
        self.producer = producer or make_producer(settings)

    def publish(self, envelope: Envelope, *, wait: bool = True, timeout: float = 10.0) -> None:
        future = self.producer.send(self.topic, key=envelope.key.encode(), value=envelope.encode())
        if wait:
            future.get(timeout=timeout)

    def flush(self, timeout: float | None = 10.0) -> None:
        self.producer.flush(timeout=timeout)

    def close(self) -> None:
        self.producer.close(timeout=5)

