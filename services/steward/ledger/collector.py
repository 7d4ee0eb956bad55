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
too, and freed only by the full collection `every_s` seconds (unfreeze, collect every generation, freeze):
that bounds what waits for it to what the process makes in that time.
"""

from __future__ import annotations

import gc

# A full collection (the whole heap walked once) at most this often: ~60 ms per million tracked objects.
FULL_COLLECTION_EVERY_S = 60.0


class BatchCollector:
    """Freezes what each decided batch leaves alive; collects fully every `every_s` seconds (of the clock
    the caller passes, e.g. `time.monotonic()`)."""

    def __init__(self, now: float, every_s: float = FULL_COLLECTION_EVERY_S) -> None:
        self.every_s = every_s
        self.last_full = now
        self.full_collections = 0

    def batch_decided(self, now: float) -> None:
        """Called after each batch is decided (before it is handed to the writer)."""
        if now - self.last_full >= self.every_s:
            self.collect_fully(now)
        gc.freeze()

    def collect_fully(self, now: float) -> int:
        """Hand every frozen object back to the collector and collect every generation; returns the
        number of unreachable objects found (the cyclic garbage frozen since the last full collection)."""
        gc.unfreeze()
        found = gc.collect()
        self.last_full = now
        self.full_collections += 1
        return found
