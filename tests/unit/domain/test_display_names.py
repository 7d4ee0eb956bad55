"""Display names of the org tree's nodes (issue 24; ADR 0055): SetAllocations' optional `display_names`, the
rules of a name (steward.domain.display_names), the event (AllocationsSet v3), its fold and its history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.allocation_history import AllocationsSetRecord, allocation_changes
from steward.domain.commands import SetAllocations, command_from_dict
from steward.domain.decide import decide, decide_or_reject
from steward.domain.display_names import DISPLAY_NAME_MAX_LENGTH, display_name, display_name_problem
from steward.domain.errors import InvalidAllocation, InvalidCommand
from steward.domain.events import EVENT_TYPES
from steward.domain.state import evolve
from steward.store.upcasting import upcast, validate
from tests.unit.domain.builders import apply, small_cluster

GOOD_NAMES = ["Vision", "Speech & Audio", "NLP (2026)", "Équipe Lumière", "机器学习", "Team-A.1", "x",
              "a" * DISPLAY_NAME_MAX_LENGTH, "Ω-lab #3", "R&D: robots"]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_names_people_write_are_valid(name: str) -> None:
    assert display_name_problem(name) is None


BAD_NAMES: list[tuple[str, object, str]] = [
    ("empty", "", "must not be empty"),
    ("too long", "a" * (DISPLAY_NAME_MAX_LENGTH + 1), f"limit is {DISPLAY_NAME_MAX_LENGTH}"),
    ("leading space", " Vision", "start or end with a space"),
    ("trailing space", "Vision ", "start or end with a space"),
    ("two spaces", "Big  Team", "two spaces"),
    ("newline", "Vision\nTeam", "U\\+000A"),
    ("tab", "Vision\tTeam", "U\\+0009"),
    ("NUL", "Vision\x00", "U\\+0000"),
    ("right-to-left override", "abc\u202edef", "U\\+202E"),
    ("zero-width space", "Vi\u200bsion", "U\\+200B"),
    ("no-break space", "Vi\u00a0sion", "U\\+00A0"),
    ("not text", 42, "must be text"),
]


@pytest.mark.parametrize(("case", "name", "problem"), BAD_NAMES, ids=[c[0] for c in BAD_NAMES])
def test_bad_names_are_refused_naming_the_problem(case: str, name: object, problem: str) -> None:
    found = display_name_problem(name)
    assert found is not None
    assert __import__("re").search(problem, found), found


REJECTED = [
    ("not a child of the parent", SetAllocations("b", {}, "r", display_names={"a1": "Vision"}), "'a1' is not a child"),
    ("unknown node", SetAllocations("a", {}, "r", display_names={"ghost": "Ghost"}), "'ghost' is not a child"),
    ("a bad name", SetAllocations("a", {}, "r", display_names={"a1": "line\nbreak"}), "display name of 'a1'"),
    ("a sibling's name", SetAllocations("cluster", {}, "r", display_names={"a": "Lab", "b": "lab"}),
     "already the name of its sibling"),
    ("another node's id", SetAllocations("a", {}, "r", display_names={"a1": "B1"}), "the id of another node"),
]


@pytest.mark.parametrize(("case", "command", "names"), REJECTED, ids=[c[0] for c in REJECTED])
def test_bad_display_names_are_refused_by_name(case: str, command: SetAllocations, names: str) -> None:
    with pytest.raises(InvalidAllocation, match=names):
        decide(small_cluster(), command, 0.0)
    (event,) = decide_or_reject(small_cluster(), command, 0.0)
    assert event.type == "CommandRejected" and event.payload["code"] == "invalid_allocation"


def test_a_name_taken_by_a_sibling_before_is_refused_and_freed_when_renamed() -> None:
    state = apply(small_cluster(), SetAllocations("cluster", {}, "name", display_names={"a": "Lab"}))
    with pytest.raises(InvalidAllocation, match="sibling 'a'"):
        decide(state, SetAllocations("cluster", {}, "r", display_names={"b": "LAB"}), 0.0)
    # one command may pass a name from one sibling to the other
    state = apply(state, SetAllocations("cluster", {}, "swap", display_names={"a": "Old lab", "b": "Lab"}))
    assert (state.allocations["a"].display_name, state.allocations["b"].display_name) == ("Old lab", "Lab")


@pytest.mark.parametrize("payload", [{"a1": 3}, {"a1": ["x"]}, ["a1"], "Vision"])
def test_the_decoder_refuses_names_that_are_not_text(payload: Any) -> None:
    with pytest.raises(InvalidCommand, match="display_names"):
        command_from_dict("SetAllocations", {"parent": "a", "shares": {}, "reason": "r", "display_names": payload})


def test_a_name_is_recorded_in_v3_folded_and_kept_by_share_and_quota_changes() -> None:
    state = small_cluster()
    (event,) = decide(state, SetAllocations("a", {}, "people read names", display_names={"a1": "Vision"}), 5.0)
    assert event.type == "AllocationsSet" and event.payload["display_names"] == {"a1": "Vision"}
    assert event.schema_version == EVENT_TYPES["AllocationsSet"] == 4  # v4 added pins (ADR 0067)
    validate("AllocationsSet", 3, event.payload)
    state = evolve(state, event, 5.0)
    assert state.allocations["a1"].display_name == "Vision"
    share = state.allocations["a1"].share
    state = apply(state, SetAllocations("a", {"a1": share / 2}, "halve", {"a1": 4}))
    assert (state.allocations["a1"].display_name, state.allocations["a1"].debug_quota_gpus) == ("Vision", 4)
    assert display_name(state.allocations["a1"]) == "Vision"
    state = apply(state, SetAllocations("a", {}, "back to the id", display_names={"a1": None}))
    assert state.allocations["a1"].display_name is None
    assert display_name(state.allocations["a1"]) == "a1"


def test_a_node_created_with_its_name() -> None:
    state = apply(small_cluster(), SetAllocations("b", {"b2": 0.25}, "new project", display_names={"b2": "Robots"}))
    assert state.allocations["b2"].display_name == "Robots"


def test_old_events_without_names_replay_and_show_the_id() -> None:
    """A v1 or v2 `AllocationsSet` (no `display_names`) is a v3 payload as is, and its nodes are named by id."""
    v1 = {"parent": "cluster", "shares": {"a": 0.5}, "reason": "r"}
    v2 = {"parent": "a", "shares": {"a1": 1.0}, "reason": "r", "debug_quotas": {"a1": 2}}
    assert upcast("AllocationsSet", 1, v1) == v1 and upcast("AllocationsSet", 2, v2) == v2
    state = small_cluster()
    for payload in (v1, v2):
        validate("AllocationsSet", 3, payload)
        from steward.domain.events import Event
        state = evolve(state, Event("allocation-x", "AllocationsSet", payload), 1.0)
    assert state.allocations["a1"].display_name is None and display_name(state.allocations["a1"]) == "a1"
    (event,) = decide(small_cluster(), SetAllocations("b", {"b2": 0.5}, "no names"), 5.0)
    assert "display_names" not in event.payload  # old decisions replay to the same payload


def test_the_history_shows_the_name_before_and_after() -> None:
    records = [AllocationsSetRecord(1, 1.0, "alice", {"parent": "cluster", "shares": {"a": 1.0}, "reason": "r"}),
               AllocationsSetRecord(2, 2.0, "bob", {"parent": "cluster", "shares": {}, "reason": "name it",
                                                    "display_names": {"a": "Vision"}}),
               AllocationsSetRecord(3, 3.0, "bob", {"parent": "cluster", "shares": {"a": 0.5}, "reason": "halve"})]
    first, named, halved = allocation_changes(records)
    assert (first.display_name_after, first.display_name_set) == (None, False)
    assert (named.display_name_before, named.display_name_after, named.display_name_set) == (None, "Vision", True)
    assert named.share_before == named.share_after == 1.0
    assert (halved.display_name_before, halved.display_name_after, halved.display_name_set) == ("Vision", "Vision",
                                                                                              False)


@given(st.text(max_size=DISPLAY_NAME_MAX_LENGTH + 8))
def test_a_valid_name_is_printable_trimmed_and_bounded(name: str) -> None:
    """The invariant the screens rely on: whatever passes is 1-64 characters, trimmed, and has no control,
    format or line-breaking character."""
    if display_name_problem(name) is None:
        assert 1 <= len(name) <= DISPLAY_NAME_MAX_LENGTH and name == name.strip()
        assert name.isprintable() or all(c.isprintable() or c == " " for c in name)
        assert "\n" not in name and "\u202e" not in name and "  " not in name
