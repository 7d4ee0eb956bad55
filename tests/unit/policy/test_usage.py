"""Usage accounting (DESIGN.md "Usage window"): window or decay, weighted, incremental, exact."""

from __future__ import annotations

import math
import random

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.errors import UsageError
from steward.policy.usage import (
    Interval,
    UsageWindow,
    contribution,
    decay_contribution,
    entitled_horizon_s,
    window_contribution,
    window_usage,
)
from tests.unit.policy.builders import running

W = 100.0


@pytest.mark.parametrize(
    ("start", "end", "now", "expected"),
    [
        (0, 10, 50, 10 * 2),  # fully inside
        (0, 10, 110, 0),  # ended exactly at the left edge: nothing
        (0, 10, 105, 5 * 2),  # straddles the left edge: only the part inside
        (90, 120, 100, 10 * 2),  # runs past now: clipped at now
        (100, 120, 100, 0),  # starts at now
        (0, 100, 100, 100 * 2),  # exactly the window
    ],
    ids=["inside", "at-left-edge", "straddling", "past-now", "starts-now", "whole-window"],
)
def test_window_contribution_is_exact_at_the_edges(start, end, now, expected):
    assert window_contribution(start, end, 2.0, now, W) == expected


def test_decay_halves_after_a_half_life():
    h = 1000.0
    first = decay_contribution(0, 10, 1.0, 10, h)
    later = decay_contribution(0, 10, 1.0, 10 + h, h)
    assert later == pytest.approx(first / 2)
    assert first == pytest.approx(10, rel=1e-2)
    assert entitled_horizon_s(PolicySettings(usage_mode="decay", half_life_s=h)) == pytest.approx(h / math.log(2))


def test_gpu_model_weights_scale_usage():
    s = PolicySettings(window_s=W, gpu_model_weights={"H100": 3.0})
    assert contribution(Interval("a", 0, 10, 2, "H100"), 10, s) == 60
    assert contribution(Interval("a", 0, 10, 2, "V100"), 10, s) == 20


@pytest.mark.parametrize("mode", ["window", "decay"])
def test_incremental_equals_batch(mode):
    s = PolicySettings(window_s=W, usage_mode=mode, half_life_s=50.0)
    rng = random.Random(3)
    acc = UsageWindow(s)
    seen: list[Interval] = []
    t = 0.0
    for _ in range(300):
        t += rng.uniform(0, 7)
        start = t - rng.uniform(0, 60)
        iv = Interval(rng.choice("abc"), start, t, rng.randint(1, 8))
        acc.add(iv)
        seen.append(iv)
        if rng.random() < 0.3:
            t += rng.uniform(0, 150)
            got = acc.usage(t)
            want = window_usage(seen, t, s)
            for p in "abc":
                assert got.get(p, 0.0) == pytest.approx(want.get(p, 0.0), rel=1e-9, abs=1e-6)


def test_incremental_is_exactly_zero_once_everything_left():
    acc = UsageWindow(PolicySettings(window_s=W))
    acc.add(Interval("a", 0.1, 10.3, 3))
    acc.add(Interval("a", 5.7, 20.9, 7))
    assert acc.usage(20.9)["a"] > 0
    assert acc.usage(20.9 + W)["a"] == 0.0


def test_running_jobs_are_charged_from_their_start_and_unfunded_are_not():
    acc = UsageWindow(PolicySettings(window_s=W))
    jobs = [
        running("r1", "a", 2, started_at=50.0, funded=True),
        running("r2", "b", 4, started_at=50.0, funded=False),
    ]
    got = acc.usage(100.0, running=jobs)
    assert got["a"] == 100.0
    assert "b" not in got


def test_time_cannot_go_backwards():
    acc = UsageWindow(PolicySettings(window_s=W))
    acc.advance(10)
    with pytest.raises(UsageError):
        acc.advance(5)
    with pytest.raises(UsageError):
        Interval("a", 5, 4, 1)
