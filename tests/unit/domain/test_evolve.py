"""`steward.domain.state.replace` (the fast copy `evolve` folds with) builds exactly what
`dataclasses.replace` builds, for every state class and any set of changed fields."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain import state
from steward.domain.state import AllocationNode, ClusterNode, Job, LedgerState, _replace_job, replace


def values_for(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a field's declared type: the compiled build (ADR 0020) checks each field's type when a
    record is built, as the pure one does not, so a copy is given only what the record may hold."""
    if typing.get_origin(hint) is dict:
        return st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
    if hint is float:
        return st.floats(allow_nan=False)
    if hint == float | None:
        return st.floats(allow_nan=False) | st.none()
    return st.from_type(hint)


def _declared_module() -> Any:
    """state.py's classes as declared: loaded from the source under another name, because a compiled
    class reports only approximate annotations (`type` for `str | None`)."""
    spec = importlib.util.spec_from_file_location("_state_as_declared", Path(state.__file__).parent / "state.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the annotations through it
    spec.loader.exec_module(module)
    return module


DECLARED = _declared_module()


def field_values(cls: type) -> dict[str, st.SearchStrategy[Any]]:
    hints = typing.get_type_hints(getattr(DECLARED, cls.__name__))
    return {f.name: values_for(hints[f.name]) for f in dataclasses.fields(cls)}


jobs = st.builds(Job, job_id=st.text(max_size=4), project=st.text(max_size=4), gpus=st.integers(0, 8),
                 min_runtime_s=st.floats(0, 1e5), command=st.tuples(st.text(max_size=3)), resumable=st.booleans(),
                 job_class=st.sampled_from(["batch", "interactive"]), priority=st.integers(-3, 3),
                 submitted_at=st.floats(0, 1e10), state=st.sampled_from(["QUEUED", "RUNNING", "COMPLETED"]),
                 started_at=st.none() | st.floats(0, 1e10))
objects = st.one_of(
    jobs,
    st.builds(AllocationNode, st.text(max_size=4), st.text(max_size=4), st.floats(0, 1)),
    st.builds(ClusterNode, st.text(max_size=4), st.integers(1, 8), st.text(max_size=4),
              st.tuples(st.text(max_size=3)), st.text(max_size=4)),
    st.builds(LedgerState, st.dictionaries(st.text(max_size=3), st.builds(AllocationNode, st.text(), st.text(),
                                                                           st.floats(0, 1)), max_size=2)),
)


@given(objects, st.data())
def test_replace_equals_dataclasses_replace(obj: Any, data: st.DataObject) -> None:
    names = [f.name for f in dataclasses.fields(obj)]
    changed = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    strategies = field_values(type(obj))
    changes = {name: data.draw(strategies[name]) for name in changed}
    fast, reference = replace(obj, **changes), dataclasses.replace(obj, **changes)
    assert type(fast) is type(reference)
    assert fast == reference
    assert [getattr(fast, n) for n in names] == [getattr(reference, n) for n in names]
    assert fast is not obj and replace(obj) == obj


def test_an_unknown_field_is_refused() -> None:
    node = AllocationNode("a", "cluster", 0.5)
    with pytest.raises(TypeError):
        dataclasses.replace(node, shared=0.1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        replace(node, shared=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace(node).share = 0.1  # type: ignore[misc]


@given(jobs, st.data())
def test_the_job_copy_equals_dataclasses_replace(job: Job, data: st.DataObject) -> None:
    """`_replace_job` names every field by hand: each one lands in its own field, changed or kept."""
    names = [f.name for f in dataclasses.fields(Job)]
    changed = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    strategies = field_values(Job)
    changes = {name: data.draw(strategies[name]) for name in changed}
    fast, reference = _replace_job(job, **changes), dataclasses.replace(job, **changes)
    assert [getattr(fast, n) for n in names] == [getattr(reference, n) for n in names]
    marks = {name: data.draw(strategy) for name, strategy in strategies.items()}
    marked = _replace_job(job, **marks)
    assert [getattr(marked, n) for n in names] == [marks[n] for n in names]
    with pytest.raises(TypeError, match="shared"):
        _replace_job(job, shared=1)
