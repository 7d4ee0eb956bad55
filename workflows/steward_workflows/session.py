"""SessionWorkflow ("Session"): the promises of one interactive attempt (DESIGN.md "Interactive sessions").

A child of the attempt's JobRun (id `session-<job>-attempt-<n>`), started once the process runs:

- records `SessionOpened` (cap and warning times) through the ledger;
- warns at cap − 30 min and cap − 5 min (policy `session_warnings_s`) — `SessionWarned` events the UI and
  CLI show;
- at the cap tells its JobRun (`session_cap_reached`), which checkpoints and stops the session (or makes
  it preemptible, per policy `session_at_cap`) and records `SessionCapReached`;
- idleness (issue 6 "Idle sessions"): the executor reports a session turning idle or busy (`SessionIdle` /
  `SessionActive`, forwarded here as the `utilisation` signal); idle past `idle_limit_s` it is warned,
  still idle `idle_grace_s` later it loses its protection (`revoke_protection` to the JobRun, then
  `ProtectionRevoked`); it keeps being charged while it holds GPUs.

Restore is a command (`RestoreSession`), not a workflow: it opens a new job from the last checkpoint whose
history links old and new (`SessionRestored` on the old job, `restored_from` on the new).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steward.domain import protection as times
    from steward.domain.commands import OpenSession, RevokeProtection, WarnSession
    from steward_workflows.payloads import (
        CapReached,
        Revocation,
        SessionCarry,
        SessionInput,
        SessionResult,
        UtilisationSignal,
    )
    from steward_workflows.publishing import publish


def warning_times(started_at: float, cap_at: float, warnings_s: list[float]) -> list[float]:
    """DESIGN.md "warned before the cap": the rule of `steward.domain.protection.warning_times`."""
    return list(times.warning_times(started_at, cap_at, warnings_s))


@workflow.defn(name="Session")
class SessionWorkflow:
    def __init__(self) -> None:
        self._changed = False
        self._idle_since: float | None = None
        self._idle_warned_at: float | None = None
        self._revoked = False
        self._warnings_sent = 0

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionResult:
        t = inp.timings
        cap_at = inp.started_at + inp.cap_s
        warnings = warning_times(inp.started_at, cap_at, t.session_warnings_s)
        if inp.carry is None:
            await publish(OpenSession(inp.job_id, inp.attempt, cap_at, warnings, t.session_at_cap, t.idle_limit_s),
                          f"session-open-{inp.job_id}-{inp.attempt}", inp.correlation_id)
        else:
            c = inp.carry
            self._warnings_sent, self._revoked = c.warnings_sent, c.revoked
            self._idle_since, self._idle_warned_at = c.idle_since, c.idle_warned_at
        parent = workflow.get_external_workflow_handle(inp.parent_workflow_id)
        try:
            while True:
                now = workflow.now().timestamp()
                if now >= cap_at:
                    await parent.signal("session_cap_reached", CapReached(t.session_at_cap))
                    return SessionResult(inp.job_id, inp.attempt, "cap", self._warnings_sent, self._revoked)
                if self._warnings_sent < len(warnings) and now >= warnings[self._warnings_sent]:
                    await self._warn_cap(inp, cap_at - warnings[self._warnings_sent])
                    continue
                if self._idle_deadline(inp) is not None and now >= (self._idle_deadline(inp) or 0.0):
                    await self._on_idle_deadline(inp, parent)
                    continue
                if self._history_full(t.max_history):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(replace(inp, carry=self._carry()))
                due = [cap_at]
                if self._warnings_sent < len(warnings):
                    due.append(warnings[self._warnings_sent])
                if (deadline := self._idle_deadline(inp)) is not None:
                    due.append(deadline)
                self._changed = False
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(lambda: self._changed, timeout=max(min(due) - now, 0.001))
        except (asyncio.CancelledError, ActivityError):  # the attempt ended (its JobRun cancels its session)
            return SessionResult(inp.job_id, inp.attempt, "ended", self._warnings_sent, self._revoked)

    async def _warn_cap(self, inp: SessionInput, seconds_left: float) -> None:
        i = self._warnings_sent
        await publish(WarnSession(inp.job_id, inp.attempt, "cap", seconds_left, {"warning": i + 1}),
                      f"session-warn-{inp.job_id}-{inp.attempt}-cap-{i}", inp.correlation_id)
        self._warnings_sent = i + 1

    def _idle_deadline(self, inp: SessionInput) -> float | None:
        """Idle past the limit: a warning; still idle `idle_grace_s` after it: protection revoked."""
        t = inp.timings
        if t.idle_limit_s <= 0 or self._revoked or self._idle_since is None:
            return None
        if self._idle_warned_at is None:
            return self._idle_since + t.idle_limit_s
        return self._idle_warned_at + t.idle_grace_s

    async def _on_idle_deadline(self, inp: SessionInput, parent: workflow.ExternalWorkflowHandle[Any]) -> None:
        t = inp.timings
        idle_since = self._idle_since
        if self._idle_warned_at is None:
            self._idle_warned_at = workflow.now().timestamp()
            await publish(WarnSession(inp.job_id, inp.attempt, "idle", t.idle_grace_s,
                                      {"idle_since": idle_since, "idle_limit_s": t.idle_limit_s}),
                          f"session-warn-{inp.job_id}-{inp.attempt}-idle-{idle_since}", inp.correlation_id)
            return
        evidence = {"idle_since": idle_since, "idle_limit_s": t.idle_limit_s, "idle_grace_s": t.idle_grace_s,
                    "warned_at": self._idle_warned_at}
        self._revoked = True
        await parent.signal("revoke_protection", Revocation("idle", evidence))
        await publish(RevokeProtection(inp.job_id, inp.attempt, "idle", evidence),
                      f"revoke-{inp.job_id}-{inp.attempt}", inp.correlation_id)

    def _history_full(self, max_history: int) -> bool:
        """Past `max_history` events, or when the server suggests it (its own size and count thresholds;
        patched: runs recorded before this honoured only `max_history`, and replay them unchanged)."""
        info = workflow.info()
        if info.get_current_history_length() > max_history:
            return True
        return info.is_continue_as_new_suggested() and workflow.patched("session-continue-as-new-when-suggested")

    def _carry(self) -> SessionCarry:
        return SessionCarry(self._warnings_sent, self._idle_since, self._idle_warned_at, self._revoked)

    @workflow.signal
    def utilisation(self, report: UtilisationSignal) -> None:
        """The executor's view: idle since `since`, or busy again (which forgives an idle warning)."""
        if report.idle:
            if self._idle_since is None:
                self._idle_since = report.since
        else:
            self._idle_since = None
            self._idle_warned_at = None
        self._changed = True

    @workflow.query
    def idle_since(self) -> float | None:
        return self._idle_since
