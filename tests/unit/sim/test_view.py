"""The trimmed queue: chains of twins in order, heads handed to the cycle, the last job kept."""

from __future__ import annotations

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import PendingJob
from steward.sim.view import PendingView, chain_key


def pj(job_id: str, submitted: float, gpus: int = 1, project: str = "a", min_runtime: float = 60.0,
       klass: str = "batch") -> PendingJob:
    return PendingJob(id=job_id, project=project, gpus=gpus, submitted_at=submitted, min_runtime_s=min_runtime,
                      klass=klass)  # type: ignore[arg-type]


def test_twins_share_a_chain_and_debug_joins_batch() -> None:
    s = PolicySettings()
    # without a lane a debug job is a batch job's twin; with it (ADR 0007) a lane job is not
    assert chain_key(pj("x", 0, klass="debug", min_runtime=300), s.with_(lane=False)) == chain_key(pj("y", 5), s)
    assert chain_key(pj("x", 0, klass="debug", min_runtime=300), s) != chain_key(pj("y", 5), s)
    assert chain_key(pj("x", 0, klass="debug", min_runtime=300), s) == chain_key(
        pj("y", 5, klass="debug", min_runtime=900), s)
    assert chain_key(pj("x", 0), s) != chain_key(pj("y", 0, gpus=2), s)
    assert chain_key(pj("x", 0), s) != chain_key(pj("y", 0, min_runtime=0), s)  # funding asked differs
    assert chain_key(pj("x", 0), s) != chain_key(pj("y", 0, klass="interactive"), s)
    assert chain_key(pj("x", 0), s, exact_protection=True) != chain_key(pj("y", 0, min_runtime=30), s, True)


def test_heads_plus_last_and_requeue_keeps_submit_order() -> None:
    view = PendingView(PolicySettings(), attempts=0)
    jobs = [pj(f"j{i:02d}", float(i)) for i in range(20)]
    for j in jobs[1:]:
        view.add(j)
    assert view.add(jobs[0]) == 0  # a requeued job goes back by its original submit time
    window = view.window(1, free=2)  # 2 free GPUs: 2 placements + 1 + slack
    got = [j.id for j in view.jobs(free=2)]
    assert got == [j.id for j in jobs[:window]] + ["j19"]
    view.remove(jobs[0])
    assert len(view) == 19 and view.jobs(free=100)[0].id == "j01"
    assert [j.id for j in view.all_jobs()] == [j.id for j in jobs[1:]]


def test_backfill_candidates_are_short_work_behind_the_head() -> None:
    view = PendingView(PolicySettings(), attempts=0)
    for i in range(10):
        view.add(pj(f"long{i}", float(i), min_runtime=3600))
    view.add(pj("short", 20.0, min_runtime=300))
    view.add(pj("tail", 30.0, min_runtime=3600))
    head = {j.id for j in view.jobs(free=0)}
    assert "short" not in head and "tail" in head  # head: 0 // 1 + 0 + 1 + slack jobs, and the last
    assert [j.id for j in view.backfill_candidates(free=0, horizons=[600])] == ["short"]
    assert view.backfill_candidates(free=0, horizons=[60]) == []


def test_backfill_candidates_serve_every_reservations_due_time() -> None:
    """Two reservations, due in 2,000 s and in 300 s: the first short jobs behind the head all fit
    the later one only, and the one job short enough for the earlier reservation lies behind them.
    It is a candidate too (the cycle may place it on the earlier reservation's nodes), although the
    latest horizon alone would stop before it (the whole philly trace, cycle 68,331 of 80,000 jobs)."""
    view = PendingView(PolicySettings(), attempts=0)
    for i in range(10):
        view.add(pj(f"long{i}", float(i), min_runtime=3600))
    for i in range(6):
        view.add(pj(f"mid{i}", 10.0 + i, min_runtime=900))
    view.add(pj("short", 20.0, min_runtime=150))
    view.add(pj("tail", 30.0, min_runtime=3600))
    need = 0 // 1 + 1 + 2  # free // gpus + 1 + slack per horizon
    latest = [j.id for j in view.backfill_candidates(free=0, horizons=[2000])]
    assert latest == [f"mid{i}" for i in range(need)]
    both = [j.id for j in view.backfill_candidates(free=0, horizons=[2000, 300])]
    assert both == [*latest, "short"]
    assert [j.id for j in view.backfill_candidates(free=0, horizons=[300])] == ["short"]
