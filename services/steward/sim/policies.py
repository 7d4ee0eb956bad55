"""Policy names -> `PolicySettings`, and the scenario's tree -> `AllocationTree`.

Every policy is the same cycle (`steward.policy.cycle.schedule`) with a preset of knobs; the
scenario's `policy:` section (window, protection cap, session cap, checkpoint interval, restart
overhead, grace) applies to all of them, and `--set` knobs go on top. The research baselines
(`RESEARCH`: `tiresias`, sim/tiresias.py) are schedulers of their own; their settings are a preset's
(`RESEARCH_BASE`), which the engine reads for the work model (checkpoints, restart, grace) only. The routing
baselines (`ROUTING`: `random-cluster`, `least-loaded`, sim/routing.py, ADR 0066) are `steward` with each job
pinned at submit to one admissible cluster; they differ from `steward` only where there are several clusters.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from steward.domain.clusters import WEIGHTS_SETTING, weight_problem
from steward.domain.policy_settings import PRESETS, RETIRED_SETTINGS, InvalidSettings, PolicySettings
from steward.policy.errors import PolicyError, TreeError
from steward.policy.tree import AllocationTree
from steward.sim.errors import OverrideError, ScenarioError, UnknownPolicy
from steward.sim.scenario import Scenario

DAY_S = 86400.0
RESEARCH: tuple[str, ...] = ("tiresias",)
ROUTING: tuple[str, ...] = ("random-cluster", "least-loaded")
POLICIES: tuple[str, ...] = PRESETS + RESEARCH + ROUTING
RESEARCH_BASE: dict[str, tuple[str, dict[str, Any]]] = {
    # no budgets, no lane, no reservations; best fit like steward (Tiresias consolidates when it can)
    "tiresias": ("fifo-priority", {"placement": "best_fit"}),
    # steward's cycle; only the cluster is chosen at submit (sim/routing.py)
    "random-cluster": ("steward", {}),
    "least-loaded": ("steward", {}),
}


def canonical(name: str) -> str:
    n = name.strip().lower().replace("_", "-")
    if n not in POLICIES:
        raise UnknownPolicy(f"unknown policy {name!r}; one of {', '.join(POLICIES)}")
    return n


def _declared_types() -> dict[str, tuple[type, bool]]:
    """Each setting's declared type without `None`, and whether `None` (YAML `null`) is allowed."""
    out: dict[str, tuple[type, bool]] = {}
    for name, hint in typing.get_type_hints(PolicySettings).items():
        args = typing.get_args(hint)
        nullable = type(None) in args
        base = next((a for a in args if a is not type(None)), hint) if nullable else hint
        out[name] = (typing.get_origin(base) or base, nullable)
    return out


def _coerce(name: str, value: Any, declared: tuple[type, bool]) -> Any:
    """Type a `--set` value like the field's declared type (YAML already typed numbers and booleans)."""
    kind, nullable = declared
    if value is None:
        if nullable:
            return None
        raise OverrideError(f"--set {name}: null is not allowed here (this setting cannot be switched off)")
    or_null = " or null" if nullable else ""
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise OverrideError(f"--set {name}: expected true or false{or_null}, got {value!r}")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise OverrideError(f"--set {name}: expected a whole number{or_null}, got {value!r}")
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise OverrideError(f"--set {name}: expected a number{or_null}, got {value!r}")
    if kind is tuple:
        if isinstance(value, list | tuple):
            return tuple(value)
        return (value,)
    if kind is Mapping or kind is dict:
        if isinstance(value, Mapping):
            return dict(value)
        raise OverrideError(f"--set {name}: expected a mapping{or_null}, got {value!r}")
    return value


def settings_for(policy: str, scenario: Scenario, extra: Mapping[str, Any] | None = None) -> PolicySettings:
    """The preset `policy` with the scenario's policy section and the `--set` knobs applied."""
    name = canonical(policy)
    preset, research = RESEARCH_BASE.get(name, (name, {}))
    sp = scenario.policy
    base: dict[str, Any] = {
        **research,
        "window_s": sp.window_days * DAY_S,
        "max_min_runtime_s": sp.max_min_runtime_s,
        "session_cap_s": sp.session_cap_s,
        "checkpoint_interval_s": sp.checkpoint_interval_s,
        "restart_overhead_s": sp.restart_overhead_s,
        "preemption_grace_s": sp.preemption_grace_s,
    }
    if sp.half_life_days is not None:
        base["half_life_s"] = sp.half_life_days * DAY_S
    declared = _declared_types()
    knobs = {**scenario.settings_overrides, **(extra or {})}
    for key, value in knobs.items():
        if key in RETIRED_SETTINGS:
            raise OverrideError(f"--set {key}: a retired setting ({RETIRED_SETTINGS[key]})")
        if key not in declared:
            raise OverrideError(
                f"--set {key}: not a scenario key nor a policy setting (settings: {', '.join(sorted(declared))})")
        base[key] = _coerce(key, value, declared[key])
    for model, weight in sorted((base.get(WEIGHTS_SETTING) or {}).items(), key=lambda kv: str(kv[0])):
        if (problem := weight_problem(str(model), weight)) is not None:  # the ledger's rule (ADR 0098)
            raise OverrideError(f"--set {WEIGHTS_SETTING}: {problem}")
    try:
        return PolicySettings.preset(preset, **base)
    except (PolicyError, InvalidSettings) as exc:
        raise OverrideError(exc.message) from None


def tree_for(scenario: Scenario) -> AllocationTree:
    try:
        allocations = scenario.allocations.values()
        quotas = {a.name: a.debug_quota for a in allocations if a.debug_quota is not None}
        return AllocationTree.build(((a.name, a.parent, a.share) for a in allocations), debug_quotas=quotas)
    except TreeError as exc:
        raise ScenarioError(f"{scenario.source}: tree.{exc.node}: {exc.message}") from None
