"""The ingest bench's batch observer: a batch's latencies are in before the batch is counted, because the
bench thread clears the latencies as soon as the count says the backlog is drained."""

from __future__ import annotations

import time

from steward.bench.ingest import batch_observer
from steward.store.eventstore import RecordedEvent


def record(position: int, sent_at: float | None) -> RecordedEvent:
    meta = {} if sent_at is None else {"sent_at": sent_at}
    return RecordedEvent(position, f"s{position}", 1, "X", 1, {}, meta, f"m{position}", 0.0, "", "")


class CountWatch(list[tuple[float, int]]):
    """`commits` that checks, when a batch is counted, that its latencies are already there."""

    def __init__(self, latencies: list[float], expected: list[int]) -> None:
        super().__init__()
        self.latencies, self.expected = latencies, expected

    def append(self, item: tuple[float, int]) -> None:
        assert len(self.latencies) == self.expected[len(self)], "a batch was counted before its latencies"
        super().append(item)


def test_a_batch_is_counted_after_its_latencies_are_in() -> None:
    latencies: list[float] = []
    commits = CountWatch(latencies, expected=[2, 2])
    on_batch = batch_observer(commits, latencies)
    sent = time.time() - 1.5
    on_batch([record(1, sent), record(2, None), record(3, sent)])
    on_batch([record(4, None)])
    assert [n for _, n in commits] == [3, 1]
    assert len(latencies) == 2 and all(1400 < ms < 60_000 for ms in latencies)
