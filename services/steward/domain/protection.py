"""How long a start is protected (DESIGN.md "The time-slicing contract" and "Interactive sessions").

Pure arithmetic on primitives, shared by the ledger (`decide`/`evolve`) and the JobRun workflow, so both
compute the same end of protection from the same start.
"""

from __future__ import annotations

MAX_MIN_RUNTIME_S = 8 * 3600.0
DEFAULT_SESSION_CAP_S = 8 * 3600.0


def session_cap_s(min_runtime_s: float, default_cap_s: float = DEFAULT_SESSION_CAP_S) -> float:
    """DESIGN.md "Interactive sessions": a session is protected for its cap (8 h by default). A session's
    `min_runtime` asks for a shorter cap; 0 takes the policy's default; never beyond the contract's cap."""
    cap = min_runtime_s if min_runtime_s > 0 else default_cap_s
    return min(cap, MAX_MIN_RUNTIME_S)


def protection_s(job_class: str, min_runtime_s: float, funded: bool,
                 default_cap_s: float = DEFAULT_SESSION_CAP_S) -> float:
    """DESIGN.md "Funded occupancy": protected for `min_runtime` from each start (policy-capped);
    "Unfunded occupancy": preemptible at once; "Interactive sessions": protected for the cap."""
    if not funded:
        return 0.0
    if job_class == "interactive":
        return session_cap_s(min_runtime_s, default_cap_s)
    return min(max(min_runtime_s, 0.0), MAX_MIN_RUNTIME_S)
