"""The contract's durations for new runs, from the environment (prefix STEWARD_CONTRACT_), e.g.
STEWARD_CONTRACT_GRACE_S=30. They are frozen into each run's input when it starts."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from steward_workflows.contracts import ContractTimings


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

    def timings(self) -> ContractTimings:
        warnings = [float(w) for w in self.session_warnings_s.split(",") if w.strip()]
        return ContractTimings(self.grace_s, self.heartbeat_timeout_s, self.lost_after_s, warnings,
                               self.session_at_cap, self.idle_limit_s, self.idle_grace_s, self.max_history,
                               self.watch_window_s, self.watch_gap_s)
