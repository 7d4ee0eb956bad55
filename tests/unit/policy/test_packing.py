"""Gang-aware packing of one-node work (ADR 0013; DESIGN.md "Placement")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.packing import FirmLoad, pack_single
from steward.policy.placement import CapacityIndex
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, placed, running, snapshot, tree


def load_of(jobs, count=4):
    """A best-fit index over `count` 8-GPU nodes holding `jobs`, and its firm load."""
    used: dict[str, int] = {}
    for j in jobs:
        for nid, g in j.placement:
            used[nid] = used.get(nid, 0) + g
    index = CapacityIndex(nodes(count), used, "best_fit")
    return index, FirmLoad(index, jobs, set())


FUNDED = dict(funded=True, protected_for=HOUR, started_at=NOW)
UNFUNDED = dict(funded=False)


@pytest.mark.parametrize(
    ("jobs", "gpus", "expected"),
    [
        # nothing running: plain best fit (topology order)
        ([], 1, "n0"),
        # best fit alone would take n1 (unfunded work only, 2 free): a gang could have it at once;
        # n0 holds funded work and has room
        ([running("f", "a", 4, on="n0", **FUNDED), running("u", "b", 6, on="n1", **UNFUNDED)], 1, "n0"),
        # among firm nodes, best fit
        ([running("f0", "a", 4, on="n0", **FUNDED), running("f1", "a", 6, on="n1", **FUNDED)], 2, "n1"),
        # no firm node has room: a wholly free node before one of unfunded work (best fit's n2)
        ([running("f", "a", 8, on="n0", **FUNDED), running("u", "b", 3, on="n2", **UNFUNDED)], 2, "n1"),
        # and a node of unfunded work only when nothing else holds it
        ([running("f", "a", 8, on="n0", **FUNDED)] + [running(f"u{i}", "b", 3, on=f"n{i}", **UNFUNDED)
                                                     for i in (1, 2, 3)], 2, "n1"),
        # work already leaving is not firm
        ([running("f", "a", 4, on="n0", preemption_requested_at=NOW - 10, **FUNDED),
          running("g", "a", 2, on="n1", **FUNDED)], 4, "n1"),
        # too big for any node: none
        ([running("f", "a", 4, on="n0", **FUNDED)] + [running(f"x{i}", "a", 8, on=f"n{i}", **FUNDED)
                                                      for i in (1, 2, 3)], 5, None),
    ],
)
def test_pack_single(jobs, gpus, expected):
    index, load = load_of(jobs)
    i = pack_single(index, gpus, load)
    assert (index.ids[i] if i >= 0 else None) == expected


def test_a_funded_placement_makes_its_node_firm_and_unfunded_does_not():
    _index, load = load_of([])
    assert load.ready(0) and load.ready(1)
    load.add(((0, 1),), funded=False)
    assert load.ready(0)
    load.add(((1, 1),), funded=True)
    assert not load.ready(1)


def test_small_work_keeps_off_the_node_a_gang_could_take_through_the_cycle():
    # n0: funded work with 2 free; n1: unfunded work only, 1 free. Best fit alone puts the 1-GPU job
    # on n1 (fewest free), which would leave no node a waiting whole-node gang could clear at once.
    jobs = [running("f", "a", 6, on="n0", **FUNDED), running("u", "c", 7, on="n1", **UNFUNDED)]
    snap = dict(nodes=nodes(2), tree=tree(a=0.5, b=0.5), usage={"a": 1e9, "b": 1e9}, running=jobs,
                pending=[pending("small", "b", 1)])
    assert placed(schedule(snapshot(**snap))) == {"small": (("n0", 1),)}
    assert placed(schedule(snapshot(**snap, settings=PolicySettings(gang_packing=False)))) == {
        "small": (("n1", 1),)
    }


@pytest.mark.parametrize("preset", ["ai2", "fair-tree", "fifo-priority"])
def test_the_baselines_do_not_pack(preset):
    assert PolicySettings.preset(preset).gang_packing is False


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 8), st.booleans()), max_size=8),
    st.integers(1, 8),
    st.booleans(),
)
def test_packing_finds_room_exactly_when_best_fit_does_and_never_overcommits(held, gpus, funded):
    """Invariant: packing changes only which fitting node is chosen, never whether one fits."""
    used = [0] * 4
    jobs = []
    for k, (i, g, funded) in enumerate(held):
        g = min(g, 8 - used[i])
        if g == 0:
            continue
        used[i] += g
        jobs.append(running(f"r{k}", "a", g, on=f"n{i}", funded=funded, started_at=NOW))
    index, load = load_of(jobs)
    i = pack_single(index, gpus, load, funded)
    j = index.best_single(gpus)
    assert (i >= 0) == (j >= 0)
    if i >= 0:
        assert index.free[i] >= gpus


@pytest.mark.parametrize(
    ("jobs", "gpus", "expected"),
    [
        # best fit alone would put unfunded work on n0 (firm, 1 free): it keeps beside unfunded work
        ([running("f", "a", 7, on="n0", **FUNDED), running("u", "b", 4, on="n1", **UNFUNDED)], 1, "n1"),
        # no unfunded-only node with room: room on a firm node before breaking a wholly free one
        ([running("f", "a", 7, on="n0", **FUNDED), running("u", "b", 8, on="n1", **UNFUNDED)], 1, "n0"),
        # nothing partly used has room: a wholly free node
        ([running("f", "a", 8, on="n0", **FUNDED), running("u", "b", 8, on="n1", **UNFUNDED)], 1, "n2"),
    ],
)
def test_unfunded_work_keeps_to_gang_ready_nodes(jobs, gpus, expected):
    index, load = load_of(jobs)
    i = pack_single(index, gpus, load, funded=False)
    assert (index.ids[i] if i >= 0 else None) == expected


def packing_rule(index: CapacityIndex, firm: list[int], gpus: int, funded: bool) -> int:
    """ADR 0013 read straight off the page, one walk over every node: the specification that the
    heaps of `FirmLoad` must give the same answer as."""
    n = len(index.free)
    fits = [j for j in range(n) if index.ok[j] and index.free[j] >= gpus]
    if not fits:
        return -1

    def best(cands: list[int]) -> int:
        return min(cands, key=lambda j: (index.free[j], j), default=-1)

    partial = [j for j in fits if index.free[j] < index.cap[j]]
    own = best([j for j in partial if (firm[j] > 0) == funded])
    if own >= 0:
        return own
    whole = [j for j in fits if index.free[j] == index.cap[j]]
    if funded:
        return min(whole) if whole else best(fits)
    return best(partial) if partial else best(fits)


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 8), st.booleans()), max_size=10),
    st.lists(
        st.one_of(
            st.tuples(st.just("place"), st.integers(1, 8), st.booleans()),
            st.tuples(st.just("mask"), st.integers(0, 5), st.booleans()),
        ),
        max_size=25,
    ),
)
def test_packing_follows_the_rule_through_a_cycle(held, steps):
    """Through a cycle's placements and masks (reservations, claims), `pack_single` picks exactly
    the node the rule picks, and the firm load follows every placement."""
    used = [0] * 6
    jobs = []
    for k, (i, g, funded) in enumerate(held):
        g = min(g, 8 - used[i])
        if g:
            used[i] += g
            jobs.append(running(f"r{k}", "a", g, on=f"n{i}", funded=funded, started_at=NOW))
    index, load = load_of(jobs, count=6)
    firm = list(load.firm)
    for kind, a, funded in steps:
        if kind == "mask":
            index.mask(a)
            continue
        i = pack_single(index, a, load, funded)
        assert i == packing_rule(index, firm, a, funded)
        if i < 0:
            continue
        index.take(i, a)
        load.add(((i, a),), funded)
        if funded:
            firm[i] += a
        assert load.firm == firm
