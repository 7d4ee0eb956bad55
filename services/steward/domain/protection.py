"""The contract's times: the one home of protection, a session's cap, its warnings and the grace of a
preemption (DESIGN.md "The time-slicing contract" and "Interactive sessions").

Pure arithmetic on primitives (no settings object: the caller passes the policy's values), called by the
ledger (`decide`/`evolve`, which records `protection_s` and `session_cap_s` with each placement), the policy
(`steward.policy.contract`, `steward.policy.sessions`: the scheduler and the simulator), and the JobRun and
Session workflows, so all of them compute the same end of protection, cap and warnings from the same start.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_MIN_RUNTIME_S = 8 * 3600.0
DEFAULT_SESSION_CAP_S = 8 * 3600.0


def session_cap_s(min_runtime_s: float, default_cap_s: float = DEFAULT_SESSION_CAP_S,
                  max_min_runtime_s: float = MAX_MIN_RUNTIME_S) -> float:
    """DESIGN.md "Interactive sessions": a session is protected for its cap (the policy's `session_cap_s`,
    8 h by default). A session's `min_runtime` asks for a shorter cap; 0 takes the policy's; never beyond
    the contract's cap on protection (`max_min_runtime_s`, "policy-capped")."""
    cap = min_runtime_s if min_runtime_s > 0 else default_cap_s
    return min(cap, max_min_runtime_s)


def protection_s(job_class: str, min_runtime_s: float, funded: bool,
                 default_cap_s: float = DEFAULT_SESSION_CAP_S, max_min_runtime_s: float = MAX_MIN_RUNTIME_S) -> float:
    """DESIGN.md "Funded occupancy": protected for `min_runtime` from each start (policy-capped at
    `max_min_runtime_s`); "Unfunded occupancy": preemptible at once; "Interactive sessions": protected for
    the cap (`session_cap_s`)."""
    if not funded:
        return 0.0
    if job_class == "interactive":
        return session_cap_s(min_runtime_s, default_cap_s, max_min_runtime_s)
    return min(max(min_runtime_s, 0.0), max_min_runtime_s)


def warning_times(started_at: float, cap_at: float, warnings_s: Iterable[float]) -> tuple[float, ...]:
    """DESIGN.md "warned before the cap": absolute times of the warnings (`warnings_s` before the cap),
    earliest first; none at or before the start."""
    return tuple(sorted({cap_at - w for w in warnings_s if w > 0 and cap_at - w > started_at}))


def grace_s(funded: bool, grace_s_: float, unfunded_grace_s: float | None) -> float:
    """DESIGN.md "checkpoint request, grace period, stop": the grace a victim gets. Unfunded work is
    "preemptible at once" and gets `unfunded_grace_s` when the policy sets one (ADR 0007)."""
    if not funded and unfunded_grace_s is not None:
        return unfunded_grace_s
    return grace_s_
