"""`phase2_order.sizes_and_suffix_min`: the order's job sizes and the smallest job at or after each position,
which the walk uses to stop once nothing left can fit (docs/benchmarks.md "Simulator", round 5)."""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.policy.model import PendingJob
from steward.policy.phases.phase2_order import sizes_and_suffix_min
from tests.unit.policy.builders import pending

SENTINEL = 1 << 62


def jobs_of(sizes: list[int]) -> list[PendingJob]:
    return [pending(f"j{i}", "a", g, submitted_at=i) for i, g in enumerate(sizes)]


@pytest.mark.parametrize(
    ("sizes", "suffix"),
    [
        ([], [SENTINEL]),
        ([4], [4, SENTINEL]),
        ([8, 2, 4], [2, 2, 4, SENTINEL]),
        ([1, 16, 16, 8], [1, 8, 8, 8, SENTINEL]),
        ([3, 3, 3], [3, 3, 3, SENTINEL]),
    ],
)
def test_sizes_and_suffix_min(sizes: list[int], suffix: list[int]) -> None:
    assert sizes_and_suffix_min(jobs_of(sizes)) == (sizes, suffix)


@given(st.lists(st.integers(1, 128), max_size=40))
def test_equals_the_running_minimum_from_the_end(sizes: list[int]) -> None:
    want = list(accumulate(reversed(sizes), min))
    want.reverse()
    assert sizes_and_suffix_min(jobs_of(sizes)) == (sizes, [*want, SENTINEL])
