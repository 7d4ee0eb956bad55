"""The fetch process's lean record reader (steward.ledger.intake.records, ADR 0024) against kafka-python's own:
the same `(source, value)` pairs in the same order and the same resume offset after every partial take, on
record batches written by kafka-python's builder; corrupt batches refused as kafka-python refuses them."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import TopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c, encode_varint

from steward.ledger.intake.recordbatch import HEADER_SIZE, Pair, read_batch, varint
from steward.ledger.intake.records import LeanPartitionRecords, source_prefix

TP = TopicPartition("steward.commands", 3)
PREFIX = source_prefix(TP.topic, TP.partition)

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]  # key, value, headers


def batch(base: int, records: list[Record], *, compression: int = 0, gap_after: int | None = None,
          ts: int = 1_700_000_000_000) -> bytes:
    """One v2 record batch written by kafka-python (as a producer writes it); `gap_after` skips 5 offsets
    after that record (as compaction leaves them)."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 24, offset=base)
    for i, (key, value, headers) in enumerate(records):
        assert builder.append(ts + 37 * i, key, value, headers) is not None
        if gap_after == i:
            builder.skip(5)
    builder.close()
    return bytes(builder.buffer())


def partition_records(cls: Any, data: bytes, fetch_offset: int) -> Any:
    return cls(fetch_offset, TP, MemoryRecords(data), key_deserializer=None, value_deserializer=None,
               check_crcs=True, aborted_transactions=None, metric_aggregator=None, on_drain=lambda _: None)


def read(cls: Any, data: bytes, fetch_offset: int, takes: list[int]) -> list[tuple[list[Pair], int]]:
    """Each take's records as pairs with the resume offset after it, as `Fetcher._append` sees them."""
    part = partition_records(cls, data, fetch_offset)
    out: list[tuple[list[Pair], int]] = []
    for n in [*takes, 1 << 30]:
        if not part:  # drained (the fetcher never takes from a drained partition)
            break
        got = part.take(n)
        if cls is not LeanPartitionRecords:
            got = [(PREFIX + str(r.offset), r.value) for r in got]
        out.append((got, part.next_fetch_offset))
    return out


def same_as_kafka_python(data: bytes, fetch_offset: int, takes: list[int]) -> list[tuple[list[Pair], int]]:
    ours = read(LeanPartitionRecords, data, fetch_offset, takes)
    assert ours == read(Fetcher.PartitionRecords, data, fetch_offset, takes)
    return ours


def recs(*values: bytes | None, key: bytes | None = b"job:j1") -> list[Record]:
    return [(key, v, []) for v in values]


CASES: list[tuple[str, bytes, int, list[int]]] = [
    ("one small record", batch(0, recs(b"x")), 0, []),
    ("empty and null values, no key", batch(7, recs(b"", None, b"v", key=None)), 7, []),
    ("value lengths around the one, two and three byte varints",
     batch(100, recs(*(b"a" * n for n in (63, 64, 8191, 8192, 100_000)))), 100, [2]),
    ("headers, including a null header value",
     batch(0, [(b"k", b"v1", [("trace", b"abc"), ("none", None)]), (None, b"v2", [("x", b"")])]), 0, [1]),
    ("hundreds of records: two-byte offset deltas", batch(5_000, recs(*(b"m%d" % i for i in range(700)))), 5_000,
     [1, 64, 300]),
    ("three batches in one fetch",
     batch(0, recs(b"a", b"b")) + batch(2, recs(b"c")) + batch(3, recs(*(b"d" * i for i in range(50)))), 0, [2, 1]),
    ("a fetch starting inside its first batch (the broker sends the whole batch)",
     batch(10, recs(*(b"v%d" % i for i in range(20)))) + batch(30, recs(b"w")), 17, [3]),
    ("a fetch starting after every record of its first batch",
     batch(10, recs(b"a", b"b")) + batch(12, recs(b"c")), 12, []),
    ("offsets left out by compaction", batch(0, recs(b"a", b"b", b"c"), gap_after=0), 0, [1]),
    ("a compressed batch: kafka-python's reader", batch(40, recs(*(b"z" * i for i in range(30))), compression=1), 45,
     [4]),
    ("a compressed batch between two plain ones",
     batch(0, recs(b"a")) + batch(1, recs(b"b", b"c"), compression=1) + batch(3, recs(b"d")), 0, [1, 1]),
]


