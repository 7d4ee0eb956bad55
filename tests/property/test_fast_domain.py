"""The domain's fast paths build exactly what their references build: the decoder generated per command
type and the compiled one against `command_from_dict_reference` (same command with the same field types, or
the same error), and a submitted job's record against `Job(...)`."""

from __future__ import annotations

import dataclasses
from typing import Any, get_args, get_origin, get_type_hints

from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.commands import COMMAND_TYPES, command_from_dict, command_from_dict_reference
from steward.domain.decoding import decode_shape as compiled_command_from_dict
from steward.domain.errors import DomainError
from steward.domain.events import Event
from steward.domain.state import AllocationNode, Job, LedgerState, evolve_job

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(
    max_size=5)
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(
    st.text(max_size=4), c, max_size=3), max_leaves=8)


def typed(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a field's own type (the common case the fast decoder takes)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is str:
        return st.text(max_size=6)
    if hint is int:
        return st.integers(-5, 10**6)
    if hint is float:
        return st.floats(allow_nan=False) | st.integers(-5, 5)
    if hint is bool:
        return st.booleans()
    if origin is list:
        return st.lists(typed(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(typed(args[0]), typed(args[1]), max_size=3)
    if args and type(None) in args:
        return st.none() | typed(next(a for a in args if a is not type(None)))
    return json_values


def same(a: Any, b: Any) -> bool:
    """Equal with equal types all the way down (1 == 1.0 would hide an int kept where a float belongs)."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@st.composite
def payloads(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(COMMAND_TYPES)))
    cls = COMMAND_TYPES[kind]
    hints = get_type_hints(cls)
    payload: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        shape = draw(st.sampled_from(["typed", "typed", "typed", "typed", "missing", "any"]))
        if shape == "typed":
            payload[f.name] = draw(typed(hints[f.name]))
        elif shape == "any":
            payload[f.name] = draw(json_values)
    if draw(st.integers(0, 9)) == 0:
        payload[draw(st.text(max_size=6))] = draw(json_values)
    keys = draw(st.permutations(list(payload)))
    return kind, {k: payload[k] for k in keys}


def decode(decoder: Any, kind: str, payload: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", decoder(kind, payload)
    except DomainError as err:
        return type(err).__name__, str(err)


@settings(max_examples=3000)
@given(payloads(), st.sampled_from([command_from_dict, compiled_command_from_dict]))
def test_the_fast_decoders_equal_the_reference(case: tuple[str, dict[str, Any]], decoder: Any) -> None:
    """The decoder generated per type (`commands.command_from_dict`, for replay) and the compiled one the
    ledger decodes with (`decoding.decode_shape`, ADR 0027; its `command_from_dict` adds the id rule)."""
    kind, payload = case
    fast, reference = decode(decoder, kind, payload), decode(command_from_dict_reference, kind, payload)
    assert fast[0] == reference[0]
    assert same(fast[1], reference[1])
    if fast[0] == "ok":  # containers are copies, not the message's own
        for f in dataclasses.fields(fast[1]):
            value = getattr(fast[1], f.name)
            if isinstance(value, list | dict) and f.name in payload:
                assert value is not payload[f.name]


def test_an_unknown_type_is_named() -> None:
    assert decode(command_from_dict, "Nope", {}) == decode(command_from_dict_reference, "Nope", {})
    assert decode(compiled_command_from_dict, "Nope", {}) == decode(command_from_dict_reference, "Nope", {})


@given(st.text(max_size=5), st.text(max_size=5), st.integers(1, 8), st.floats(0, 3e4), st.lists(st.text(max_size=4)),
       st.booleans(), st.sampled_from(["batch", "debug", "interactive"]), st.integers(-3, 3), st.floats(0, 1e10),
       st.none() | st.text(max_size=4), st.none() | st.text(max_size=4), st.none() | st.text(max_size=4))
def test_a_submitted_job_is_the_record_job_builds(job_id: str, project: str, gpus: int, runtime: float,
                                                  command: list[str], resumable: bool, job_class: str,
                                                  priority: int, at: float, resume_from: str | None,
                                                  restored_from: str | None, preferred: str | None) -> None:
    payload: dict[str, Any] = {"job_id": job_id, "project": project, "gpus": gpus, "min_runtime_s": runtime,
                               "command": command, "resumable": resumable, "job_class": job_class,
                               "priority": priority, "submitted_at": at}
    extra = {"resume_from": resume_from, "restored_from": restored_from, "preferred_node": preferred}
    payload |= {k: v for k, v in extra.items() if v is not None}
    step = evolve_job(None, {}, Event(f"job-{job_id}", "JobSubmitted", payload), at)
    assert step is not None
    expected = Job(job_id, project, gpus, runtime, tuple(command), resumable, job_class, priority, at,
                   resume_from=resume_from, restored_from=restored_from, preferred_node=preferred)
    assert same(step[0], expected)


names = st.sampled_from(["cluster", "a", "b", "c", "d"])


@given(st.dictionaries(names, names, max_size=5), names)
def test_is_project_is_a_leaf_of_the_tree(parents: dict[str, str], name: str) -> None:
    state = LedgerState(allocations={n: AllocationNode(n, p, 0.1) for n, p in parents.items()})
    assert state.is_project(name) == (name in state.allocations and not state.children(name))
