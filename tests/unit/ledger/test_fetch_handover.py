"""The fetch process's handover (ADR 0019, ADR 0024): what it holds is sent in partition order with the next
offset of every partition a batch ends, and the wire carries whole messages of any size."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from steward.ledger.intake.fetch import Held
from steward.ledger.intake.recordbatch import Pair
from steward.ledger.processes import Wire


def pairs(topic: str, partition: int, first: int, n: int) -> list[Pair]:
    return [(f"{topic}/{partition}@{first + i}", b"v%d" % (first + i)) for i in range(n)]


def held_with(*chunks: tuple[int, int, int]) -> Held:
    """Chunks of topic `t` as (partition, first offset, count), in the order polled."""
    held = Held()
    for partition, first, n in chunks:
        held.add(("t", partition), pairs("t", partition, first, n))
    return held


TAKES: list[tuple[str, Held, int, list[str], dict[tuple[str, int], int], int]] = [
    ("everything, under the limit", held_with((0, 5, 3), (1, 0, 2)), 10,
     ["t/0@5", "t/0@6", "t/0@7", "t/1@0", "t/1@1"], {("t", 0): 8, ("t", 1): 2}, 0),
    ("a chunk cut at the limit", held_with((0, 5, 3), (1, 0, 4)), 5,
     ["t/0@5", "t/0@6", "t/0@7", "t/1@0", "t/1@1"], {("t", 0): 8, ("t", 1): 2}, 2),
    ("the first chunk cut", held_with((2, 100, 10)), 4, ["t/2@100", "t/2@101", "t/2@102", "t/2@103"],
     {("t", 2): 104}, 6),
    ("two polls of one partition: the later offset", held_with((0, 0, 2), (1, 7, 1), (0, 2, 2)), 10,
     ["t/0@0", "t/0@1", "t/1@7", "t/0@2", "t/0@3"], {("t", 0): 4, ("t", 1): 8}, 0),
    ("nothing held", held_with(), 10, [], {}, 0),
]


@pytest.mark.parametrize(("name", "held", "limit", "sources", "offsets", "left"), TAKES, ids=[t[0] for t in TAKES])
def test_take_sends_in_order_with_the_next_offsets(name: str, held: Held, limit: int, sources: list[str],
                                                   offsets: dict[tuple[str, int], int], left: int) -> None:
    messages, next_offsets = held.take(limit)
    assert [s for s, _ in messages] == sources
    assert all(value == b"v" + s.rsplit("@", 1)[1].encode() for s, value in messages)
    assert next_offsets == offsets
    assert held.count == left


def test_what_is_left_is_taken_next_and_clear_drops_it() -> None:
    held = held_with((0, 0, 5), (1, 0, 5))
    first, _ = held.take(3)
    second, offsets = held.take(4)
    assert [s for s, _ in first + second] == [f"t/0@{i}" for i in range(5)] + ["t/1@0", "t/1@1"]
    assert offsets == {("t", 0): 5, ("t", 1): 2}
    held.add(("t", 2), [])
    held.clear()
    assert held.count == 0 and held.take(10) == ([], {})


@pytest.fixture()
def wires() -> Iterator[tuple[Wire, Wire]]:
    a, b = socket.socketpair()
    ours, theirs = Wire(a), Wire(b)
    yield ours, theirs
    ours.close()
    theirs.close()


def test_messages_arrive_whole_and_equal(wires: tuple[Wire, Wire]) -> None:
    ours, theirs = wires
    batch = ("batch", 3, [*pairs("steward.commands", 4, 10, 2000), ("t/0@1", None)], {("steward.commands", 4): 2010})
    assert not ours.poll(0.0)
    theirs.send(batch)
    theirs.send(("stopped", 0.25))
    assert ours.poll(1.0)
    assert ours.recv() == batch
    assert ours.recv() == ("stopped", 0.25)


def test_a_message_larger_than_the_socket_buffers(wires: tuple[Wire, Wire]) -> None:
    ours, theirs = wires
    # 10 MiB: written while it is read
    big: tuple[object, ...] = ("batch", 1, [("t/0@0", bytes(range(256)) * 40_000)], {})
    writer = threading.Thread(target=theirs.send, args=(big,))
    writer.start()
    assert ours.recv() == big
    writer.join(10)


def test_a_closed_end_reads_as_eof_and_an_unwritable_value_is_refused(wires: tuple[Wire, Wire]) -> None:
    ours, theirs = wires
    with pytest.raises(ValueError):
        theirs.send(("seek", 1, {("t", 0): object()}))
    theirs.close()
    assert ours.poll(1.0)  # the end of the stream wakes a poll
    with pytest.raises(EOFError):
        ours.recv()
