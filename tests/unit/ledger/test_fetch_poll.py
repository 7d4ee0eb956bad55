"""The fetch process's poll through a broker restart (`poll_or_wait`): a retriable Kafka error is waited
out and the loop goes on; any other error still ends the process (the ledger fails loudly)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError

from steward.ledger.intake import fetch
from steward.ledger.intake.fetch import poll_or_wait


class ScriptedConsumer:
    """Answers each `poll` with the next scripted outcome: records, or an error to raise."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[int, int]] = []

    def poll(self, timeout_ms: int, max_records: int) -> dict[str, list[str]]:
        self.calls.append((timeout_ms, max_records))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return dict(outcome)


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "POLL_RETRY_S", 0.0)


@pytest.mark.parametrize("error", [KafkaConnectionError("Connection refused"), KafkaTimeoutError("timed out")],
                         ids=["connection refused", "timeout"])
def test_a_retriable_error_is_an_empty_poll_and_the_next_poll_goes_on(error: Exception,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    consumer = ScriptedConsumer(error, {"t-0": ["r1", "r2"]})
    assert poll_or_wait(consumer, 200, 50) == {}
    assert poll_or_wait(consumer, 200, 50) == {"t-0": ["r1", "r2"]}
    assert consumer.calls == [(200, 50), (200, 50)]
    assert type(error).__name__ in caplog.text and "polling again" in caplog.text


def test_a_non_retriable_error_ends_the_fetch_process() -> None:
    consumer = ScriptedConsumer(UnsupportedVersionError("the broker is too old"))
    with pytest.raises(UnsupportedVersionError, match="too old"):
        poll_or_wait(consumer, 20, 50)
