"""The command registry (`steward.domain.commands.REGISTRY`) is the one list of commands: every command class
is in it once, its `TYPE` and `aggregate` come from it, and `COMMAND_TYPES` is derived from it."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from steward.domain import commands
from steward.domain.commands import (
    COMMAND_TYPES,
    REGISTRY,
    ClosePeriod,
    Command,
    CommandKind,
    ExplainWaiting,
    RecordAccessDenial,
    RegisterNode,
    ReportHeartbeat,
    SetAllocations,
    SetPolicy,
    SubmitJob,
)

COMMAND_CLASSES = [c for _, c in inspect.getmembers(commands, inspect.isclass)
                   if issubclass(c, Command) and c is not Command]


def test_every_command_class_is_registered_once() -> None:
    # 25 + SetNotifications, RecordDeliveryFailed (0050), SetGroupMapping (0049), MapNamespace (0054),
    # ReportSessionAddress (0055), SetGpuModelWeights (0057), RetireNode (0078)
    assert len(COMMAND_CLASSES) == 32
    assert sorted(k.cls.__name__ for k in REGISTRY) == sorted(c.__name__ for c in COMMAND_CLASSES)
    assert len({k.name for k in REGISTRY}) == len(REGISTRY)


def test_every_command_is_a_frozen_slotted_dataclass() -> None:
    for cls in COMMAND_CLASSES:
        assert dataclasses.is_dataclass(cls), cls
        assert cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        assert "__slots__" in cls.__dict__, cls


def test_type_and_the_decoder_come_from_the_registry() -> None:
    assert {k.name: k.cls for k in REGISTRY} == COMMAND_TYPES
    for kind in REGISTRY:
        assert kind.name == kind.cls.TYPE
        assert kind.cls.KIND is kind


SAMPLES: list[tuple[Any, str]] = [
    (SubmitJob("j-1", "p", 1, 60.0, ["true"]), "job-j-1"),
    (RegisterNode("n-1", 8, "A100", ["r1"]), "node-n-1"),
    (SetAllocations("org", {"a": 0.5}, "why"), "allocation-org"),
    (ReportHeartbeat("e-1", {}), "executor-e-1"),
    (ClosePeriod("2026-01", 0.0, 1.0, 8.0, {}), "period-2026-01"),
    (ExplainWaiting({}), "queue"),
    (SetPolicy({}, "why"), "policy"),
    (RecordAccessDenial("s" * 200, "r", "op", "t", "no", 1.0, 1.0), "access-" + "s" * 150),
]


@pytest.mark.parametrize(("command", "stream"), SAMPLES)
def test_the_aggregate_is_the_registered_stream_filled_in(command: Any, stream: str) -> None:
    assert command.aggregate == stream


def test_a_stream_naming_no_field_is_refused_at_declaration() -> None:
    with pytest.raises(TypeError, match="names no field 'jobid'"):
        CommandKind("SubmitJob", SubmitJob, "job-{jobid}")
