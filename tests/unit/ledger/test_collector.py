"""The ledger's collector policy (ADR 0027): what a decided batch leaves alive is frozen, and a full collection,
once the heap grew by a quarter and at most every `every_s` seconds, frees the cyclic garbage frozen since
the one before."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from steward.ledger.memory import BatchCollector
from steward.ledger.service import LEDGER_GC_THRESHOLD


@pytest.fixture(autouse=True)
def collector_state() -> Iterator[None]:
    """Each test starts with nothing frozen, with the ledger service's thresholds (no generation-0 pass
    inside a batch), and hands every frozen object back to the collector."""
    before = gc.get_threshold()
    gc.collect()
    gc.unfreeze()
    gc.set_threshold(*LEDGER_GC_THRESHOLD)
    yield
    gc.set_threshold(*before)
    gc.unfreeze()
    gc.collect()


def test_a_decided_batch_is_frozen_and_the_young_count_restarts() -> None:
    collector = BatchCollector(now=0.0, every_s=60.0)
    kept = [[i] for i in range(1000)]  # what a batch leaves alive: tracked, young
    before = gc.get_freeze_count()
    collector.batch_decided(1.0)
    assert gc.get_freeze_count() >= before + len(kept)
    assert gc.get_count()[0] < 50
    assert collector.full_collections == 0


def test_cyclic_garbage_frozen_with_a_batch_is_freed_by_the_next_full_collection() -> None:
    collector = BatchCollector(now=0.0, every_s=60.0)
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle  # garbage, but a cycle: only the collector frees it
    collector.batch_decided(30.0)  # frozen with the batch
    assert gc.collect() == 0  # out of the collector's sight
    collector.batch_decided(59.9)
    assert collector.full_collections == 0
    gc.disable()  # no automatic pass in between: the full collection is what finds it
    try:
        assert collector.collect_fully(60.0) >= 1
    finally:
        gc.enable()
    assert collector.last_full == 60.0


@pytest.mark.parametrize(("calls", "full"), [
    ([10.0, 59.0], 0),
    ([10.0, 60.0], 1),
    ([60.0, 61.0, 119.0, 120.0], 2),
    ([500.0], 1),
])
def test_a_full_collection_runs_at_most_once_every_interval(calls: list[float], full: int) -> None:
    collector = BatchCollector(now=0.0, every_s=60.0, growth=0.0)
    for now in calls:
        collector.batch_decided(now)
    assert collector.full_collections == full


def test_a_full_collection_waits_for_the_heap_to_grow_by_the_given_share() -> None:
    """The young count is the objects allocated since the last freeze only while no automatic pass runs:
    in a process whose heap is large (the whole test session's), an eighth of it is more than the ledger's
    generation-0 threshold, and a pass would restart the count. The ledger keeps passes rare by its
    thresholds; here automatic passes are off, so the test means the same in any process."""
    heap = [[i] for i in range(20_000)]  # the state the ledger started with, frozen at its start
    gc.freeze()
    gc.disable()
    try:
        collector = BatchCollector(now=0.0, every_s=60.0, growth=0.25)
        assert collector.heap >= len(heap)
        batch = [[i] for i in range(collector.heap // 8)]  # an eighth of the heap: not enough yet
        collector.batch_decided(100.0)
        assert collector.full_collections == 0
        batch += [[i] for i in range(collector.heap // 8 + 100)]  # a quarter: due
        collector.batch_decided(101.0)
        assert collector.full_collections == 1 and collector.young == 0
        assert collector.heap >= len(heap) + len(batch)
        collector.batch_decided(102.0)  # within the interval of the last one
        assert collector.full_collections == 1
    finally:
        gc.enable()
