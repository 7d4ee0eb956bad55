"""The fetch process's command topics (`Assignment`): a topic created while the ledger runs (a new
executor's, `infra/kafka.sh add-executor`) is taken at the next refresh and read from the beginning, the
partitions it had keep their positions, other topics are never read; and the refresh setting is checked."""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaConnectionError, TopicAuthorizationFailedError

from steward.ledger.intake.fetch import Assignment
from steward.ledger.service import topic_refresh_s

C, S, EX = "steward.commands", "steward.commands.scheduler", "steward.commands.executor.gpu7"


class FakeConsumer:
    """The metadata, assignment and positions of a kafka-python consumer."""

    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = dict(partitions)
        self.assigned: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int | str] = {}
        self.fail: Exception | None = None

    def topics(self) -> set[str]:
        if self.fail is not None:
            raise self.fail
        return set(self.partitions)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.partitions.get(topic, 0)))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = list(partitions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.positions[tp] = "beginning"


def test_the_ledgers_topic_first_then_every_other_command_topic_and_nothing_else() -> None:
    consumer = FakeConsumer({S: 1, C: 2, "steward.events": 1, "steward.deadletter": 1, "other.commands": 1})
    assignment = Assignment(consumer, "steward", C)
    assert assignment.refresh()
    assert assignment.topics == [C, S]
    assert consumer.assigned == [TopicPartition(C, 0), TopicPartition(C, 1), TopicPartition(S, 0)]
    assert not assignment.refresh()  # nothing new: the assignment is left as it is


def test_a_topic_created_later_is_taken_and_read_from_the_beginning() -> None:
    consumer = FakeConsumer({C: 1, S: 1})
    assignment = Assignment(consumer, "steward", C)
    assignment.refresh()
    assignment.seek({(C, 0): 40, (S, 0): 7})
    consumer.positions[TopicPartition(C, 0)] = 55  # read on since the seek
    consumer.partitions[EX] = 2
    assert assignment.refresh()
    assert assignment.topics == [C, EX, S]
    assert set(consumer.assigned) == {TopicPartition(C, 0), TopicPartition(S, 0), TopicPartition(EX, 0),
                                      TopicPartition(EX, 1)}
    assert consumer.positions == {TopicPartition(C, 0): 55, TopicPartition(S, 0): 7,  # untouched
                                  TopicPartition(EX, 0): "beginning", TopicPartition(EX, 1): "beginning"}
    # a rewind (a batch that did not commit) seeks the new topic too, to the offsets the store has
    assignment.seek({(C, 0): 40, (S, 0): 7, (EX, 0): 3})
    assert consumer.positions[TopicPartition(EX, 0)] == 3
    assert consumer.positions[TopicPartition(EX, 1)] == "beginning"


def test_a_partition_added_to_a_topic_is_taken() -> None:
    consumer = FakeConsumer({C: 1})
    assignment = Assignment(consumer, "steward", C)
    assignment.refresh()
    consumer.partitions[C] = 3
    assert assignment.refresh()
    assert consumer.assigned == [TopicPartition(C, p) for p in range(3)]


def test_before_the_first_seek_a_new_topic_waits_for_it() -> None:
    consumer = FakeConsumer({C: 1})
    assignment = Assignment(consumer, "steward", C)
    assignment.refresh()
    consumer.partitions[EX] = 1
    assert assignment.refresh()
    assert consumer.positions == {}  # the ledger's first seek positions every partition
    assignment.seek({})
    assert consumer.positions == {TopicPartition(C, 0): "beginning", TopicPartition(EX, 0): "beginning"}


def test_a_broker_away_leaves_the_assignment_and_other_errors_end_the_process() -> None:
    consumer = FakeConsumer({C: 1})
    assignment = Assignment(consumer, "steward", C)
    assignment.refresh()
    consumer.partitions[EX] = 1
    consumer.fail = KafkaConnectionError("refused")
    assert not assignment.refresh()
    assert consumer.assigned == [TopicPartition(C, 0)]
    consumer.fail = TopicAuthorizationFailedError()
    with pytest.raises(TopicAuthorizationFailedError):
        assignment.refresh()


@pytest.mark.parametrize(("value", "seconds"), [(None, 5.0), ("", 5.0), ("0.5", 0.5), (" 30 ", 30.0)])
def test_the_refresh_setting(monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: float) -> None:
    if value is None:
        monkeypatch.delenv("STEWARD_LEDGER_TOPIC_REFRESH_S", raising=False)
    else:
        monkeypatch.setenv("STEWARD_LEDGER_TOPIC_REFRESH_S", value)
    assert topic_refresh_s() == seconds


@pytest.mark.parametrize("value", ["0", "-1", "soon", "7200", "nan"])
def test_a_wrong_refresh_setting_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("STEWARD_LEDGER_TOPIC_REFRESH_S", value)
    with pytest.raises(ValueError, match=r"STEWARD_LEDGER_TOPIC_REFRESH_S must be seconds between 0\.1 and 3600"):
        topic_refresh_s()
