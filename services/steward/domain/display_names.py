"""Display names of the org tree's nodes (issue 24 "project display names in every screen"; ADR 0055).

A node of the org tree (a division, a team, a project) is known by its id, which never changes (it is in
every recorded event that names it). People know it by a name; its parent's manager sets that name with
`SetAllocations.display_names` (recorded in `AllocationsSet` v3), with an actor and a reason like every share.
A node without a name recorded is shown by its id; `None` in a command puts a node back on its id.

The rules are pure and have one home here: `display_name_problem` (what a name may be) and
`require_valid_display_names` (which nodes a command may name, and that names stay tellable apart)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from steward.domain.errors import InvalidAllocation
from steward.domain.ids import shown
from steward.domain.state import AllocationNode, LedgerState

DISPLAY_NAME_MAX_LENGTH: Final = 64
DISPLAY_NAME_RULE: Final = (f"1 to {DISPLAY_NAME_MAX_LENGTH} characters: letters, digits, punctuation, symbols "
                            "and single spaces, not starting or ending with a space")
# Unicode general categories a name may use: letters, marks, digits and numbers, punctuation, symbols. Not
# control (Cc), format (Cf: bidi overrides, zero-width characters), separators other than the space (Zl, Zp,
# other Zs), surrogates, private use or unassigned code points: a name must read as what it is.
_ALLOWED_CATEGORIES: Final = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
                                        "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"})


def display_name_problem(value: object) -> str | None:
    """Why `value` cannot be a display name, in a few words (None when it can)."""
    if not isinstance(value, str):
        return f"must be text, got {type(value).__name__}"
    if not value:
        return "must not be empty (give null to show the id again)"
    if len(value) > DISPLAY_NAME_MAX_LENGTH:
        return f"is {len(value)} characters long, the limit is {DISPLAY_NAME_MAX_LENGTH}"
    if value != value.strip(" "):
        return "must not start or end with a space"
    if "  " in value:
        return "must not hold two spaces in a row"
    for i, ch in enumerate(value):
        if ch != " " and unicodedata.category(ch) not in _ALLOWED_CATEGORIES:
            return (f"holds {unicodedata.name(ch, f'U+{ord(ch):04X}')} (U+{ord(ch):04X}) at position {i + 1}: "
                    f"a name is {DISPLAY_NAME_RULE}")
    return None


def _folded(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def require_valid_display_names(state: LedgerState, parent: str, shares: Mapping[str, float],
                                display_names: Mapping[str, Any]) -> None:
    """A manager of `parent` names `parent`'s children only (existing ones, or ones this command creates),
    each with a valid name (or None: the id again). Two children of one node may not share a name (ignoring
    case and compatibility forms), and a name may not be another node's id, so a name never passes for
    another node in a list or a search."""
    if not display_names:
        return
    children = {n for n, a in state.allocations.items() if a.parent == parent} | set(shares)
    taken: dict[str, str] = {}  # folded name -> the sibling that holds it, after this command
    for child in sorted(children):
        name = display_names[child] if child in display_names else _name_of(state.allocations.get(child))
        if name is not None:
            taken.setdefault(_folded(name), child)
    ids = {_folded(n): n for n in state.allocations} | {_folded(n): n for n in shares}
    for child, name in sorted(display_names.items()):
        if child not in children:
            raise InvalidAllocation(f"'{child}' is not a child of '{parent}': no display name to set")
        if name is None:
            continue
        problem = display_name_problem(name)
        if problem is not None:
            raise InvalidAllocation(f"display name of '{child}' {shown(name)} {problem}")
        folded = _folded(name)
        holder = taken.get(folded)
        if holder is not None and holder != child:
            raise InvalidAllocation(f"display name {shown(name)} of '{child}' is already the name of its sibling "
                                    f"'{holder}'")
        other = ids.get(folded)
        if other is not None and other != child:
            raise InvalidAllocation(f"display name {shown(name)} of '{child}' is the id of another node "
                                    f"('{other}')")


def _name_of(node: AllocationNode | None) -> str | None:
    return None if node is None else node.display_name


def display_name(node: AllocationNode) -> str:
    """What a node is called: its display name, or its id when none is recorded."""
    return node.display_name or node.name
