"""Policy names -> `PolicySettings`, and the scenario's tree -> `AllocationTree`.

Every policy is the same cycle (`steward.policy.cycle.schedule`) with a preset of knobs; the
scenario's `policy:` section (window, protection cap, session cap, checkpoint interval, restart
overhead, grace) applies to all of them, and `--set` knobs go on top.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from steward.policy.errors import PolicyError, TreeError
from steward.policy.settings import PRESETS, PolicySettings
from steward.policy.tree import AllocationTree
from steward.sim.errors import OverrideError, ScenarioError, UnknownPolicy
from steward.sim.scenario import Scenario

DAY_S = 86400.0
POLICIES: tuple[str, ...] = PRESETS


def canonical(name: str) -> str:
    n = name.strip().lower().replace("_", "-")
    if n not in POLICIES:
        raise UnknownPolicy(f"unknown policy {name!r}; one of {', '.join(POLICIES)}")
    return n


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Type a `--set` value like the field's default (YAML already typed numbers and booleans)."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise OverrideError(f"--set {name}: expected true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise OverrideError(f"--set {name}: expected a whole number, got {value!r}")
    if isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise OverrideError(f"--set {name}: expected a number, got {value!r}")
    if isinstance(default, tuple):
        if isinstance(value, list | tuple):
            return tuple(value)
        return (value,)
    if isinstance(default, Mapping):
        if isinstance(value, Mapping):
            return dict(value)
        raise OverrideError(f"--set {name}: expected a mapping, got {value!r}")
    return value


def settings_for(policy: str, scenario: Scenario, extra: Mapping[str, Any] | None = None) -> PolicySettings:
    """The preset `policy` with the scenario's policy section and the `--set` knobs applied."""
    name = canonical(policy)
    sp = scenario.policy
    base: dict[str, Any] = {
        "window_s": sp.window_days * DAY_S,
        "max_min_runtime_s": sp.max_min_runtime_s,
        "session_cap_s": sp.session_cap_s,
        "checkpoint_interval_s": sp.checkpoint_interval_s,
        "restart_overhead_s": sp.restart_overhead_s,
        "preemption_grace_s": sp.preemption_grace_s,
    }
    if sp.half_life_days is not None:
        base["half_life_s"] = sp.half_life_days * DAY_S
    defaults = {f.name: getattr(PolicySettings(), f.name) for f in dataclasses.fields(PolicySettings)}
    knobs = {**scenario.settings_overrides, **(extra or {})}
    for key, value in knobs.items():
        if key not in defaults:
            raise OverrideError(
                f"--set {key}: not a scenario key nor a policy setting (settings: {', '.join(sorted(defaults))})")
        base[key] = _coerce(key, value, defaults[key])
    try:
        return PolicySettings.preset(name, **base)
    except PolicyError as exc:
        raise OverrideError(exc.message) from None


def tree_for(scenario: Scenario) -> AllocationTree:
    try:
        return AllocationTree.build((a.name, a.parent, a.share) for a in scenario.allocations.values())
    except TreeError as exc:
        raise ScenarioError(f"{scenario.source}: tree.{exc.node}: {exc.message}") from None
