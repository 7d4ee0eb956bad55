"""The ledger's batch cycle leaves no cyclic garbage (ADR 0027): the ledger service freezes what each decided
batch leaves alive (`steward.ledger.memory`), which is sound only if nothing it leaves is a cycle waiting
for the collector. Run on PostgreSQL with the service's kept connections, pipelined as the service runs it
(batch N+1 decided before batch N is recorded), with every kind of message a batch meets: new jobs,
cancellations, rejections, dead letters, redeliveries."""

from __future__ import annotations

import gc
import multiprocessing
from collections import Counter

from steward.domain.commands import CancelJob, SubmitJob
from steward.ledger.ledger import Ledger, Prepared
from steward.store.eventstore import EventStore
from tests.integration.pg import pg_owner, pg_store, store_test_urls
from tests.unit.ledger.test_ledger_dedup import TREE
from tests.unit.store.builders import msg

__all__ = ["pg_owner", "pg_store"]

Message = tuple[str, bytes | None]


def batch_of(n: int, start: int) -> list[Message]:
    """`n` messages: job submissions, every fourth a cancellation of the job before it, every tenth a
    rejection (a cancellation of a job that does not exist), every 25th not a command, and the batch's
    first message sent again at its end (a redelivery)."""
    out: list[Message] = []
    for i in range(start, start + n):
        if i % 25 == 0:
            out.append(("steward.commands/0@0", b'{"id":"x%d","type":"SubmitJob"}' % i))
        elif i % 10 == 0:
            out.append(msg(CancelJob(f"missing-{i}", "test"), f"m{i}"))
        elif i % 4 == 0:
            out.append(msg(CancelJob(f"j{i - 1}", "test"), f"m{i}"))
        else:
            out.append(msg(SubmitJob(f"j{i}", "a1", 1, 600.0, ["python", "train.py", f"--seed={i}"]), f"m{i}"))
    out.append(out[1])
    return out


def run_pipelined(ledger: Ledger, batches: int, size: int, start: int) -> int:
    """Decide each batch before the one before it is recorded, as `run_ledger` does; returns the next start."""
    in_flight: Prepared | None = None
    for b in range(batches):
        prepared = ledger.prepare(batch_of(size, start), {("commands", 0): start + size})
        start += size
        if in_flight is not None:
            ledger.record(in_flight, lambda dead: None)
            ledger.committed(in_flight)
        in_flight = prepared
        assert b == 0 or prepared.dead, "every batch has its dead letters"
    if in_flight is not None:
        ledger.record(in_flight, lambda dead: None)
        ledger.committed(in_flight)
    return start


def measure(url: str) -> tuple[int, int, list[tuple[str, int]]]:
    """Run the ledger on `url` and count what the collector finds in cycles after 6 pipelined batches: (the
    ledger's head, objects found, the commonest kinds)."""
    store = EventStore.from_url(url)
    ledger = Ledger(store, clock=lambda: 100.0, keep_connections=True)
    try:
        ledger.process([msg(c) for c in TREE], {("t", 0): 2})
        start = run_pipelined(ledger, 2, 300, 1)  # first-use caches (statements, decoders) filled
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            run_pipelined(ledger, 6, 300, start)
            found = gc.collect()
            kinds: Counter[str] = Counter(type(o).__qualname__ for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        return ledger.head, found, kinds.most_common(12)
    finally:
        ledger.close()
        store.engine.dispose()


def test_the_ledgers_batch_cycle_leaves_no_cyclic_garbage(pg_store: EventStore) -> None:
    """Measured in a fresh interpreter: the collector is process-wide, and in the whole suite threads left by
    other tests (servers, clients) made their own cyclic garbage during the measurement (CI, stop 28: two
    classes and their descriptors, nothing the ledger creates)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        head, found, kinds = pool.apply(measure, (store_test_urls()[0],))
    assert head > 6 * 250
    assert found == 0, f"{found} objects in cycles after 6 batches: {kinds}"
