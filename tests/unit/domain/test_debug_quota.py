"""The manager-set debug quota (DESIGN.md "Debug quota and the time-to-first-GPU SLO"): SetAllocations'
optional `debug_quotas`, its guards, its event (AllocationsSet v2) and its fold."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.commands import SetAllocations, command_from_dict
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import DomainError, InvalidAllocation, InvalidCommand
from steward.domain.events import EVENT_TYPES
from steward.domain.state import evolve
from steward.store.upcasting import upcast, validate
from tests.unit.domain.builders import apply, small_cluster

REJECTED = [
    ("negative", SetAllocations("a", {}, "r", {"a1": -1}), InvalidAllocation, "'a1'.*>= 0"),
    ("not a child of the parent", SetAllocations("b", {}, "r", {"a1": 2}), InvalidAllocation, "'a1' is not a child"),
    ("unknown allocation", SetAllocations("a", {}, "r", {"ghost": 2}), InvalidAllocation, "'ghost'"),
    ("root", SetAllocations("a", {}, "r", {"cluster": 2}), InvalidAllocation, "'cluster'"),
    ("a float smuggled past the decoder", SetAllocations("a", {}, "r", {"a1": 2.5}),  # type: ignore[dict-item]
     InvalidAllocation, "whole number"),
    ("no reason", SetAllocations("a", {}, " ", {"a1": 2}), InvalidCommand, "reason"),
]


@pytest.mark.parametrize(("name", "command", "error", "names"), REJECTED, ids=[c[0] for c in REJECTED])
def test_bad_debug_quotas_are_refused_by_name(name: str, command: SetAllocations, error: type[DomainError],
                                              names: str) -> None:
    with pytest.raises(error, match=names):
        decide(small_cluster(), command, 0.0)
    (event,) = decide_or_reject(small_cluster(), command, 0.0)
    assert event.type == "CommandRejected" and event.payload["command"] == "SetAllocations"


@pytest.mark.parametrize("payload", [{"a1": 1.5}, {"a1": "4"}, {"a1": True}, ["a1"]])
def test_the_decoder_refuses_non_integer_quotas(payload: Any) -> None:
    with pytest.raises(InvalidCommand, match="debug_quotas"):
        command_from_dict("SetAllocations", {"parent": "a", "shares": {}, "reason": "r", "debug_quotas": payload})


ACCEPTED: list[tuple[str, SetAllocations, dict[str, int | None]]] = [
    ("a quota for an existing child", SetAllocations("a", {}, "r", {"a1": 4}), {"a1": 4}),
    ("zero: no debug work qualifies", SetAllocations("a", {}, "r", {"a1": 0}), {"a1": 0}),
    ("a child created by the same command", SetAllocations("b", {"b2": 0.2}, "r", {"b2": 3}), {"b2": 3}),
    ("null: back to the default", SetAllocations("a", {}, "r", {"a1": None}), {"a1": None}),
]


@pytest.mark.parametrize(("name", "command", "quotas"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_valid_debug_quotas_are_recorded_and_folded(name: str, command: SetAllocations,
                                                    quotas: dict[str, int | None]) -> None:
    state = small_cluster()
    (event,) = decide(state, command, 5.0)
    assert event.type == "AllocationsSet" and event.payload["debug_quotas"] == quotas
    assert event.schema_version == EVENT_TYPES["AllocationsSet"] == 4
    validate("AllocationsSet", 2, event.payload)
    after = evolve(state, event, 5.0)
    for child, gpus in quotas.items():
        assert after.allocations[child].debug_quota_gpus == gpus


def test_a_quota_change_keeps_the_share_and_a_share_change_keeps_the_quota() -> None:
    state = apply(small_cluster(), SetAllocations("a", {}, "debug", {"a1": 6}))
    share = state.allocations["a1"].share
    assert (state.allocations["a1"].debug_quota_gpus, state.allocations["a1"].share) == (6, share)
    state = apply(state, SetAllocations("a", {"a1": share / 2}, "halve"))
    assert (state.allocations["a1"].debug_quota_gpus, state.allocations["a1"].share) == (6, share / 2)
    state = apply(state, SetAllocations("a", {}, "back to default", {"a1": None}))
    assert state.allocations["a1"].debug_quota_gpus is None


def test_an_allocation_change_without_quotas_writes_the_v1_shape() -> None:
    """Old decisions replay to the same payload: no `debug_quotas` key unless the command sets one."""
    (event,) = decide(small_cluster(), SetAllocations("b", {"b2": 0.5}, "new project"), 5.0)
    assert "debug_quotas" not in event.payload
    validate("AllocationsSet", 1, event.payload)
    assert upcast("AllocationsSet", 1, event.payload) == event.payload
