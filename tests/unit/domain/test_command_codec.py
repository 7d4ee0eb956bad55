"""The ledger's command codec: the fast `command_to_dict` equals `dataclasses.asdict`, and decoding what
it encodes gives the command back (every command type, Hypothesis-generated values)."""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.commands import COMMAND_TYPES, SubmitJob, command_from_dict, command_to_dict
from steward.domain.errors import InvalidCommand

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return json_values
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is type(None):
        return st.none()
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(strategy_for(args[0]), strategy_for(args[1]), max_size=3)
    if origin is types.UnionType:
        return st.one_of(*[strategy_for(a) for a in args])
    return st.from_type(hint)


def command_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    return st.builds(cls, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(cls)})


any_command = st.one_of(*[command_strategy(cls) for cls in COMMAND_TYPES.values()])


@settings(max_examples=300)
@given(any_command)
def test_command_to_dict_equals_asdict_and_decodes_back(command: Any) -> None:
    encoded = command_to_dict(command)
    assert encoded == dataclasses.asdict(command)
    assert all(type(encoded[k]) is type(v) for k, v in dataclasses.asdict(command).items())
    assert command_from_dict(command.TYPE, encoded) == command


@given(st.lists(st.text(max_size=3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=3))
def test_encoded_containers_are_copies(argv: list[str], evidence: dict[str, int]) -> None:
    cmd = SubmitJob("j", "p", 1, 1.0, argv)
    encoded = command_to_dict(cmd)
    encoded["command"].append("changed")
    assert cmd.command == argv and encoded["command"] is not cmd.command


@pytest.mark.parametrize(("field", "value", "named"), [
    ("gpus", "2", "field 'gpus' must be int"),
    ("gpus", True, "field 'gpus' must be int"),
    ("min_runtime_s", "600", "field 'min_runtime_s' must be a number"),
    ("command", ["ok", 3], "field 'command[1]' must be str"),
    ("command", "python x.py", "field 'command' must be a list"),
    ("resumable", 1, "field 'resumable' must be bool"),
])
def test_the_fast_checks_still_name_the_bad_field(field: str, value: Any, named: str) -> None:
    payload = command_to_dict(SubmitJob("j", "p", 1, 600.0, ["python"])) | {field: value}
    with pytest.raises(InvalidCommand, match=named.replace("[", r"\[").replace("]", r"\]")):
        command_from_dict("SubmitJob", payload)


def test_an_integer_number_is_accepted_as_a_float() -> None:
    payload = command_to_dict(SubmitJob("j", "p", 1, 600.0, ["python"])) | {"min_runtime_s": 600}
    decoded = command_from_dict("SubmitJob", payload)
    assert isinstance(decoded, SubmitJob)
    assert type(decoded.min_runtime_s) is float and math.isclose(decoded.min_runtime_s, 600.0)
