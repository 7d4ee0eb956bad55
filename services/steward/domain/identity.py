"""People and their groups (issue 24 "Single sign-on with real identities"): the lab's OpenID provider
says who a person is and which groups they belong to; which Steward role and scopes a group gives is a
fact an admin records, the group mapping (`SetGroupMapping` -> `GroupMappingSet` in the
`identity-groups` stream), like every other admin decision: through the ledger, in the hash chain.

The rules are pure: `require_valid_rules` (what a mapping may say) and `resolve` (the one role and the
scopes a person's groups give them). A person has one role: the strongest their groups map to, in the
order of `ROLE_PRECEDENCE`, with the scopes of every rule of that role (their union).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steward.domain.commands import ROOT, SetGroupMapping
from steward.domain.errors import InvalidCommand
from steward.domain.events import Event
from steward.domain.state import LedgerState

GROUPS_STREAM = "identity-groups"
# The strongest role first: a person in an admins' group and a researchers' group acts as admin.
ROLE_PRECEDENCE: tuple[str, ...] = ("admin", "manager", "researcher", "auditor")
SCOPED_ROLES = frozenset({"manager", "researcher"})
MAX_RULES = 500
MAX_TEXT = 200


@dataclass(frozen=True, slots=True)
class GroupRule:
    """Members of `group` act as `role` over `scopes` (org-tree nodes; none for admin and auditor)."""

    group: str
    role: str
    scopes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "role": self.role, "scopes": list(self.scopes)}


def person(subject: Any, name: Any) -> str:
    """A person as the audit trail shows them: "Name (subject)", or the subject alone when no name was given."""
    return f"{name} ({subject})" if name and name != subject else str(subject)


def rules_of(raw: Sequence[Mapping[str, Any]]) -> tuple[GroupRule, ...]:
    """Rules from their recorded (or sent) form; a malformed rule is named."""
    out = []
    for i, r in enumerate(raw):
        group, role, scopes = r.get("group"), r.get("role"), r.get("scopes", [])
        if not isinstance(group, str) or not isinstance(role, str) or not isinstance(scopes, list) \
                or not all(isinstance(s, str) for s in scopes):
            raise InvalidCommand(f"rule {i + 1} of the group mapping needs a group, a role and a list of scopes")
        out.append(GroupRule(group, role, tuple(scopes)))
    return tuple(out)


def require_valid_rules(rules: Sequence[GroupRule], known_nodes: Iterable[str]) -> None:
    """Each rule names a group and a known role; managers and researchers need scopes that are nodes of
    the org tree, admins and auditors take none; a group is named once per role."""
    if len(rules) > MAX_RULES:
        raise InvalidCommand(f"a group mapping has at most {MAX_RULES} rules, got {len(rules)}")
    nodes = set(known_nodes)
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(rules, 1):
        if not r.group.strip() or len(r.group) > MAX_TEXT:
            raise InvalidCommand(f"rule {i}: a group name has 1 to {MAX_TEXT} characters")
        if r.role not in ROLE_PRECEDENCE:
            raise InvalidCommand(f"rule {i}: unknown role '{r.role}'; one of {', '.join(ROLE_PRECEDENCE)}")
        if r.role in SCOPED_ROLES and not r.scopes:
            raise InvalidCommand(f"rule {i}: the {r.role}s of group '{r.group}' need at least one scope")
        if r.role not in SCOPED_ROLES and r.scopes:
            raise InvalidCommand(f"rule {i}: an {r.role} sees everything; group '{r.group}' takes no scope")
        unknown = [s for s in r.scopes if s not in nodes]
        if unknown:
            raise InvalidCommand(f"rule {i}: no node {', '.join(repr(s) for s in unknown)} in the org tree")
        if (r.group, r.role) in seen:
            raise InvalidCommand(f"rule {i}: group '{r.group}' is mapped to {r.role} twice")
        seen.add((r.group, r.role))


def resolve(rules: Sequence[GroupRule], groups: Iterable[str]) -> tuple[str, tuple[str, ...]] | None:
    """The role and scopes `groups` give: the strongest role any of them maps to, with the union of the
    scopes of that role's matching rules (sorted); None when no group is mapped."""
    member = set(groups)
    matching = [r for r in rules if r.group in member]
    for role in ROLE_PRECEDENCE:
        of_role = [r for r in matching if r.role == role]
        if of_role:
            return role, tuple(sorted({s for r in of_role for s in r.scopes}))
    return None


def decide_set_group_mapping(state: LedgerState, cmd: SetGroupMapping, now: float) -> list[Event]:
    """The whole mapping is replaced (what is in force is always one recorded event), with a reason."""
    if not cmd.reason.strip():
        raise InvalidCommand("a group mapping change needs a reason")
    rules = rules_of(cmd.rules)
    require_valid_rules(rules, [ROOT, *state.allocations])
    return [Event(cmd.aggregate, "GroupMappingSet", {"rules": [r.to_dict() for r in rules], "reason": cmd.reason})]
