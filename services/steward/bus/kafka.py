"""Thin kafka-python wrappers: an idempotent producer and consumers with auto-commit off, each
authenticated as this process's component (SASL SCRAM-SHA-512, ADR 0036)."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaConnectionError, KafkaTimeoutError
from prometheus_client import Counter, Gauge

from steward.bus.envelope import Envelope
from steward.bus.identity import command_topic, principal
from steward.bus.waiting import bootstrap_delay, try_timeout_s
from steward.config import Settings
from steward.metrics import not_ready_when

log = logging.getLogger(__name__)
T = TypeVar("T")

# One try to reach the broker lasts at most `try_timeout_s` (kafka-python retries the connection inside it, at
# most RECONNECT_BACKOFF_MAX_MS apart); between tries the client waits `bootstrap_delay` (ADR 0064)
# kafka-python's default (30 s) let a client that lost the broker for a while try again only 30 s later
RECONNECT_BACKOFF_MAX_MS = 1000
# what a client's start raises while the broker does not answer (a refused connection, no metadata yet)
_AWAY = (KafkaTimeoutError, KafkaConnectionError)

WAITING = Gauge("steward_kafka_waiting", "Kafka clients of this process waiting for the broker at their start "
                "(not ready while above 0).")
WAITS = Counter("steward_kafka_start_waits_total", "Waits of this process's Kafka clients for the broker at "
                "their start (one per failed try).")
_waiting_lock = threading.Lock()
_waiting: dict[int, str] = {}  # a wait's number -> what waits (a producer, a consumer ...)
_wait_numbers = itertools.count()
_starting = [0]  # clients of this process in their start now (their tries included)

SASL_MECHANISM = "SCRAM-SHA-512"
# kafka-python warns "Exchanging credentials in the clear" on every SCRAM handshake over SASL_PLAINTEXT; SCRAM
# sends a salted proof, never the password, so the warning (one per connection) is noise in every log
logging.getLogger("kafka.net.sasl.scram").setLevel(logging.ERROR)


class KafkaUnavailable(RuntimeError):
    """The broker did not answer a client's start within STEWARD_KAFKA_WAIT_S, or (`BackgroundPublisher`) a
    command could not be handed to it now. `sent`: whether the command may still reach the broker (it left
    this process, unacknowledged) or surely did not."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


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


def waiting_for_kafka() -> list[str]:
    """The clients of this process that wait for the broker at their start now (readiness: ready when none)."""
    with _waiting_lock:
        return sorted(_waiting.values())


class _QuietWhileWaiting(logging.Filter):
    """While a client of this process starts and waits for the broker (`connected` says so once per try),
    kafka-python's own lines about that (four per refused connection: "Bootstrap ... not ready", "Connection
    failed: ... ECONNREFUSED", ...) are dropped; they are kept at any other time."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _starting[0]:
            return True
        text = record.getMessage()
        return not ("ootstrap" in text or "ECONNREFUSED" in text or "Connection refused" in text)


for _name in ("kafka.net.manager", "kafka.net.connection", "kafka.conn", "kafka.client_async"):
    logging.getLogger(_name).addFilter(_QuietWhileWaiting())

not_ready_when(lambda: [f"waiting for Kafka at its start ({what})" for what in waiting_for_kafka()])


def connected(build: Callable[[int], T], settings: Settings, what: str, *,
              sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """`build(timeout_ms)` (a kafka-python client's start, which reaches the broker within `timeout_ms`: 5 s,
    then 5 s more each try up to 30 s, `steward.bus.waiting.try_timeout_s`), tried again while the broker does
    not answer: waits of 0.5 s doubling to 2 s (`steward.bus.waiting`), one warning line per wait naming the
    bootstrap address, counted in `steward_kafka_waiting` and `steward_kafka_start_waits_total`, until
    `settings.kafka_wait_s` (STEWARD_KAFKA_WAIT_S) have passed: then `KafkaUnavailable`. Any other error (a
    refused password, a bad option) is raised at once."""
    started, failures, key = clock(), 0, next(_wait_numbers)
    with _waiting_lock:
        _starting[0] += 1
    try:
        while True:
            try:
                client = build(int(try_timeout_s(failures) * 1000))
            except _AWAY as err:
                failures += 1
                waited = clock() - started
                delay = bootstrap_delay(failures, waited, settings.kafka_wait_s)
                if delay is None:
                    raise KafkaUnavailable(
                        f"Kafka at {settings.kafka_bootstrap} did not answer the {what} for {waited:.0f} s "
                        f"(STEWARD_KAFKA_WAIT_S={settings.kafka_wait_s:g}; last: {err}); "
                        "is the broker running? infra/kafka.sh status") from None
                if failures == 1:
                    with _waiting_lock:
                        _waiting[key] = what
                    WAITING.inc()
                WAITS.inc()
                log.warning("waiting for Kafka at %s (the %s; %s): next try in %.1f s, %.0f s waited of %g s",
                            settings.kafka_bootstrap, what, type(err).__name__, delay, waited, settings.kafka_wait_s)
                sleep(delay)
                continue
            if failures:
                log.info("Kafka at %s reached by the %s after %.1f s", settings.kafka_bootstrap, what,
                         clock() - started)
            return client
    finally:
        with _waiting_lock:
            _starting[0] -= 1
            if _waiting.pop(key, None) is not None:
                WAITING.dec()


def _start_options(settings: Settings) -> dict[str, Any]:
    return {**client_options(settings), "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS}


def _producer_options(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """An idempotent producer's options: every record acknowledged by all replicas, retried without end."""
    options: dict[str, Any] = {
        **_start_options(settings),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": 2,
        "retries": 2**31 - 1,
        "max_in_flight_requests_per_connection": 5,
        "client_id": "steward",
    }
    options.update(overrides)
    return options


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    """An idempotent producer; its start waits for the broker (`connected`)."""
    options = _producer_options(settings, **overrides)
    return connected(lambda ms: KafkaProducer(**{"bootstrap_timeout_ms": ms, **options}), settings,
                     f"producer {options['client_id']}")


