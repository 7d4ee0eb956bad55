"""The simulator's incremental usage equals the policy's `UsageWindow.usage(now, running)`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import RunningJob
from steward.policy.usage import Interval, UsageWindow
from steward.sim.usage import SimUsage

# (project, start offset, length, gpus); runs still open at `now` have length None
runs = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 5e5), st.one_of(st.none(), st.floats(0, 3e5)),
              st.integers(1, 8)),
    max_size=25,
)


@pytest.mark.parametrize("settings", [PolicySettings(window_s=2e5), PolicySettings.fair_tree(half_life_s=1e5)],
                         ids=["window", "decay"])
@given(data=runs, now_extra=st.floats(0, 4e5))
def test_incremental_usage_matches_the_policy(settings: PolicySettings, data: list, now_extra: float) -> None:
    events = []
    for i, (_project, start, length, _gpus) in enumerate(data):
        events.append((start, 0, i))
        if length is not None:
            events.append((start + length, 1, i))
    events.sort()
    horizon = max([t for t, _, _ in events], default=0.0)
    now = horizon + now_extra
    sim = SimUsage(settings)
    ref = UsageWindow(settings)
    for t, kind, i in events:
        project, start, _length, gpus = data[i]
        if kind == 0:
            sim.start(f"r{i}", project, start, gpus)
        else:
            sim.end(f"r{i}", t)
            ref.add(Interval(project, start, t, gpus))
        sim.usage(t)  # advance as the engine does, cycle by cycle
    running = [RunningJob(id=f"r{i}", project=p, gpus=g, placement=(("n", g),), started_at=s,
                          protected_until=s, funded=True)
               for i, (p, s, length, g) in enumerate(data) if length is None]
    want = ref.usage(now, running=running)
    got = sim.usage(now)
    for project in set(want) | set(got):
        assert got.get(project, 0.0) == pytest.approx(want.get(project, 0.0), rel=1e-9, abs=1e-3)


@pytest.mark.parametrize(("offset", "half_life_s"), [(1.7e9, 7 * 86400.0), (1.7e12, 7 * 86400.0), (0.0, 1e-3),
                                                      (3e5, 60.0)],
                         ids=["epoch-seconds", "epoch-milliseconds", "tiny-half-life", "many-half-lives"])
@given(data=runs, now_extra=st.floats(0, 4e5))
def test_decay_usage_far_from_time_zero(offset: float, half_life_s: float, data: list, now_extra: float) -> None:
    """Decay usage with times more than ~1,000 half-lives after 0 (a trace in epoch seconds, or a tiny half-life):
    Σ w·e^(k·s) overflowed (OverflowError: math range error, `steward sim --policy fair-tree` on an outside trace);
    the sum is kept against a reference time that moves, and still equals the policy's `UsageWindow`."""
    settings = PolicySettings.fair_tree(half_life_s=half_life_s)
    events = []
    for i, (_project, start, length, _gpus) in enumerate(data):
        events.append((offset + start, 0, i))
        if length is not None:
            events.append((offset + start + length, 1, i))
    events.sort()
    now = max([t for t, _, _ in events], default=offset) + now_extra
    sim = SimUsage(settings)
    ref = UsageWindow(settings)
    for t, kind, i in events:
        project, start, _length, gpus = data[i]
        if kind == 0:
            sim.start(f"r{i}", project, offset + start, gpus)
        else:
            sim.end(f"r{i}", t)
            ref.add(Interval(project, offset + start, t, gpus))
        sim.usage(t)
    running = [RunningJob(id=f"r{i}", project=p, gpus=g, placement=(("n", g),), started_at=offset + s,
                          protected_until=offset + s, funded=True)
               for i, (p, s, length, g) in enumerate(data) if length is None]
    want = ref.usage(now, running=running)
    got = sim.usage(now)
    for project in set(want) | set(got):
        assert got.get(project, 0.0) == pytest.approx(want.get(project, 0.0), rel=1e-6, abs=1e-3)