@pytest.mark.parametrize(("name", "data", "fetch_offset", "takes"), CASES, ids=[c[0] for c in CASES])
def test_pairs_and_resume_offsets_equal_kafka_pythons(name: str, data: bytes, fetch_offset: int,
                                                      takes: list[int]) -> None:
    taken = same_as_kafka_python(data, fetch_offset, takes)
    assert sum(len(got) for got, _ in taken) > 0


def test_sources_name_topic_partition_and_offset() -> None:
    ((got, resume),) = read(LeanPartitionRecords, batch(41, recs(b"a", None)), 41, [])
    assert got == [("steward.commands/3@41", b"a"), ("steward.commands/3@42", None)]
    assert resume == 43


records_strategy = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=9_000),
              st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=2)),
    min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.lists(records_strategy, min_size=1, max_size=3), st.integers(0, 2**31 - 1_000), st.data())
def test_any_fetch_reads_as_kafka_python_reads_it(batches: list[list[Record]], base: int, data: st.DataObject) -> None:
    chunks = []
    offset = base
    for records in batches:
        gap = data.draw(st.none() | st.integers(0, len(records) - 1))
        compression = data.draw(st.sampled_from([0, 0, 0, 1]))
        chunks.append(batch(offset, records, compression=compression, gap_after=gap))
        offset += len(records) + (5 if gap is not None and gap < len(records) - 1 else 0)
    total = sum(len(r) for r in batches)
    fetch_offset = data.draw(st.integers(base, base + len(batches[0]) - 1))
    takes = data.draw(st.lists(st.integers(1, total), max_size=4))
    same_as_kafka_python(b"".join(chunks), fetch_offset, takes)


def with_crc(data: bytes) -> bytes:
    """The batch with its CRC recomputed (a record made malformed by its producer, not by the wire)."""
    body = bytearray(data)
    crc = calc_crc32c(memoryview(body)[DefaultRecordBatch.ATTRIBUTES_OFFSET:])
    struct.pack_into(">I", body, DefaultRecordBatch.CRC_OFFSET, crc)
    return bytes(body)


GOOD = batch(0, recs(b"first", b"second" * 20, b"third"))
HEADER = DefaultRecordBatch.HEADER_STRUCT.size

CORRUPT: list[tuple[str, bytes]] = [
    ("a flipped byte in a record (CRC)", GOOD[:HEADER + 12] + bytes([GOOD[HEADER + 12] ^ 0x40]) + GOOD[HEADER + 13:]),
    ("a record longer than its length says", with_crc(GOOD[:HEADER] + bytes([GOOD[HEADER] - 2]) + GOOD[HEADER + 1:])),
    ("bytes after the last record", with_crc(GOOD[:8] + struct.pack(">i", len(GOOD) - 12 + 3) + GOOD[12:] + b"\0\0\0")),
    ("a record cut short", with_crc(GOOD[:8] + struct.pack(">i", len(GOOD) - 12 - 4) + GOOD[12:-4])),
]


@pytest.mark.parametrize(("name", "data"), CORRUPT, ids=[c[0] for c in CORRUPT])
def test_a_corrupt_batch_is_refused_like_kafka_python_refuses_it(name: str, data: bytes) -> None:
    for cls in (Fetcher.PartitionRecords, LeanPartitionRecords):
        part = partition_records(cls, data, 0)
        with pytest.raises(CorruptRecordError):  # at once, or at the take after the records before it
            while part:
                part.take(100)


def test_read_batch_reports_the_last_offset_and_kafka_pythons_byte_count() -> None:
    data = batch(0, recs(b"a", b"bb", b"ccc"), gap_after=1)  # offset deltas 0, 1, 7
    out: list[Pair] = []
    offsets: list[int] = []
    last, size = read_batch(data, 100, 3, 101, PREFIX, out, offsets)
    assert (last, offsets) == (107, [101, 107])
    assert [v for _, v in out] == [b"bb", b"ccc"]
    kafka_batch = DefaultRecordBatch(data)
    assert size == sum(r.size_in_bytes for r in kafka_batch)
    assert DefaultRecordBatch.HEADER_STRUCT.size == HEADER_SIZE


@pytest.mark.parametrize("value", [0, -1, 1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 2**31 - 1, -(2**31), 2**62])
def test_varint_reads_what_kafka_python_writes(value: int) -> None:
    written = bytearray(b"\x07")
    encode_varint(value, written.append)
    written += b"\x05"  # what follows is not read
    assert varint(bytes(written), 1) == (value, len(written) - 1)
