"""`SimResult`: one policy's run on one scenario, as `steward.sim.run` makes it and `steward.sim.report`
writes it (its own module, so the run and the report import it without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.sim.engine import EngineStats
from steward.sim.metrics import Recorder
from steward.sim.scenario import Scenario


@dataclass
class SimResult:
    """One policy on one scenario: the figures (the `--json` object) and what they came from."""

    policy: str
    scenario: Scenario
    settings: PolicySettings
    figures: dict[str, Any]
    recorder: Recorder
    stats: EngineStats

    def to_json(self) -> dict[str, Any]:
        return dict(self.figures)

    def diagnostics(self) -> dict[str, Any]:
        s = self.stats
        return {
            "cycles": s.cycles,
            "cycles_skipped": s.skipped,
            "cycle_s": round(s.cycle_s, 3),
            "snapshot_s": round(s.snapshot_s, 3),
            "events": s.events,
            "max_pending": s.max_pending,
            "max_view": s.max_view,
            "mean_pending": round(s.pending_total / max(1, s.cycles), 1),
            "mean_view": round(s.view_total / max(1, s.cycles), 1),
            "cycles_rerun_for_backfill": s.reruns,
            "cycles_rerun_on_full_heads": s.widened,
            "unfinished_jobs": self.recorder.unfinished,
            "simulated_days": round(self.recorder.end / 86400.0, 2),
            "cycles_by_trigger": {
                f"{name} ({'decided' if productive else 'no decision'})": count
                for (name, productive), count in sorted(s.by_trigger.items())
            },
        }
