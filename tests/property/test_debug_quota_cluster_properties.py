"""Invariants of the debug quota per cluster (issue 25, ADR 0073): debug use on a cluster never exceeds what the
rule allows there, even if the lane placed every qualified job on that cluster; with one cluster the rule is the
one-quota rule of ADR 0029; the parts cover the quota."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.debug_quota import (
    before,
    cluster_quotas,
    counts_as_debug_use,
    qualify,
    qualify_all_clusters,
    qualify_clusters,
)
from steward.policy.model import PendingJob, RunningJob

S = PolicySettings.steward()
EXAMPLES = settings(deadline=None)
PROJECTS = ("a", "b")
CLUSTERS = ("ceres", "jupiter")
NODE = {"ceres": "c0", "jupiter": "j0"}
ON = {"c0": "ceres", "j0": "jupiter"}


def _pending(draw: Callable[[st.SearchStrategy[Any]], Any], id: str, at: float) -> PendingJob:
    return PendingJob(
        id=id, project=draw(st.sampled_from(PROJECTS)), gpus=draw(st.sampled_from([1, 1, 2, 4])), submitted_at=at,
        min_runtime_s=draw(st.sampled_from([0.0, 600.0, 600.0, 3600.0])),
        klass=draw(st.sampled_from(["debug", "debug", "interactive", "batch"])),
        clusters=draw(st.sampled_from([(), (), ("ceres",), ("jupiter",)])),
    )


def accepts_of(job: PendingJob) -> tuple[str, ...]:
    return job.clusters or CLUSTERS


def cluster_of(r: RunningJob) -> str:
    return ON[r.placement[0][0]]


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[RunningJob], list[PendingJob]]:
    jobs = [_pending(draw, f"j{i:02d}", float(draw(st.integers(0, 20)))) for i in range(draw(st.integers(0, 14)))]
    running: list[RunningJob] = []
    waiting: list[PendingJob] = []
    for job in jobs:
        if draw(st.booleans()):
            on = NODE[draw(st.sampled_from(accepts_of(job)))]
            r = RunningJob(job.id, job.project, job.gpus, ((on, job.gpus),), 1e6, 1e6 + 600.0, True,
                           klass=job.klass, submitted_at=job.submitted_at, min_runtime_s=job.min_runtime_s)
            running.append(replace(r, preemption_requested_at=1e6) if draw(st.integers(0, 4)) == 0 else r)
        else:
            waiting.append(job)
    return running, waiting


parts_st = st.fixed_dictionaries({c: st.integers(0, 8) for c in CLUSTERS})


@EXAMPLES
@given(queues(), st.fixed_dictionaries({p: parts_st for p in PROJECTS}))
def test_debug_use_on_a_cluster_never_exceeds_its_part(q: tuple[list[RunningJob], list[PendingJob]],
                                                      parts: dict[str, dict[str, int]]) -> None:
    running, waiting = q
    got = qualify_all_clusters(parts, running, waiting, S, cluster_of, accepts_of)
    for project in PROJECTS:
        for c in CLUSTERS:
            # every job qualified on c, as if the lane put them all there
            mine = sorted((w for w in waiting if w.project == project and w.id in got and c in got[w.id].clusters),
                          key=lambda w: (w.submitted_at, w.id))
            if not mine:
                continue
            last = mine[-1]
            used = sum(r.gpus for r in running if r.project == project and cluster_of(r) == c
                       and counts_as_debug_use(r, S) and before(r.submitted_at, r.id, last.submitted_at, last.id))
            assert used + sum(w.gpus for w in mine) <= parts[project][c]
    for w in waiting:
        if w.id in got:
            assert set(got[w.id].clusters) <= set(accepts_of(w))  # never a cluster it excluded
            assert got[w.id] == qualify_clusters(w, parts[w.project], accepts_of(w), running, waiting, S,
                                                 cluster_of, accepts_of)


@EXAMPLES
@given(queues(), st.integers(0, 12))
def test_one_cluster_is_the_one_quota_rule(q: tuple[list[RunningJob], list[PendingJob]], quota: int) -> None:
    running, waiting = q
    one = [replace(r, placement=(("c0", r.gpus),)) for r in running]
    for w in waiting:
        a = qualify(w, quota, one, waiting, S)
        b = qualify_clusters(w, {"ceres": quota}, ("ceres",), one, waiting, S, cluster_of, lambda _: ("ceres",))
        assert (a.qualified, a.reason, a.quota_gpus, a.in_use_gpus, a.ahead_gpus) == (
            b.qualified, b.reason, b.quota_gpus, b.in_use_gpus, b.ahead_gpus)


@EXAMPLES
@given(st.integers(0, 64), st.dictionaries(st.sampled_from(("a", "b", "c")), st.integers(1, 512), min_size=1))
def test_the_parts_cover_the_quota(quota: int, capacity: dict[str, int]) -> None:
    parts = cluster_quotas(quota, {c: float(g) for c, g in capacity.items()}, S)
    assert set(parts) == set(capacity)
    assert all(min(quota, S.debug_quota_floor_gpus) <= p <= quota for p in parts.values())
    # rounding moves each part by at most half a GPU; the floor only adds
    assert sum(parts.values()) >= quota - len(parts) / 2
