"""The reservation walk (`NodeReleases` once a cycle, `GangReleases` per gang) plans the same reservation as the
per-gang lists it replaced (issue 18: the 10,000-node cycle), on random clusters.

`_reference_plan` is the code before the change, kept here as the oracle: each gang materialised, per node, the
(release time, GPUs) of every running job and of this cycle's placements, a job the gang may not preempt at
math.inf, then sorted each node's list (the choice of a domain from the times nodes are whole, which did not
change, is the policy's own `soonest_domain`). The walk takes each node's jobs in the cycle's order, skips those the
gang may not preempt and stops as soon as the gang's GPUs are found (or the node can no longer be the soonest).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import grace_ends_at, in_grace, is_protected
from steward.policy.model import Node, PendingJob, RunningJob
from steward.policy.placement import CapacityIndex
from steward.policy.reservation import (
    GangReleases,
    NodeReleases,
    ReservationPlan,
    plan_reservation,
    soonest_domain,
)

NOW = 100_000.0
PROJECTS = ("a", "b", "c", "d")


def _release_time(
    job: RunningJob, now: float, s: PolicySettings, leaving: bool, may_preempt: Callable[[RunningJob], bool]
) -> float:
    if leaving:
        return now
    if in_grace(job):
        return max(now, grace_ends_at(job, s))
    if not job.funded:
        return now if s.funding else math.inf
    if not (s.fairness_preemption and s.preemptible_after_protection):
        return math.inf
    if not may_preempt(job):
        return math.inf
    return job.protected_until if is_protected(job, now) else now


def _reference_plan(
    job: PendingJob, index: CapacityIndex, on_node: list[list[tuple[float, int]]], now: float, maxcap: int | None
) -> ReservationPlan | None:
    g = job.gpus
    best: tuple[float, int, int] | None = None
    if g <= (index.maxcap if maxcap is None else maxcap):
        for i in range(len(index.ids)):
            if not index.ok[i] or index.cap[i] < g:
                continue
            acc = index.free[i]
            t = now
            for rt, gpus in sorted(on_node[i]):
                if acc >= g:
                    break
                acc += gpus
                t = rt
            if acc < g or t == math.inf:
                continue
            key = (t, 0, i)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        i = best[2]
        return ReservationPlan((i,), len(index.nodes[i].path) + 1, (*index.nodes[i].path, index.ids[i]), best[0])
    clear: list[tuple[float, int]] = []
    for i in range(len(index.ids)):
        if not index.ok[i] or index.cap[i] == 0:
            continue
        t = max((rt for rt, _ in on_node[i]), default=now)
        if t != math.inf:
            clear.append((max(t, now), i))
    clear.sort()
    return soonest_domain(job, index, clear)


# a few distinct times, so that ties between jobs, nodes and domains are common
TIMES = st.sampled_from([NOW - 600.0, NOW, NOW + 60.0, NOW + 600.0, NOW + 3600.0, NOW + 7200.0])


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(1, 10))
    caps = draw(st.lists(st.sampled_from([0, 2, 4, 8, 8]), min_size=n, max_size=n))
    nodes = tuple(Node(f"n{i}", caps[i], "default", (f"s{i // 4}", f"b{i // 2}"), "ready") for i in range(n))
    free = list(caps)
    running: list[RunningJob] = []
    for k in range(draw(st.integers(0, 3 * n))):
        hosts = [i for i in range(n) if free[i] > 0]
        if not hosts:
            break
        first = draw(st.sampled_from(hosts))
        spread = [first] + ([draw(st.sampled_from(hosts))] if draw(st.integers(0, 3)) == 0 else [])
        placement: list[tuple[str, int]] = []
        for i in dict.fromkeys(spread):
            g = draw(st.integers(1, free[i]))
            free[i] -= g
            placement.append((f"n{i}", g))
            if free[i] and draw(st.integers(0, 5)) == 0:  # a node named twice in one placement
                g = draw(st.integers(1, free[i]))
                free[i] -= g
                placement.append((f"n{i}", g))
        funded = draw(st.booleans())
        started = NOW - 3600.0
        running.append(
            RunningJob(
                id=f"r{k}",
                project=draw(st.sampled_from(PROJECTS)),
                gpus=sum(g for _, g in placement),
                placement=tuple(placement),
                started_at=started,
                protected_until=draw(TIMES) if funded else started,
                funded=funded,
                preemption_requested_at=draw(st.one_of(st.none(), TIMES.map(lambda t: t - 100.0))),
            )
        )
    leaving = {r.id for r in running if draw(st.integers(0, 4)) == 0}
    consents = frozenset(draw(st.sets(st.sampled_from(PROJECTS))))
    # this cycle's placements: (node, GPUs, release time for the gang), on what is still free
    extra: list[tuple[int, int, float]] = []
    for _ in range(draw(st.integers(0, 3))):
        hosts = [i for i in range(n) if free[i] > 0]
        if not hosts:
            break
        i = draw(st.sampled_from(hosts))
        g = draw(st.integers(1, free[i]))
        free[i] -= g
        extra.append((i, g, draw(st.one_of(TIMES, st.just(math.inf)))))
    s = PolicySettings(
        funding=draw(st.booleans()),
        fairness_preemption=draw(st.booleans()),
        preemptible_after_protection=draw(st.sampled_from([True, True, False])),
    )
    return {
        "nodes": nodes,
        "free": free,
        "running": running,
        "leaving": leaving,
        "consents": consents,
        "extra": extra,
        "settings": s,
        "masked": draw(st.sets(st.integers(0, n - 1), max_size=n // 2)),
        "gpus": draw(st.sampled_from([1, 2, 4, 8, 12, 16, 24, 32])),
        "depth": draw(st.sampled_from([None, 0, 1, 2])),
        "maxcap": draw(st.sampled_from([None, None, 4, 8])),
    }


def _index(c: dict[str, object]) -> CapacityIndex:
    nodes = c["nodes"]
    free = c["free"]
    assert isinstance(nodes, tuple) and isinstance(free, list)
    index = CapacityIndex(nodes, {nd.id: nd.gpus - f for nd, f in zip(nodes, free, strict=True)}, "best_fit")
    masked = c["masked"]
    assert isinstance(masked, set)
    for i in masked:
        index.mask(i)
    return index


@settings(max_examples=600, deadline=None)
@given(clusters())
@example(
    {  # a node whose only room is behind a job the gang may not preempt loses to a later, slower one
        "nodes": (Node("n0", 8, "default", ("s0", "b0")), Node("n1", 8, "default", ("s0", "b0"))),
        "free": [0, 0],
        "running": [
            RunningJob("x", "b", 8, (("n0", 8),), NOW - 3600.0, NOW, True),
            RunningJob("y", "a", 8, (("n1", 8),), NOW - 3600.0, NOW + 600.0, True),
        ],
        "leaving": set(),
        "consents": frozenset({"a"}),
        "extra": [],
        "settings": PolicySettings(),
        "masked": set(),
        "gpus": 8,
        "depth": None,
        "maxcap": None,
    }
)
def test_the_walk_plans_the_reservation_the_per_gang_lists_planned(c: dict[str, object]) -> None:
    nodes, running, leaving, consents, extra, s = (
        c["nodes"],
        c["running"],
        c["leaving"],
        c["consents"],
        c["extra"],
        c["settings"],
    )
    assert isinstance(nodes, tuple) and isinstance(running, list) and isinstance(leaving, set)
    assert isinstance(consents, frozenset) and isinstance(extra, list) and isinstance(s, PolicySettings)
    gpus, depth, maxcap = c["gpus"], c["depth"], c["maxcap"]
    assert isinstance(gpus, int) and (depth is None or isinstance(depth, int))
    assert maxcap is None or isinstance(maxcap, int)
    job = PendingJob("gang", "z", gpus, 0.0, 3600.0, topology_depth=depth)
    index = _index(c)

    on_node: list[list[tuple[float, int]]] = [[] for _ in index.ids]
    for r in running:
        t = _release_time(r, NOW, s, r.id in leaving, lambda v: v.project in consents)
        for nid, g in r.placement:
            on_node[index.pos[nid]].append((t, g))
    for i, g, t in extra:
        on_node[index.pos[f"n{i}"]].append((t, g))
    expected = _reference_plan(job, index, on_node, NOW, maxcap)
    event(f"{'one node' if len(expected.nodes) == 1 else 'several nodes'}" if expected else "no reservation")

    asked: list[str] = []

    def may_preempt(project: str, _cluster: str | None) -> bool:
        asked.append(project)
        return project in consents

    walk = GangReleases(NodeReleases(index.pos, len(index.ids), running, NOW, s, leaving), may_preempt)
    for i, g, t in extra:
        walk.add(index.pos[f"n{i}"], t, g)
    assert plan_reservation(job, index, walk, maxcap) == expected
    assert len(asked) == len(set(asked))  # each project's consent is asked once per gang
