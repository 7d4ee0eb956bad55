"""The ledger's command decoder, compiled (ADR 0027): `command_from_dict` of `steward.domain.commands`, with
the per-type decoding plan walked by compiled code instead of a decoder generated as Python source per type.

The command classes stay in `steward.domain.commands`, pure: mypyc mis-compiles their `ClassVar` fields
(mypyc#1122). This module only reads their fields once per type (names, types, defaults, slot descriptors)
and builds each command by setting its slots, as the generated decoder does. It takes the common case
only: every field present or defaulted, no unknown field, and every value already of its field's exact
type (a list or dict of plain items copied, as the reference does); a field of another declared type goes
through the reference's checker. At the first thing it does not expect it decodes with
`command_from_dict_reference` from the start, which converts the value or names the problem, so the result
is the reference's command or the reference's error (tests/property/test_fast_domain.py). The ledger's
`command_from_dict` adds the id rule (`steward.domain.ids`) to the shape the reference checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final, get_args, get_origin, get_type_hints

from steward.domain.commands import COMMAND_TYPES, Command, checker_of, command_from_dict_reference
from steward.domain.errors import InvalidCommand
from steward.domain.ids import require_new_ids

# how a field's value is checked
EXACT: Final = 0  # of exactly the field's type (str, int, float, bool)
LIST: Final = 1  # a list of items of exactly one plain type: copied
DICT: Final = 2  # a dict of str to values of exactly one plain type: copied
CHECKED: Final = 3  # anything else: the reference's checker (converts or names the problem)

_PLAIN = (int, str, bool, float)


class _Unset:
    pass


_UNSET: Final = _Unset()


class Field:
    """One field's decoding: its name, how its value is checked, its default, and how it is set. (A plain
    class: compiled as a mypyc dataclass, a field annotated `object` fails at import.)"""

    def __init__(self, name: str, how: int, item: type, required: bool, default: object,
                 factory: Callable[[], object] | None, setter: Callable[[object, object], None],
                 check: Callable[[str, object], object] | None) -> None:
        self.name, self.how, self.item, self.required = name, how, item, required
        self.default, self.factory, self.setter, self.check = default, factory, setter, check


class Plan:
    """A command type's decoding: its class, its field names, and each field's `Field`."""

    def __init__(self, cls: type, fields: list[Field]) -> None:
        self.cls = cls
        self.fields = fields
        self.names = frozenset(f.name for f in fields)
        self.count = len(fields)


def plan_of(kind: str) -> Plan:
    """The decoding plan of one command type, read from its class once."""
    cls = COMMAND_TYPES[kind]
    hints = get_type_hints(cls)
    fields: list[Field] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        origin, args = get_origin(hint), get_args(hint)
        how, item, check = CHECKED, object, None
        if hint in _PLAIN:
            how, item = EXACT, hint
        elif origin is list and args[0] in _PLAIN:
            how, item = LIST, args[0]
        elif origin is dict and args[0] is str and args[1] in _PLAIN:
            how, item = DICT, args[1]
        else:
            check = checker_of(hint)
        has_default = f.default is not dataclasses.MISSING
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        fields.append(Field(f.name, how, item, not has_default and factory is None,
                            f.default if has_default else None, factory, getattr(cls, f.name).__set__, check))
    return Plan(cls, fields)


_PLANS: dict[str, Plan] = {}


def _list_of(value: list[Any], item: type) -> bool:
    return all(type(x) is item for x in value)


def _dict_of(value: dict[Any, Any], item: type) -> bool:
    return all(type(k) is str and type(x) is item for k, x in value.items())


def decode_plain(plan: Plan, payload: dict[str, Any]) -> object | None:
    """The command `payload` holds, when it is the common case (see the module); None otherwise."""
    if len(payload) > plan.count or not plan.names.issuperset(payload):
        return None
    # each field set as soon as it is checked (no list of values between): a command given up on is dropped
    out: object = object.__new__(plan.cls)
    for f in plan.fields:
        v: Any = payload.get(f.name, _UNSET)
        if v is _UNSET:
            if f.required:
                return None
            factory = f.factory
            v = f.default if factory is None else factory()
        elif f.how == EXACT:
            if type(v) is not f.item:
                return None
        elif f.how == LIST:
            if type(v) is not list or not _list_of(v, f.item):
                return None
            v = list(v)
        elif f.how == DICT:
            if type(v) is not dict or not _dict_of(v, f.item):
                return None
            v = dict(v)
        else:
            check = f.check
            assert check is not None
            v = check(f.name, v)
        f.setter(out, v)
    return out


def decode_shape(kind: str, payload: Mapping[str, Any]) -> Command:
    """Decode a command by its type name; unknown types, unknown or missing fields are named. Equal to
    `command_from_dict_reference` (same command, or the same error)."""
    plan = _PLANS.get(kind)
    if plan is None:
        if kind not in COMMAND_TYPES:
            raise InvalidCommand(f"unknown command type '{kind}'")
        plan = _PLANS[kind] = plan_of(kind)
    cmd = decode_plain(plan, payload) if type(payload) is dict else None
    if cmd is None:
        return command_from_dict_reference(kind, payload)
    return cmd  # type: ignore[return-value]  # an instance of the command class `kind` names


def command_from_dict(kind: str, payload: Mapping[str, Any]) -> Command:
    """The ledger's decoder: `decode_shape`, then the ids the command introduces follow the id pattern
    (`steward.domain.ids`), so a command produced straight onto Kafka cannot name a job `../../x`."""
    command = decode_shape(kind, payload)
    require_new_ids(command)
    return command
