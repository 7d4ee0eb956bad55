"""The scenario generator (issue 18): named, seeded families whose output the scenario loader accepts,
byte-identical for the same family + seed + parameters, with the offered load the family was asked for,
and the trace rules of make_philly.py (debug: whole duration protected, batch: min(duration, 1 h) or 0)."""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steward.sim.generate import (
    BATCH_PROTECTION_S,
    DEBUG_MAX_GPUS,
    DEBUG_MAX_S,
    FAMILIES,
    MULTI_CLUSTER_FAMILIES,
    SESSION_CAP_S,
    GenerateError,
    generate,
    job_bounds,
    large_job_gpus,
    offered_load,
)
from steward.sim.scenario import Scenario, TraceJob, load_scenario

SMALL = {"nodes": 4, "load": 1.5, "jobs": 300}


def load(tmp: Path, family: str, seed: int = 1, **values: object) -> tuple[Scenario, object]:
    g = generate(family, seed, {**SMALL, **values})
    return load_scenario(g.write(tmp)), g


def check_rules(job: TraceJob) -> None:
    """make_philly.py's rules, one job at a time."""
    if job.job_class == "debug":
        assert job.gpus <= DEBUG_MAX_GPUS and job.duration_s <= DEBUG_MAX_S
        assert job.min_runtime_s == job.duration_s and not job.resumable
    elif job.job_class == "batch":
        assert job.min_runtime_s in (0.0, min(job.duration_s, BATCH_PROTECTION_S))
        assert job.resumable
    else:
        assert job.job_class == "interactive"
        assert job.duration_s <= SESSION_CAP_S and job.min_runtime_s == job.duration_s


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_loads_and_follows_the_trace_rules(tmp_path: Path, family: str) -> None:
    scenario, _ = load(tmp_path, family)
    assert len(scenario.jobs) == SMALL["jobs"]
    assert scenario.capacity == SMALL["nodes"] * 8
    if family in MULTI_CLUSTER_FAMILIES:  # each cluster's nodes under its name (ADR 0057)
        assert {n.path[0] for n in scenario.nodes} == {n.cluster for n in scenario.nodes} == {"ceres", "jupiter"}
    else:
        assert {n.path[0] for n in scenario.nodes} == {"block0"}  # 4 nodes: one block, as philly.yaml's blocks of 8
    assert len({j.job_id for j in scenario.jobs}) == len(scenario.jobs)
    for job in scenario.jobs:
        check_rules(job)
    assert scenario.projects  # a tree with leaves
    assert sum(a.entitlement for a in scenario.allocations.values() if a.is_project) <= 1.0 + 1e-9


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize(("nodes", "load_factor"), [(4, 0.8), (16, 1.5), (64, 3.0)])
def test_the_offered_load_is_the_familys(tmp_path: Path, family: str, nodes: int, load_factor: float) -> None:
    """Requested GPU-seconds / (capacity x last arrival) is the load asked for, within rounding of
    submit times to whole seconds; the default job count stays within the size's bounds."""
    g = generate(family, 7, {"nodes": nodes, "load": load_factor})
    scenario = load_scenario(g.write(tmp_path))
    lo, hi = job_bounds(nodes)
    assert lo <= len(scenario.jobs) <= hi
    assert offered_load(scenario) == pytest.approx(load_factor, rel=0.005)
    assert g.summary()["load"] == pytest.approx(load_factor, rel=0.005)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_same_family_seed_and_parameters_give_byte_identical_files(tmp_path: Path, family: str) -> None:
    a = generate(family, 3, SMALL).write(tmp_path / "a")
    b = generate(family, 3, SMALL).write(tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".csv").read_bytes() == b.with_suffix(".csv").read_bytes()
    other = generate(family, 4, SMALL)
    assert other.csv_text != a.with_suffix(".csv").read_text()
    changed = generate(family, 3, {**SMALL, "load": 2.0})
    assert changed.csv_text != a.with_suffix(".csv").read_text()


def test_unfunded_many_has_tenants_outside_the_tree_and_jobs_asking_no_protection(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "unfunded-many", jobs=1000)
    outside = {j.tenant for j in scenario.jobs} - set(scenario.allocations)
    assert len(outside) >= 4
    share_outside = sum(j.tenant in outside for j in scenario.jobs) / len(scenario.jobs)
    assert 0.25 <= share_outside <= 0.45  # guest_weight 0.35 of submissions
    batch = [j for j in scenario.jobs if j.job_class == "batch" and j.tenant not in outside]
    asking_none = sum(j.min_runtime_s == 0 for j in batch) / len(batch)
    assert 0.2 <= asking_none <= 0.4  # unfunded 0.30


