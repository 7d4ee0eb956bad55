"""A Kafka client's start waits for the broker (ADR 0064): the delays between tries (`steward.bus.waiting`,
pure, table-driven) and the loop around a client's start (`steward.bus.kafka.connected`), driven here with a
start that fails as kafka-python's does while the broker is away, a fake clock and a recorded sleep. The real
broker stopped and started under a waiting ledger is tests/integration/test_kafka_start_wait.py."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, SaslAuthenticationFailedError

from steward.bus.kafka import WAITING, KafkaUnavailable, connected, waiting_for_kafka
from steward.bus.waiting import bootstrap_delay, try_timeout_s
from steward.config import Settings


@pytest.mark.parametrize(("failures", "waited_s", "limit_s", "delay"), [
    (1, 0.0, 600.0, 0.5),  # the first wait is short: a broker restarting is often back within a second
    (2, 5.5, 600.0, 1.0),
    (3, 11.5, 600.0, 2.0),
    (4, 18.0, 600.0, 2.0),  # never longer than 2 s: a broker that is back is reached soon
    (40, 300.0, 600.0, 2.0),
    (10_000, 300.0, 600.0, 2.0),  # no overflow however long the wait
    (5, 599.0, 600.0, 1.0),  # the last wait ends at the limit, not after it
    (5, 600.0, 600.0, None),  # the limit reached: give up
    (5, 700.0, 600.0, None),
    (1, 0.0, 0.0, None),  # no wait at all allowed (STEWARD_KAFKA_WAIT_S=0): the first failure is final
])
def test_delays(failures: int, waited_s: float, limit_s: float, delay: float | None) -> None:
    assert bootstrap_delay(failures, waited_s, limit_s) == delay


def test_failures_count_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        bootstrap_delay(0, 0.0, 10.0)


@pytest.mark.parametrize(("failures", "seconds"), [
    (0, 5.0),  # a refused connection fails fast inside a try; this bounds a broker that answers slowly
    (1, 10.0),
    (4, 25.0),
    (5, 30.0),  # never less than kafka-python's own 30 s once the broker has been slow that often
    (500, 30.0),
])
def test_tries_grow_to_kafka_pythons_default(failures: int, seconds: float) -> None:
    assert try_timeout_s(failures) == seconds


def test_tries_count_from_zero() -> None:
    with pytest.raises(ValueError, match="from 0"):
        try_timeout_s(-1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def settings(tmp_path: Path, wait_s: float = 600.0) -> Settings:
    return Settings(run_dir=tmp_path, kafka_bootstrap="127.0.0.1:19312", kafka_wait_s=wait_s)


def test_a_start_while_the_broker_is_away_waits_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    tries: list[list[str]] = []
    timeouts: list[int] = []

    def start(timeout_ms: int) -> str:
        tries.append(waiting_for_kafka())
        timeouts.append(timeout_ms)
        clock.now += 5.0  # a try against a refused port lasts its bootstrap timeout
        if len(tries) <= 3:
            raise KafkaTimeoutError("Unable to bootstrap from [('127.0.0.1', 19312)]")
        return "client"

    caplog.set_level(logging.INFO, "steward.bus.kafka")
    assert connected(start, settings(tmp_path), "producer steward", sleep=clock.sleep, clock=clock) == "client"
    assert clock.slept == [0.5, 1.0, 2.0]
    assert timeouts == [5000, 10000, 15000, 20000]
    assert tries == [[], ["producer steward"], ["producer steward"], ["producer steward"]]  # not ready meanwhile
    assert waiting_for_kafka() == [] and WAITING._value.get() == 0  # ready again
    waits = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(waits) == 3 and all("waiting for Kafka at 127.0.0.1:19312 (the producer steward" in w for w in waits)
    assert "reached by the producer steward" in caplog.records[-1].getMessage()


def test_a_refused_connection_is_waited_for_too(tmp_path: Path) -> None:
    clock = Clock()
    outcomes: list[Exception | str] = [KafkaConnectionError("Connection refused"), "consumer"]

    def start(_timeout_ms: int) -> str:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    assert connected(start, settings(tmp_path), "consumer x", sleep=clock.sleep, clock=clock) == "consumer"


def test_gives_up_after_the_limit_with_an_error_naming_the_broker(tmp_path: Path) -> None:
    clock = Clock()

    def start(_timeout_ms: int) -> str:
        clock.now += 5.0
        raise KafkaTimeoutError("Unable to bootstrap from [('127.0.0.1', 19312)]")

    with pytest.raises(KafkaUnavailable, match=r"Kafka at 127.0.0.1:19312 did not answer the producer p for 30 s "
                                               r"\(STEWARD_KAFKA_WAIT_S=30;.*infra/kafka.sh status"):
        connected(start, settings(tmp_path, wait_s=30.0), "producer p", sleep=clock.sleep, clock=clock)
    assert clock.slept == [0.5, 1.0, 2.0, 2.0]  # tries of 5 s each: the one that ended past 30 s was the last
    assert waiting_for_kafka() == [] and WAITING._value.get() == 0


def test_other_errors_are_not_waited_for(tmp_path: Path) -> None:
    clock = Clock()

    def start(_timeout_ms: int) -> str:
        raise SaslAuthenticationFailedError("wrong password")

    with pytest.raises(SaslAuthenticationFailedError):
        connected(start, settings(tmp_path), "producer p", sleep=clock.sleep, clock=clock)
    assert clock.slept == []


class _Future:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def get(self, timeout: float) -> None:
        if self.error is not None:
            raise self.error


class _Producer:
    """Answers each send with the next of `outcomes` (None: acknowledged)."""

    def __init__(self, outcomes: list[Exception | None]) -> None:
        self.outcomes = outcomes

    def send(self, topic: str, key: bytes, value: bytes) -> _Future:
        return _Future(self.outcomes.pop(0))

    def close(self, timeout: float) -> None:
        pass


def test_the_background_producer_says_what_health_should_report(tmp_path: Path) -> None:
    """`/healthz`'s `commands` (issue 22): unavailable until the broker is reached, connected after, not
    acknowledging from a send that timed out until the next acknowledged one."""
    from steward.bus.envelope import command_envelope
    from steward.bus.kafka import BackgroundPublisher
    from steward.domain.commands import DrainNode

    tries: list[int] = []
    release = threading.Event()
    producer = _Producer([KafkaTimeoutError("no ack"), KafkaTimeoutError("no ack"), None])

    def build(timeout_ms: int) -> _Producer:
        tries.append(timeout_ms)
        if len(tries) == 1:
            raise KafkaTimeoutError("Unable to bootstrap from [('127.0.0.1', 19312)]")
        return producer

    def sleep(seconds: float) -> bool:
        release.wait(10)
        return False

    publisher = BackgroundPublisher(settings(tmp_path), build=build, sleep=sleep)  # type: ignore[arg-type]
    try:
        deadline = time.monotonic() + 10
        while publisher.status()["state"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        down = publisher.status()
        assert down["state"] == "unavailable" and down["bootstrap"] == "127.0.0.1:19312", down
        assert "KafkaTimeoutError" in down["error"] and down["seconds"] >= 0, down
        release.set()
        while not publisher.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert publisher.status() == {"bootstrap": "127.0.0.1:19312", "state": "connected"}
        envelope = command_envelope(DrainNode(node_id="n1", reason="test"), actor="a", role="admin")
        for _ in range(2):
            with pytest.raises(KafkaUnavailable) as refused:
                publisher.publish(envelope, timeout=0.1)
            assert refused.value.sent
            lagging = publisher.status()
            assert lagging["state"] == "not_acknowledging" and "not acknowledged" in lagging["error"], lagging
        publisher.publish(envelope, timeout=0.1)
        assert publisher.status()["state"] == "connected"
    finally:
        release.set()
        publisher.close()
