"""The contract's durations for new runs: the recorded policy's (`steward policy set`, a `PolicySet`
event) where it sets them, else the worker's environment (prefix STEWARD_CONTRACT_, e.g.
STEWARD_CONTRACT_GRACE_S=30) as the default. They are frozen into each run's input when it starts, so a
policy change reaches new runs and sessions and never alters a running history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict

from steward_workflows.payloads import ContractTimings


class ContractSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STEWARD_CONTRACT_", extra="ignore")

    grace_s: float = 120.0
    heartbeat_timeout_s: float = 30.0
    lost_after_s: float = 60.0
    session_warnings_s: str = "1800,300"
    session_at_cap: str = "stop"
    idle_limit_s: float = 1800.0
    idle_grace_s: float = 600.0
    # continue-as-new past this many events (or when the server suggests it), well before Temporal's 10k
    # warning: a week-long job's JobRun adds ~6 events per watch window (5 min), so ~1 new run a day
    max_history: int = 2_000
    period_s: float = 86_400.0  # 0: no scheduled period close
    period_lag_s: float = 300.0
    drain_poll_s: float = 5.0
    watch_window_s: float = 300.0
    watch_gap_s: float = 0.0
    sandbox: bool = False  # the worker's workflow sandbox (replay tests always use it)

    def timings(self, policy: Mapping[str, Any] | None = None) -> ContractTimings:
        """The environment's timings, overridden by the recorded policy's (`policy`: the settings of the
        last `PolicySet`, the overrides in force)."""
        warnings = [float(w) for w in self.session_warnings_s.split(",") if w.strip()]
        base = ContractTimings(self.grace_s, self.heartbeat_timeout_s, self.lost_after_s, warnings,
                               self.session_at_cap, self.idle_limit_s, self.idle_grace_s, self.max_history,
                               self.watch_window_s, self.watch_gap_s)
        return with_recorded_policy(base, policy or {})


# the policy's knobs (steward.domain.policy_settings.PolicySettings) that the workflows keep -> ContractTimings field
POLICY_TIMINGS = {
    "preemption_grace_s": "grace_s",
    "session_warnings_s": "session_warnings_s",
    "session_at_cap": "session_at_cap",
}


def with_recorded_policy(base: ContractTimings, policy: Mapping[str, Any]) -> ContractTimings:
    """DESIGN.md "operator ... sets policy": one source for each knob. The scheduler plans with the
    recorded policy (grace, session warnings, what happens at the cap); a run started after a
    `steward policy set` keeps the same values. What the policy does not set keeps `base` (the env)."""
    changes: dict[str, Any] = {}
    for knob, name in POLICY_TIMINGS.items():
        if knob not in policy:
            continue
        value = policy[knob]
        if name == "session_warnings_s":
            changes[name] = [float(w) for w in value]
        elif name == "session_at_cap":
            changes[name] = str(value)
        else:
            changes[name] = float(value)
    return replace(base, **changes) if changes else base
