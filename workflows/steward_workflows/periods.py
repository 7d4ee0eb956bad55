"""PeriodCloseWorkflow ("PeriodClose"): closes one budget period (DESIGN.md "Owed vs delivered").

Started by the Temporal schedule `steward-period-close` (every `period_s`, a little after each boundary)
or by hand. It computes owed vs delivered per allocation from the log (an activity; the arithmetic is
the pure `steward.domain.budget`) and records them as a `PeriodClosed` event, once: the message id is
the period id.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steward.domain.budget import period_bounds, period_id
    from steward.domain.commands import ClosePeriod
    from steward_workflows.payloads import PeriodCloseInput, PeriodCloseResult, PeriodFigures, PeriodWindow
    from steward_workflows.publishing import PUBLISH_RETRY, publish

SCHEDULE_ID = "steward-period-close"


@workflow.defn(name="PeriodClose")
class PeriodCloseWorkflow:
    @workflow.run
    async def run(self, inp: PeriodCloseInput) -> PeriodCloseResult:
        at = inp.at or workflow.now().timestamp()
        start, end = period_bounds(at, inp.period_s)
        figures: PeriodFigures = await workflow.execute_activity(
            "compute_period", PeriodWindow(start, end), start_to_close_timeout=timedelta(minutes=30),
            retry_policy=PUBLISH_RETRY, result_type=PeriodFigures,
        )
        pid = period_id(start, end)
        evidence = {"events_read": figures.events_read, "rule": "owed = min(entitlement x capacity, demand) per hour"}
        await publish(ClosePeriod(pid, start, end, figures.capacity_gpu_s, figures.allocations, evidence),
                      f"period-{pid}")
        return PeriodCloseResult(pid, start, end, len(figures.allocations))
