"""The soak benchmark's own arithmetic (memory growth, percentiles) and its refusal of bad options; the
run itself needs the whole stack and prints figures (docs/benchmarks.md "Soak"), it asserts nothing."""

from __future__ import annotations

import pytest

from steward.bench.soak import Samples, main, percentile, slope_per_h


def test_growth_is_the_least_squares_slope_in_mb_per_hour() -> None:
    # +1 MB every 60 s = 60 MB/h, whatever the noise around the line
    points = [(float(t), 100 + t / 60 + (0.3 if i % 2 else -0.3)) for i, t in enumerate(range(0, 600, 10))]
    assert slope_per_h(points) == pytest.approx(60, abs=2)
    assert slope_per_h([(0.0, 100.0), (60.0, 100.0), (120.0, 100.0)]) == 0
    assert slope_per_h([(0.0, 1.0), (1.0, 2.0)]) is None  # too few points to say


def test_a_restarted_process_is_measured_over_its_longest_life_after_the_warmup() -> None:
    samples = Samples()
    # pid 1 grows fast during its warm-up, then lives flat; pid 2 (after a restart) is short
    samples.rss["executor"] = [(float(t), 1, 50.0 + t) for t in range(0, 30, 5)] + \
        [(float(t), 1, 80.0) for t in range(30, 200, 5)] + [(float(t), 2, t - 160.0) for t in range(200, 260, 5)]
    got = samples.growth(warmup_s=30)["executor"]
    # pid 2 keeps growing, but its life after its own warm-up (230-255 s) is shorter than pid 1's
    assert got["rss_growth_mb_per_h"] == 0
    assert got["restarts"] == 1
    assert (got["rss_mb_start"], got["rss_mb_end"]) == (50, 95)


def test_percentiles_interpolate_and_say_nothing_without_data() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile(list(range(101)), 0.99) == 99
    assert percentile([], 0.99) is None


@pytest.mark.parametrize(("args", "message"), [
    (["--minutes", "0"], "--minutes must be positive, got 0.0"),
    (["--clients", "-3"], "--clients must be positive, got -3"),
    (["--rate", "-1"], "--rate must be 0 or more, got -1.0"),
])
def test_bad_options_are_refused_by_name_before_anything_starts(args: list[str], message: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err