def make_consumer(settings: Settings, group: str | None, **overrides: Any) -> KafkaConsumer:
    """A consumer with auto-commit off; its start waits for the broker (`connected`)."""
    options: dict[str, Any] = {
        **_start_options(settings),
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": 500,
        "client_id": f"steward-{group or 'reader'}",
    }
    options.update(overrides)
    return connected(lambda ms: KafkaConsumer(**{"bootstrap_timeout_ms": ms, **options}), settings,
                     f"consumer {options['client_id']}")


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

    def publish_many(self, envelopes: Sequence[Envelope], *, timeout: float = 10.0) -> None:
        """Send all, then wait for every acknowledgement (one round trip's wait for a batch, not one each); the
        first failure is raised, as `publish` raises it."""
        futures = [self.producer.send(self.topic, key=e.key.encode(), value=e.encode()) for e in envelopes]
        for future in futures:
            future.get(timeout=timeout)

    def status(self) -> dict[str, Any]:
        """This producer reached the broker when it was built (`make_producer` waits for it): `connected`;
        `BackgroundPublisher.status` tells more."""
        return {"bootstrap": self.settings.kafka_bootstrap, "state": "connected"}

    def flush(self, timeout: float | None = 10.0) -> None:
        self.producer.flush(timeout=timeout)

    def close(self) -> None:
        self.producer.close(timeout=5)


