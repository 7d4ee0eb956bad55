"""The cyclic garbage collector while the ledger runs: what each decided batch leaves alive is frozen
(ADR 0027).

The ledger decides about 2,000 messages a batch and keeps a few objects per event alive (the job records
of the state, the batch being written). With the collector's usual generations, every one of them is
walked again by the next generation-0 pass (~2 ms per 1,000 events on the deciding thread, docs/benchmarks.md
ingest round 7) and by the older passes after it. The ledger's batch cycle (decide, record, commit) leaves
no cyclic garbage (tests/integration/test_ledger_garbage.py), so nothing it leaves needs the collector:
after each batch is decided, `gc.freeze()` moves every tracked object out of the generations (a constant-time
list splice that also restarts the generation-0 count), and the passes during the next batch walk only
that batch's new objects, if any pass runs at all.

What other threads of the process leave (kafka-python's and SQLAlchemy's bookkeeping has cycles) is frozen
too, and freed by a full collection (unfreeze, collect every generation, freeze), run by the rule CPython
uses for its oldest generation: once the objects frozen since the last one reach a quarter of the heap it
left (`GROWTH`), and at most once every `every_s` seconds. A full collection walks the whole heap (~0.1 s at
the 135,000 tracked objects of a 40,000-event state; more than linear above); by that rule each object is
walked a bounded number of times, and the garbage waiting is at most a quarter of the heap.
"""

from __future__ import annotations

import gc

FULL_COLLECTION_EVERY_S = 60.0  # at most one full collection this often
GROWTH = 0.25  # ... and only once the objects frozen since the last one reach this share of the heap it left


class BatchCollector:
    """Freezes what each decided batch leaves alive; collects fully once the heap grew by `growth` and
    `every_s` seconds (of the clock the caller passes, e.g. `time.monotonic()`) have passed."""

    def __init__(self, now: float, every_s: float = FULL_COLLECTION_EVERY_S, growth: float = GROWTH) -> None:
        self.every_s = every_s
        self.growth = growth
        self.last_full = now
        self.heap = gc.get_freeze_count()  # walks the frozen list: here and after full collections only
        # objects the batches left since the last full collection: the generation-0 count before each freeze
        # (a pass inside a batch, rare at the ledger's thresholds, restarts that count: an estimate from below)
        self.young = 0
        self.full_collections = 0

    def batch_decided(self, now: float) -> None:
        """Called after each batch is decided (before it is handed to the writer)."""
        self.young += gc.get_count()[0]
        if now - self.last_full >= self.every_s and self.young >= self.growth * self.heap:
            self.collect_fully(now)
        gc.freeze()

    def collect_fully(self, now: float) -> int:
        """Hand every frozen object back to the collector and collect every generation, then freeze what is
        left; returns the number of unreachable objects found (the cyclic garbage frozen since the last full
        collection)."""
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self.heap = gc.get_freeze_count()
        self.young = 0
        self.last_full = now
        self.full_collections += 1
        return found
