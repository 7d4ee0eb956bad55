"""Policy settings and the baseline presets of issue 4."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PRESETS, RETIRED_SETTINGS, InvalidSettings, PolicySettings, in_force


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "steward",
            {
                "ordering": "fair_share",
                "placement": "best_fit",
                "reservations": True,
                "fairness_preemption": True,
                "usage_mode": "window",
                "funding": True,
            },
        ),
        (
            "ai2",
            {
                "ordering": "fair_share",
                "placement": "first_fit",
                "reservations": False,
                "fairness_preemption": True,
                "usage_mode": "window",
            },
        ),
        (
            "fair-tree",
            {
                "usage_mode": "decay",
                "half_life_s": 7 * 86400.0,
                "fairness_preemption": False,
                "placement": "first_fit",
                "reservations": False,
            },
        ),
        (
            "fifo-priority",
            {
                "ordering": "fifo_priority",
                "fairness_preemption": False,
                "preemptible_after_protection": False,
                "funding": False,
            },
        ),
    ],
)
def test_presets_match_issue_4(name, expected):
    s = PolicySettings.preset(name)
    for key, value in expected.items():
        assert getattr(s, key) == value, key


def test_defaults_match_design():
    s = PolicySettings()
    assert (s.window_s, s.max_min_runtime_s, s.session_cap_s) == (7 * 86400.0, 28800.0, 28800.0)
    assert s.session_warnings_s == (1800.0, 300.0)
    assert set(PRESETS) == {"steward", "ai2", "fair-tree", "fifo-priority"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"window_s": 0}, "window_s"),
        ({"usage_mode": "bogus"}, "usage_mode"),
        ({"ordering": "bogus"}, "ordering"),
        ({"placement": "bogus"}, "placement"),
        ({"max_min_runtime_s": -1}, "max_min_runtime_s"),
        ({"gpu_model_weights": {"A100": -1.0}}, "gpu_model_weights"),
        ({"max_tree_depth": 9}, "max_tree_depth"),
        ({"claim_hold_s": -1.0}, "claim_hold_s"),
        ({"consolidation_searches_per_cycle": -1}, "consolidation_searches_per_cycle"),
        ({"lane_trade_max_lost_s": -1.0}, "lane_trade_max_lost_s"),
    ],
)
def test_bad_settings_are_refused(changes, field):
    with pytest.raises(InvalidSettings) as info:
        PolicySettings(**changes)
    assert info.value.field == field
    # the domain's error (ADR 0040): a ValueError with the stable code and the message of a policy error
    assert isinstance(info.value, ValueError) and info.value.code == "invalid_settings"
    assert info.value.message.startswith(f"setting {field!r}: ")


def test_settings_are_frozen_and_serialisable():
    s = PolicySettings(gpu_model_weights={"H100": 2.0})
    assert s.model_weight("H100") == 2.0 and s.model_weight("V100") == 1.0
    assert s.to_dict()["gpu_model_weights"] == {"H100": 2.0}
    assert s.with_(window_s=10.0).window_s == 10.0
    with pytest.raises(AttributeError):
        s.window_s = 1.0  # type: ignore[misc]
    with pytest.raises(InvalidSettings):
        PolicySettings.preset("nope")


@pytest.mark.parametrize(("name", "replacement"), [
    ("lane_project_gpus", "debug quota"),  # ADR 0029
    ("lane_hold_s", "claim_hold_s"),  # ADR 0028: one hold for every beneficiary, lane jobs included
])
def test_a_retired_setting_is_no_setting_but_a_recorded_one_is_read_past(name: str, replacement: str) -> None:
    """A retired setting names what replaced it; a log that recorded it (events are never rewritten)
    still gives the policy the rest of its settings (`in_force`)."""
    assert replacement in RETIRED_SETTINGS[name]
    assert name not in PolicySettings().to_dict()
    recorded = {name: 30, "window_s": 86400.0}
    assert in_force(recorded) == {"window_s": 86400.0}
    assert PolicySettings.steward(**in_force(recorded)).window_s == 86400.0
    with pytest.raises(TypeError):
        PolicySettings.steward(**recorded)
