"""The allocation history folds `AllocationsSet` with the ledger's own rule: each row's "before" is the
previous row's "after" for that allocation, and the last "after" is what the ledger's state holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steward.domain.allocation_history import AllocationsSetRecord, allocation_changes
from steward.domain.events import Event
from steward.domain.state import LedgerState, evolve

CHILDREN = ["a", "b", "c"]

payloads = st.lists(st.fixed_dictionaries({
    "parent": st.just("cluster"),
    "shares": st.dictionaries(st.sampled_from(CHILDREN), st.sampled_from([0.1, 0.2, 0.3])),
    "reason": st.sampled_from(["x", "y"]),
    "debug_quotas": st.dictionaries(st.sampled_from(CHILDREN), st.one_of(st.none(), st.integers(0, 8))),
}), max_size=8)


@given(payloads)
def test_before_is_the_previous_after_and_the_last_after_is_the_ledgers(ps: list[dict[str, Any]]) -> None:
    records = [AllocationsSetRecord(i + 1, 100.0 + i, "maria", p) for i, p in enumerate(ps)]
    rows = allocation_changes(records)
    state = LedgerState()
    for i, p in enumerate(ps):
        state = evolve(state, Event("allocation-cluster", "AllocationsSet", p), 100.0 + i)
    last: dict[str, tuple[float, int | None]] = {}
    for r in rows:
        if r.allocation in last:
            assert (r.share_before, r.debug_quota_before) == last[r.allocation]
        else:
            assert (r.share_before, r.debug_quota_before) == (None, None)
        last[r.allocation] = (r.share_after, r.debug_quota_after)
    assert last == {n: (a.share, a.debug_quota_gpus) for n, a in state.allocations.items()}


def test_a_quota_only_change_keeps_the_share_and_a_v1_payload_has_no_quotas() -> None:
    rows = allocation_changes([
        AllocationsSetRecord(1, 1.0, "root", {"parent": "cluster", "shares": {"a": 0.5}, "reason": "setup"}),
        AllocationsSetRecord(2, 2.0, "maria", {"parent": "cluster", "shares": {}, "reason": "debug",
                                               "debug_quotas": {"a": 4, "ghost": 2}}),
    ])
    assert [(r.position, r.allocation, r.share_before, r.share_after, r.debug_quota_before, r.debug_quota_after,
             r.debug_quota_set, r.actor) for r in rows] == [
        (1, "a", None, 0.5, None, None, False, "root"),
        (2, "a", 0.5, 0.5, None, 4, True, "maria"),
    ]
