"""One attempt per GPU (steward.executor.fencing, ADR 0058): which placements an executor refuses, and what
it stops before an attempt starts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.executor.fencing import fence, foreign_nodes, gpus_of, refusal, served_nodes, superseded


@dataclass(frozen=True)
class A:
    job_id: str
    attempt: int
    assignments: dict[str, list[int]] = field(default_factory=dict)


@pytest.mark.parametrize(("setting", "nodes", "foreign"), [
    ("", ["n0", "node-19"], []),  # no list: every node placed with it
    ("n0", ["n0"], []),
    ("n0, n1", ["n0", "node-19"], ["node-19"]),
    ("rack7-*", ["rack7-a", "rack8-a"], ["rack8-a"]),
    ("gpu-0[1-3]", ["gpu-02", "gpu-04"], ["gpu-04"]),
])
def test_foreign_nodes(setting: str, nodes: list[str], foreign: list[str]) -> None:
    assert foreign_nodes({n: [0] for n in nodes}, served_nodes(setting)) == foreign


@pytest.mark.parametrize(("placed_for", "served", "want"), [
    ("local", (), None),
    ("local", ("local-0",), None),
    ("sim", (), "was placed for executor 'sim' on node(s) local-0, node-19, not for executor 'local'"),
    ("local", ("local-0",), "is placed on node(s) node-19, which executor 'local' does not serve (it serves local-0)"),
])
def test_refusal_names_the_node_and_the_executor(placed_for: str, served: tuple[str, ...], want: str | None) -> None:
    why = refusal("local", "j", 5, placed_for, {"local-0": [0], "node-19": [7]} if want or not served
                  else {"local-0": [0]}, served)
    if want is None:
        assert why is None
    else:
        assert why is not None and why.startswith("job j attempt 5 ") and want in why


@pytest.mark.parametrize(("live", "start", "stop", "newer"), [
    ([], ("j", 1, {"n": [0]}), [], None),
    ([A("k", 1, {"n": [1]})], ("j", 1, {"n": [0]}), [], None),  # other GPUs: untouched
    ([A("k", 1, {"n": [0, 1]})], ("j", 1, {"n": [1]}), [("k", 1)], None),  # a cancelled or lost holder
    ([A("k", 1, {"m": [1]})], ("j", 1, {"n": [1]}), [], None),  # same index, another node
    ([A("j", 1, {"n": [3]})], ("j", 2, {"n": [0]}), [("j", 1)], None),  # the lost attempt, elsewhere
    ([A("j", 3, {"n": [3]})], ("j", 2, {"n": [0]}), [], 3),  # a stale start of an older attempt
    ([A("j", 2, {"n": [0]})], ("j", 2, {"n": [0]}), [], None),  # itself (a retried start)
    ([A("k", 1, {"n": [0]}), A("j", 1, {"n": [5]}), A("l", 1, {"n": [6]})], ("j", 2, {"n": [0]}),
     [("j", 1), ("k", 1)], None),
])
def test_fence(live: list[A], start: tuple[str, int, dict[str, list[int]]], stop: list[tuple[str, int]],
               newer: int | None) -> None:
    rule = fence(*start, live)
    assert [(r.job_id, r.attempt) for r in rule.stop] == stop
    assert (rule.newer.attempt if rule.newer is not None else None) == newer


def test_superseded_keeps_the_highest_attempt_of_each_job() -> None:
    live = [A("j", 1), A("j", 3), A("j", 2), A("k", 1)]
    assert [(r.job_id, r.attempt) for r in superseded(live)] == [("j", 1), ("j", 2)]


placements = st.dictionaries(st.sampled_from(["n0", "n1"]), st.lists(st.integers(0, 3), min_size=1, max_size=2,
                                                                   unique=True), min_size=1, max_size=2)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 3), placements), max_size=12))
def test_whatever_the_order_of_starts_one_attempt_per_gpu_and_one_per_job(
        starts: list[tuple[str, int, dict[str, list[int]]]]) -> None:
    """Apply each start as the executor does (stop what the rule says, or refuse): the live set never holds
    two attempts on one GPU, nor two attempts of one job."""
    live: list[A] = []
    for job, attempt, where in starts:
        if any((r.job_id, r.attempt) == (job, attempt) for r in live):
            continue  # already runs: a retried start changes nothing
        rule = fence(job, attempt, where, live)
        if rule.newer is not None:
            continue
        gone = {(r.job_id, r.attempt) for r in rule.stop}
        live = [r for r in live if (r.job_id, r.attempt) not in gone] + [A(job, attempt, where)]
        held = [g for r in live for g in gpus_of(r.assignments)]
        assert len(held) == len(set(held))
        assert len({r.job_id for r in live}) == len(live)
