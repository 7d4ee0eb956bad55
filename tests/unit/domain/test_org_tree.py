"""The org tree's shape rules, one home (steward.domain.org_tree): shares in [0, 1], children's shares summing to
at most 1 within the float slack, debug quotas in whole GPUs >= 0."""

from __future__ import annotations

import math

import pytest

from steward.domain.org_tree import children_shares_fit, debug_quota_problem, share_in_unit_interval

SHARES: list[tuple[float, bool]] = [
    (0.0, True), (0.5, True), (1.0, True), (-0.0, True),
    (-1e-12, False), (1.0000001, False), (1.5, False), (-0.1, False), (math.nan, False), (math.inf, False),
]


@pytest.mark.parametrize(("share", "ok"), SHARES)
def test_a_share_is_a_fraction_in_the_unit_interval(share: float, ok: bool) -> None:
    assert share_in_unit_interval(share) is ok


SUMS: list[tuple[str, list[float], bool]] = [
    ("none", [], True),
    ("exactly one", [0.6, 0.4], True),
    ("decimal fractions a float rounds over 1", [0.1, 0.2, 0.7], True),
    ("under one", [0.3, 0.3], True),
    ("over one", [0.7, 0.5], False),
    ("just over the slack", [1.0, 2e-9], False),
]


@pytest.mark.parametrize(("name", "shares", "ok"), SUMS, ids=[s[0] for s in SUMS])
def test_the_children_of_one_node_share_at_most_all_of_it(name: str, shares: list[float], ok: bool) -> None:
    assert children_shares_fit(sum(shares)) is ok


QUOTAS: list[tuple[object, str | None]] = [
    (0, None), (3, None), (1024, None),
    (-1, "must be >= 0 GPUs"), (1.5, "must be a whole number of GPUs"), (2.0, "must be a whole number of GPUs"),
    (True, "must be a whole number of GPUs"), ("2", "must be a whole number of GPUs"),
]


@pytest.mark.parametrize(("gpus", "problem"), QUOTAS)
def test_a_debug_quota_is_a_whole_number_of_gpus(gpus: object, problem: str | None) -> None:
    assert debug_quota_problem(gpus) == problem
