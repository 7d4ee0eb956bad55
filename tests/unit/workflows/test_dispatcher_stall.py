"""The dispatcher survives a Kafka restart (chaos, ADR 0061): a commit Kafka cannot take now is left for the next
batch, and a consumer wedged with events waiting is named and ends the worker, for its supervisor to start a new
one (a worker that ran on without its dispatcher stranded every placement behind it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError

from steward_workflows import dispatcher
from steward_workflows.dispatcher import DispatcherStalled, stalled

TP = TopicPartition("steward.events", 0)


@pytest.mark.parametrize(("behind", "idle_s", "expected"), [
    (False, 3600.0, False),  # idle with nothing waiting: a quiet cluster, not a wedge
    (True, 10.0, False),  # events waiting, read a moment ago: catching up
    (True, 59.9, False),
    (True, 60.0, True),  # events waiting and nothing read for the limit: wedged
    (True, 600.0, True),
])
def test_a_consumer_is_stalled_only_when_events_wait_and_nothing_was_read(behind: bool, idle_s: float,
                                                                           expected: bool) -> None:
    assert stalled(behind, progress_at=100.0, now=100.0 + idle_s) is expected


class WedgedConsumer:
    """What the Kafka client did after a broker restart: every poll empty, events waiting past its position,
    and commits that cannot reach the group coordinator."""

    def __init__(self, end: int = 10, position: int = 4) -> None:
        self.end, self.at, self.commits, self.closed = end, position, 0, False

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def assign(self, parts: list[TopicPartition]) -> None:
        self.parts = parts

    def assignment(self) -> set[TopicPartition]:
        return set(self.parts)

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
        return {}

    def end_offsets(self, parts: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return {tp: self.end for tp in parts}

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        return self.at

    def commit(self, offsets: Any = None, timeout_ms: int | None = None) -> None:
        self.commits += 1
        raise KafkaTimeoutError("coordinator not available")

    def close(self) -> None:
        self.closed = True


def test_a_wedged_consumer_ends_the_dispatcher_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = WedgedConsumer()
    clock = iter(range(0, 10_000, 20))  # each poll 20 s later: checked every 15 s, wedged after 60
    monkeypatch.setattr(dispatcher, "make_consumer", lambda settings, group: consumer)
    monkeypatch.setattr(dispatcher.time, "monotonic", lambda: float(next(clock)))
    from steward.config import Settings

    with pytest.raises(DispatcherStalled, match=r"read no event for .* events waited on .*wedged"):
        asyncio.run(dispatcher.dispatch(Settings(), client=None, stop=asyncio.Event()))  # type: ignore[arg-type]
    assert consumer.closed


def test_an_idle_consumer_with_nothing_waiting_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = WedgedConsumer(end=4, position=4)
    stop = asyncio.Event()
    ticks = iter(range(0, 10_000, 20))

    def monotonic() -> float:
        t = next(ticks)
        if t > 1_000:
            stop.set()
        return float(t)

    monkeypatch.setattr(dispatcher, "make_consumer", lambda settings, group: consumer)
    monkeypatch.setattr(dispatcher.time, "monotonic", monotonic)
    from steward.config import Settings

    asyncio.run(dispatcher.dispatch(Settings(), client=None, stop=stop))  # type: ignore[arg-type]
    assert consumer.closed


def test_a_commit_kafka_cannot_take_now_is_left_for_the_next_batch() -> None:
    consumer = WedgedConsumer()
    asyncio.run(dispatcher._commit(consumer))  # no exception: the dispatcher goes on
    assert consumer.commits == 1
