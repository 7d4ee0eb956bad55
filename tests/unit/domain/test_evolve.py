"""`steward.domain.state.replace` (the fast copy `evolve` folds with) builds exactly what
`dataclasses.replace` builds, for every state class and any set of changed fields."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.state import AllocationNode, ClusterNode, Job, LedgerState, replace

values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4) | st.tuples(
    st.text(max_size=3))
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
    changes = {name: data.draw(values) for name in changed}
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
