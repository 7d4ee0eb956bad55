"""Lean record reading for the fetch process's kafka-python consumer (ADR 0024).

kafka-python parses every record of a fetch into a `DefaultRecord` (seven fields, each varint read by a
function call, the batch's attributes read through three properties per record), then into a 13-field
`ConsumerRecord` namedtuple with two deserializer calls and a header size; the fetch process then turns
each into the ledger's `(source, value)` pair. That was ~5 us of the process's ~8 us of CPU per record.

`LeanPartitionRecords` replaces kafka-python's per-fetch record iterator (`Fetcher.PartitionRecords`) on one
consumer and yields the ledger's pairs directly. Everything else stays kafka-python's: the connection,
fetch requests and sessions, positions, seeks, the batch headers, the CRC check of every batch (CRC-32C over
the whole batch, which covers every record), control batches and transaction markers. Only the records of
an uncompressed v2 batch (what the brokers here store) are read by our own loop (steward.ledger.intake.recordbatch,
compiled), with kafka-python's structure checks; compressed and legacy batches go through kafka-python's own
record iterator.

The fetcher's bookkeeping that `KafkaConsumer.poll` relies on is kept per record (`next_fetch_offset`, so a
fetch split over two polls resumes exactly) or per batch (`records_read`, `bytes_read`, `leader_epoch`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import kafka
from kafka.consumer.fetcher import Fetcher, IsolationLevel
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch

from steward.ledger.intake.recordbatch import Pair, read_batch

log = logging.getLogger("steward.ledger.records")

# the kafka-python versions whose fetcher internals this module was written against (and tested on)
KNOWN_VERSIONS = ("3.0.",)


def source_prefix(topic: str, partition: int) -> str:
    """The start of a message's `source` ("topic/partition@offset", stored in each event's metadata)."""
    return f"{topic}/{partition}@"


class LeanPartitionRecords(Fetcher.PartitionRecords):  # type: ignore[misc]
    """kafka-python's records of one partition's fetch, as the ledger's `(source, value)` pairs."""

    def _maybe_skip_record(self, record: Any) -> bool:
        return False  # records before the fetch offset (inside a compressed batch) are skipped below

    def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any,
                        value_deserializer: Any) -> Iterator[Pair]:
        prefix = source_prefix(tp.topic, tp.partition)
        skip_below = self.fetch_offset
        try:
            batch = records.next_batch()
            last_batch = None
            while batch is not None:
                last_batch = batch
                if self.check_crcs and not batch.validate_crc():
                    raise CorruptRecordError(f"Record batch for partition {self.topic_partition} at offset "
                                             f"{batch.base_offset} failed crc check")
                if batch.magic == 2:
                    # as kafka-python: transactions' aborted batches and control batches are not records
                    self.leader_epoch = batch.leader_epoch
                    if (self.isolation_level == IsolationLevel.READ_COMMITTED and batch.has_producer_id()):
                        self._consume_aborted_transactions_up_to(batch.last_offset)
                        producer_id = batch.producer_id
                        if self._contains_abort_marker(batch):
                            self.aborted_producer_ids.discard(producer_id)
                        elif self._is_batch_aborted(batch):
                            self.next_fetch_offset = batch.next_offset
                            batch = records.next_batch()
                            continue
                    if batch.is_control_batch:
                        self.next_fetch_offset = batch.next_offset
                        batch = records.next_batch()
                        continue
                    if batch.compression_type == DefaultRecordBatch.CODEC_NONE:
                        out: list[Pair] = []
                        offsets: list[int] = []
                        last, size = read_batch(bytes(batch._buffer), batch.base_offset, batch.records_count,
                                                skip_below, prefix, out, offsets)
                        self.records_read += len(out)
                        self.bytes_read += size
                        for offset, pair in zip(offsets, out, strict=True):
                            # exact per record: a poll may take part of this batch, the next one resumes here
                            self.next_fetch_offset = offset + 1
                            yield pair
                        if not out and batch.records_count:
                            self.next_fetch_offset = last + 1
                        batch = records.next_batch()
                        continue
                for record in batch:  # compressed or legacy: kafka-python's record reader
                    self.records_read += 1
                    self.bytes_read += record.size_in_bytes
                    self.next_fetch_offset = record.offset + 1
                    if record.offset >= skip_below:
                        yield prefix + str(record.offset), record.value
                batch = records.next_batch()
            else:
                if last_batch and last_batch.magic == 2:
                    self.next_fetch_offset = last_batch.next_offset
                self.drain()
        except StopIteration:
            raise RuntimeError("StopIteration raised unpacking messageset") from None


def install(consumer: Any) -> bool:
    """Make `consumer` return `(source, value)` pairs instead of ConsumerRecords. False (and the consumer
    left as it was) when this kafka-python is not one the lean reader was written for."""
    fetcher = getattr(consumer, "_fetcher", None)
    if (not kafka.__version__.startswith(KNOWN_VERSIONS) or not isinstance(fetcher, Fetcher)
            or fetcher.config.get("key_deserializer") is not None
            or fetcher.config.get("value_deserializer") is not None):
        log.warning("kafka-python %s: the fetch process reads records through ConsumerRecords", kafka.__version__)
        return False
    fetcher.PartitionRecords = LeanPartitionRecords
    return True
