"""The command a recorded decision decided, read back from the log (DESIGN.md "Every decision has evidence":
"replaying the log through the same policy code reproduces every decision").

A decision is recorded as the events one command produced. Most events carry their command's fields under
the same names, so the command is read back from the events themselves; where they do not (a field the
decision rewrote, such as a started_at of 0 that became the time it was decided), the ledger also stores
the message's own payload in the metadata (`input`), and the replay decodes that. `carries_its_command`
is the ledger's test for "the events alone give the command back", so the rule for when the input is
stored and the reading of it live in one place.

Logs written before the ledger stored `input` for such decisions (every accepted decision of releases up
to 0.1.0 wrote none) are read through the same function: where the events do not give the exact command,
they give one that decides the same way, which `tests/replay/test_old_logs.py` holds on a stored log.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_origin, get_type_hints

from steward.domain.commands import COMMAND_TYPES, Command, ExplainWaiting, command_from_dict
from steward.domain.errors import DomainError

# Fields that an event records under another name: command type -> {command field: payload key}.
# `PolicySet` records the settings the command changed as `changed` (and all the settings in force as
# `settings`).
RENAMED: dict[str, dict[str, str]] = {"SetPolicy": {"settings": "changed"}}

# Commands whose decision records one event per item of one field: command type -> (field, the item's key
# in each event, the item's value in each event). `ExplainWaiting` records one `JobDeferred` per job still
# waiting; an explanation for a job that was no longer waiting recorded nothing, and deciding without it
# gives the same events.
SPREAD: dict[str, tuple[str, str, str]] = {ExplainWaiting.TYPE: ("explanations", "job_id", "explanation")}


class UnreadableCommand(ValueError):
    """A recorded decision whose command cannot be read back; the message says what is missing."""


_NO_DEFAULT: Any = object()


@functools.cache
def _fields(kind: str) -> tuple[tuple[str, str, bool, Any], ...]:
    """(field name, its key in the event, whether it takes None, its default or `_NO_DEFAULT`) of a command
    type's fields, in declaration order."""
    cls = COMMAND_TYPES[kind]
    hints = get_type_hints(cls)
    renamed = RENAMED.get(kind, {})
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        takes_none = hint is Any or (get_origin(hint) is types.UnionType and type(None) in get_args(hint))
        default = (f.default if f.default is not dataclasses.MISSING
                   else f.default_factory() if f.default_factory is not dataclasses.MISSING else _NO_DEFAULT)
        out.append((f.name, renamed.get(f.name, f.name), takes_none, default))
    return tuple(out)


def command_from_events(kind: str, payloads: Sequence[Mapping[str, Any]]) -> Command:
    """The command of type `kind` that a decision recorded as events with these payloads (in order, already
    at their current schema version) decided. A field the events record as None where the command takes
    none falls back to its default, as the message that left it out would have. Raises
    `UnreadableCommand` naming what is missing."""
    if kind not in COMMAND_TYPES:
        raise UnreadableCommand(f"the metadata names no known command ({kind!r})")
    if not payloads:
        raise UnreadableCommand(f"{kind}: the decision recorded no event to read the command from")
    spread = SPREAD.get(kind)
    if spread is not None:
        name, key, value = spread
        items: dict[str, Any] = {}
        for p in payloads:
            if key not in p or value not in p:
                raise UnreadableCommand(f"{kind}: an event of the decision has no '{key}' and '{value}'")
            items[p[key]] = p[value]
        values: dict[str, Any] = {name: items}
    else:
        first = payloads[0]
        values = {}
        for name, key, takes_none, _ in _fields(kind):
            if key in first and (first[key] is not None or takes_none):
                values[name] = first[key]
    try:
        return command_from_dict(kind, values)
    except DomainError as err:
        raise UnreadableCommand(str(err)) from None


def carries_its_command(command: Command, payloads: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `command_from_events` gives `command` back from the payloads of the events it was decided
    into; when not, the ledger stores the message's payload with them. It runs for every message the ledger
    decides, so it compares field by field what `command_from_events` would read (a value of the field's
    own type, equal to it; a field the events leave out at its default) without building a command: when it
    says yes, `command_from_events` gives an equal command (tests/unit/domain/test_recorded.py); a no where
    reading back would have worked only stores the input needlessly."""
    if not payloads:
        return False
    kind = command.TYPE
    spread = SPREAD.get(kind)
    if spread is not None:
        name, key, value = spread
        items: dict[str, Any] = {}
        for p in payloads:
            if key not in p or value not in p:
                return False
            items[p[key]] = p[value]
        return bool(items == getattr(command, name))
    first = payloads[0]
    for name, key, takes_none, default in _fields(kind):
        have = getattr(command, name)
        got = first.get(key, _NO_DEFAULT)
        if got is _NO_DEFAULT or (got is None and not takes_none):
            if default is _NO_DEFAULT or have != default:
                return False
        elif type(got) is not type(have) or got != have:
            return False
    return True