class BackgroundPublisher(CommandPublisher):
    """A `CommandPublisher` whose producer starts in a thread of its own, trying the broker until it answers
    (the waits of `steward.bus.waiting`, without a limit), so that a process that also serves without Kafka
    (the API's reads) starts and serves at once. Until the producer is up, and whenever the broker does not
    acknowledge a command in time, `publish` raises `KafkaUnavailable` naming the broker: the caller answers
    "unavailable, retry" (the API: 503). A command sent while the first try still runs waits for it (a broker
    that is up answers it), so a process just started does not refuse what it could send. Not counted as
    "waiting at its start" for readiness: the process serves meanwhile."""

    def __init__(self, settings: Settings, build: Callable[[int], KafkaProducer] | None = None,
                 sleep: Callable[[float], bool] | None = None) -> None:
        self.settings = settings
        self.topic = command_topic(settings.topic_prefix, settings.component, settings.executor_id)
        self._build = build or _producer_builder(settings)
        self._producer: KafkaProducer | None = None
        self._since = time.monotonic()
        self._last = "not tried yet"
        self._unacknowledged_since: float | None = None  # the first send since the last acknowledged one that failed
        self._closed = threading.Event()
        self._tried = threading.Event()  # the first try ended (reached or not)
        self._sleep = sleep or self._closed.wait
        self._thread = threading.Thread(target=self._start, name="kafka-producer-start", daemon=True)
        self._thread.start()

    @property
    def producer(self) -> KafkaProducer:
        producer = self._producer
        if producer is None and not self._tried.is_set():  # just started: a broker that is up answers the first try
            self._tried.wait(try_timeout_s(0))
            producer = self._producer
        if producer is None:
            raise KafkaUnavailable(
                f"Kafka at {self.settings.kafka_bootstrap} is unavailable (not reached since this process started "
                f"{time.monotonic() - self._since:.0f} s ago; last try: {self._last}): the command was not sent; "
                f"retry in {KAFKA_RETRY_AFTER_S} s")
        return producer

    @producer.setter
    def producer(self, value: KafkaProducer) -> None:
        self._producer = value

    @property
    def connected(self) -> bool:
        return self._producer is not None

    def status(self) -> dict[str, Any]:
        """What `/healthz` says of Kafka (issue 22), from what this process saw, with no round trip of its own:
        `starting` before the producer's first try ended; `unavailable` while the producer has not reached the
        broker (`seconds`: since this process started); `not_acknowledging` when the last command sent was not
        acknowledged in time (`seconds`: since the first such send; the next acknowledged command clears it, so
        with no traffic it stays until someone sends); `connected` otherwise. `error`: the last failure in words."""
        now = time.monotonic()
        out: dict[str, Any] = {"bootstrap": self.settings.kafka_bootstrap}
        failing = self._unacknowledged_since
        if self._producer is None:
            out.update(state="unavailable" if self._tried.is_set() else "starting",
                       seconds=round(now - self._since, 1), error=self._last)
        elif failing is not None:
            out.update(state="not_acknowledging", seconds=round(now - failing, 1), error=self._last)
        else:
            out["state"] = "connected"
        return out

    def _start(self) -> None:
        failures = 0
        while not self._closed.is_set():
            try:
                self._producer = self._build(int(try_timeout_s(failures) * 1000))
            except _AWAY as err:
                self._tried.set()
                failures += 1
                self._last = f"{type(err).__name__}: {err}"
                delay = bootstrap_delay(failures, time.monotonic() - self._since, float("inf")) or 0.0
                log.warning("Kafka at %s unavailable to the command producer (%s): mutations are refused until it "
                            "answers; next try in %.1f s", self.settings.kafka_bootstrap, type(err).__name__, delay)
                self._sleep(delay)
                continue
            except Exception:  # a refused password, a bad option: not an outage; loud, and no producer
                log.exception("the command producer cannot start")
                self._last = "the producer could not start (see the log)"
                self._tried.set()
                return
            self._tried.set()
            if failures:
                log.info("Kafka at %s reached by the command producer after %.1f s", self.settings.kafka_bootstrap,
                         time.monotonic() - self._since)
            return

    def publish(self, envelope: Envelope, *, wait: bool = True, timeout: float = 10.0) -> None:
        self.publish_many([envelope], timeout=timeout, wait=wait)

    def publish_many(self, envelopes: Sequence[Envelope], *, timeout: float = 10.0, wait: bool = True) -> None:
        producer = self.producer
        try:
            futures = [producer.send(self.topic, key=e.key.encode(), value=e.encode()) for e in envelopes]
            for future in futures if wait else ():
                future.get(timeout=timeout)
        except _AWAY as err:
            if self._unacknowledged_since is None:
                self._unacknowledged_since = time.monotonic()
            self._last = f"a command was not acknowledged within {timeout:.0f} s ({type(err).__name__})"
            ids = ", ".join(e.id for e in envelopes)
            raise KafkaUnavailable(
                f"Kafka at {self.settings.kafka_bootstrap} did not acknowledge the command within {timeout:.0f} s "
                f"({type(err).__name__}): it may still be recorded once Kafka is back (message {ids}); "
                "look before you retry", sent=True) from err
        if wait:
            self._unacknowledged_since = None

    def flush(self, timeout: float | None = 10.0) -> None:
        if self._producer is not None:
            self._producer.flush(timeout=timeout)

    def close(self) -> None:
        self._closed.set()
        if self._producer is not None:
            self._producer.close(timeout=5)


KAFKA_RETRY_AFTER_S = 2  # what the API tells a client to wait while Kafka is away


def _producer_builder(settings: Settings) -> Callable[[int], KafkaProducer]:
    options = _producer_options(settings)
    return lambda ms: KafkaProducer(**{"bootstrap_timeout_ms": ms, **options})