def test_unfunded_debug_is_debug_work_of_tenants_with_no_allocation_among_short_1gpu_jobs(tmp_path: Path) -> None:
    """The held-out loop's shape (issue 18, ADR 0028): tenants absent from the tree submit mostly
    debug work, on a small cluster of mostly 1-GPU short jobs."""
    scenario, _ = load(tmp_path, "unfunded-debug", jobs=2000)
    jobs = scenario.jobs
    outside = {j.tenant for j in jobs} - set(scenario.allocations)
    assert outside == {"guest01", "guest02"}
    guests = [j for j in jobs if j.tenant in outside]
    assert 0.1 <= len(guests) / len(jobs) <= 0.2  # guest_weight 0.15
    assert 0.5 <= sum(j.job_class == "debug" for j in guests) / len(guests) <= 0.7  # guest_debug 0.6
    funded = [j for j in jobs if j.tenant not in outside]
    assert 0.2 <= sum(j.job_class == "debug" for j in funded) / len(funded) <= 0.4  # debug 0.30
    assert sum(j.gpus == 1 for j in jobs) / len(jobs) >= 0.75
    assert sorted(j.duration_s for j in jobs)[len(jobs) // 2] <= 1800
    assert generate("unfunded-debug", 0, {}).params.nodes == 6  # the held-out trace's 6 x 8 GPUs


def test_dominant_tenant_submits_most_on_a_minority_share(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "dominant-tenant", jobs=1000)
    top, count = Counter(j.tenant for j in scenario.jobs).most_common(1)[0]
    assert top == "t00" and 0.6 <= count / len(scenario.jobs) <= 0.8
    assert scenario.allocations["t00"].entitlement == pytest.approx(0.25)


def test_gang_heavy_puts_most_gpu_time_in_gangs(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "gang-heavy", nodes=16)
    total = sum(j.gpus * j.duration_s for j in scenario.jobs)
    gangs = sum(j.gpus * j.duration_s for j in scenario.jobs if j.gpus >= 8)
    assert gangs / total >= 0.7
    assert max(j.gpus for j in scenario.jobs) <= scenario.capacity


def test_short_1gpu_is_mostly_one_gpu_and_short(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "short-1gpu", jobs=1000)
    jobs = scenario.jobs
    assert sum(j.gpus == 1 for j in jobs) / len(jobs) >= 0.75
    durations = sorted(j.duration_s for j in jobs)
    assert durations[len(durations) // 2] <= 1800
    assert 0.2 <= sum(j.job_class == "debug" for j in jobs) / len(jobs) <= 0.4


def test_debug_heavy_is_mostly_debug_and_sessions(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "debug-heavy", jobs=1000)
    classes = Counter(j.job_class for j in scenario.jobs)
    assert classes["debug"] / len(scenario.jobs) >= 0.45
    assert classes["interactive"] > 0


def test_bursty_arrivals_come_in_bursts_from_one_tenant(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "bursty", jobs=1500)
    runs, best = [], 1
    jobs = scenario.jobs
    for a, b in itertools.pairwise(jobs):
        if b.tenant == a.tenant and b.submit_s - a.submit_s <= 120:
            best += 1
        else:
            runs.append(best)
            best = 1
    runs.append(best)
    assert max(runs) >= 20  # bursts of 20-80 jobs within two minutes


def test_heavy_tail_puts_much_gpu_time_in_few_jobs(tmp_path: Path) -> None:
    scenario, _ = load(tmp_path, "heavy-tail", jobs=2000, nodes=16)
    work = sorted((j.gpus * j.duration_s for j in scenario.jobs), reverse=True)
    top = work[: len(work) // 100]
    assert sum(top) / sum(work) >= 0.2
    assert max(j.duration_s for j in scenario.jobs) > 50 * sorted(j.duration_s for j in scenario.jobs)[1000]


@pytest.mark.parametrize(("family", "values", "message"), [
    ("nope", {}, "unknown family 'nope'"),
    ("bursty", {"colour": 1}, "no parameter 'colour'"),
    ("bursty", {"load": -1}, "load must be between"),
    ("bursty", {"nodes": 0}, "nodes must be between"),
    ("bursty", {"nodes": "four"}, "parameter nodes expects a int"),
    ("bursty", {"jobs": 2.5}, "parameter jobs expects a int"),
    ("short-1gpu", {"debug": 1.5}, "debug is a fraction"),
    ("short-1gpu", {"debug": 0.7, "interactive": 0.5}, "debug + interactive"),
    ("bursty", {"burst_min": 9, "burst_max": 3}, "burst_min <= burst_max"),
    ("dominant-tenant", {"dominant_share": 0.8}, "dominant_share must be <= 0.5"),
    ("heavy-tail", {"alpha": 0}, "alpha, xm_s and max_days must be > 0"),
])
def test_bad_parameters_are_refused_with_one_line(family: str, values: dict[str, object], message: str) -> None:
    with pytest.raises(GenerateError) as err:
        generate(family, 1, values)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_negative_seed_is_refused() -> None:
    with pytest.raises(GenerateError, match="seed must be a whole number"):
        generate("bursty", -1, SMALL)


@pytest.mark.parametrize(("capacity", "large"), [(32, 8), (64, 8), (128, 8), (256, 16), (320, 32), (512, 32)])
def test_the_large_class_is_about_a_tenth_of_the_cluster(capacity: int, large: int) -> None:
    assert large_job_gpus(capacity) == large


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    seed=st.integers(min_value=0, max_value=2**31),
    nodes=st.integers(min_value=1, max_value=64),
    load_factor=st.floats(min_value=0.1, max_value=5.0),
    jobs=st.integers(min_value=1, max_value=120),
)
def test_any_seed_and_size_gives_a_valid_scenario(
    family: str, seed: int, nodes: int, load_factor: float, jobs: int,
) -> None:
    if family in MULTI_CLUSTER_FAMILIES:
        nodes = max(nodes, 4)  # two clusters, three models: at least one node of each
    g = generate(family, seed, {"nodes": nodes, "load": load_factor, "jobs": jobs})
    with tempfile.TemporaryDirectory() as tmp:
        scenario = load_scenario(g.write(tmp))
    assert len(scenario.jobs) == jobs
    for job in scenario.jobs:
        check_rules(job)
        assert 1 <= job.gpus <= scenario.capacity
    last = max(j.submit_s for j in scenario.jobs)
    assert last >= 1
    assert offered_load(scenario) == pytest.approx(g.load)
    # the window is rounded to whole seconds, so the load is the one asked for up to half a second of it
    assert abs(g.load - load_factor) <= load_factor * 1.0 / last + 1e-9
