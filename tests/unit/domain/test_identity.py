"""The group mapping (steward.domain.identity): what a mapping may say, and which one role and which scopes
a person's groups give them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.auth.principal import ROLES
from steward.domain.commands import SetGroupMapping
from steward.domain.decide import decide_or_reject
from steward.domain.identity import ROLE_PRECEDENCE, GroupRule, require_valid_rules, resolve
from steward.domain.state import AllocationNode, LedgerState

NODES = ["cluster", "physics", "a1", "a2"]
STATE = LedgerState(allocations={"physics": AllocationNode("physics", "cluster", 1.0, None),
                                 "a1": AllocationNode("a1", "physics", 0.5, None),
                                 "a2": AllocationNode("a2", "physics", 0.5, None)})


def test_the_domain_knows_every_role_of_the_api() -> None:
    assert set(ROLE_PRECEDENCE) == set(ROLES)


@pytest.mark.parametrize(("rules", "problem"), [
    ([GroupRule("g", "admin")], None),
    ([GroupRule("g", "researcher", ("a1", "a2")), GroupRule("g", "auditor")], None),
    ([GroupRule("g", "owner")], "unknown role 'owner'"),
    ([GroupRule("", "admin")], "a group name has 1 to"),
    ([GroupRule("g", "manager")], "need at least one scope"),
    ([GroupRule("g", "auditor", ("a1",))], "takes no scope"),
    ([GroupRule("g", "researcher", ("ghost",))], "no node 'ghost' in the org tree"),
    ([GroupRule("g", "admin"), GroupRule("g", "admin")], "mapped to admin twice"),
])
def test_what_a_mapping_may_say(rules: list[GroupRule], problem: str | None) -> None:
    cmd = SetGroupMapping(rules=[r.to_dict() for r in rules], reason="lab groups")
    events = decide_or_reject(STATE, cmd, 0.0)
    if problem is None:
        assert [e.type for e in events] == ["GroupMappingSet"]
        assert events[0].stream == "identity-groups"
    else:
        assert events[0].type == "CommandRejected" and problem in events[0].payload["reason"], events[0].payload


def test_a_mapping_needs_a_reason() -> None:
    events = decide_or_reject(STATE, SetGroupMapping(rules=[], reason=" "), 0.0)
    assert events[0].payload["reason"] == "a group mapping change needs a reason"


@pytest.mark.parametrize(("groups", "expected"), [
    (["physics-researchers"], ("researcher", ("a1",))),
    (["physics-researchers", "a2-researchers"], ("researcher", ("a1", "a2"))),
    (["physics-researchers", "leads"], ("manager", ("physics",))),
    (["compliance", "physics-researchers"], ("researcher", ("a1",))),
    (["compliance"], ("auditor", ())),
    (["admins", "leads"], ("admin", ())),
    (["visitors"], None),
    ([], None),
])
def test_the_strongest_role_wins_with_the_scopes_of_its_rules(groups: list[str], expected: object) -> None:
    rules = [GroupRule("physics-researchers", "researcher", ("a1",)),
             GroupRule("a2-researchers", "researcher", ("a2",)),
             GroupRule("leads", "manager", ("physics",)), GroupRule("compliance", "auditor"),
             GroupRule("admins", "admin")]
    assert resolve(rules, groups) == expected


rule = st.builds(GroupRule, st.sampled_from(["g1", "g2", "g3", "g4"]), st.sampled_from(ROLE_PRECEDENCE),
                 st.lists(st.sampled_from(NODES), max_size=3).map(tuple))


@given(st.lists(rule, max_size=8), st.sets(st.sampled_from(["g1", "g2", "g3", "g4", "g5"])))
def test_resolve_gives_the_strongest_mapped_role_and_only_its_rules_scopes(rules: list[GroupRule],
                                                                           groups: set[str]) -> None:
    found = resolve(rules, groups)
    matching = [r for r in rules if r.group in groups]
    if not matching:
        assert found is None
        return
    assert found is not None
    role, scopes = found
    assert ROLE_PRECEDENCE.index(role) == min(ROLE_PRECEDENCE.index(r.role) for r in matching)
    assert set(scopes) == {s for r in matching if r.role == role for s in r.scopes}
    # a group the person is not in never adds anything
    assert resolve([*rules, GroupRule("not-mine", "admin")], groups) == found


def test_valid_rules_pass_the_check() -> None:
    require_valid_rules([GroupRule("g", "manager", ("physics",))], NODES)
