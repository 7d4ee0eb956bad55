"""`command_to_dict`: a command's fields as `dataclasses.asdict` gives them, compiled (`steward.native`).

Its home is here, not in `steward.domain.commands` (which re-exports it), because that module stays pure:
mypyc mis-compiles the commands' `ClassVar` fields (mypyc#1122). It is on the ledger's path once per
submission (`submitted_fields`, the `JobSubmitted` payload): compiled, the fields are read and copied by
native code instead of a function generated as Python source per command class (issue 20's ingest pairs,
docs/benchmarks.md). It needs only the dataclass fields, so it imports nothing of the domain.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


class NotPlain(Exception):
    """A value only `dataclasses.asdict` copies (a dataclass, a set, ...)."""


_NAMES: dict[type, tuple[str, ...]] = {}


def plain(value: Any) -> Any:
    """A copy of `value` as `asdict` makes it, for scalars and lists, tuples and dicts of them."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:  # a scalar item kept without a call (a command's list is of strings)
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if kind is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    if kind is tuple:
        return tuple([plain(v) for v in value])
    raise NotPlain


def field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names in order, read once per class."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple([f.name for f in dataclasses.fields(cls)])
    return names


def command_to_dict(command: Any) -> dict[str, Any]:
    """`dataclasses.asdict(command)`, without its generic deep copy when every value is a scalar or a
    list, tuple or dict of them (every command the ledger decodes); anything else goes through `asdict`
    itself. Equal to `asdict` (tests/unit/domain/test_command_codec.py)."""
    out: dict[str, Any] = {}
    try:
        for name in field_names(type(command)):
            v = getattr(command, name)
            out[name] = v if type(v) in _SCALARS else plain(v)
    except NotPlain:
        return dataclasses.asdict(command)
    return out
