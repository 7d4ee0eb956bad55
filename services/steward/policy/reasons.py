"""The reason codes of an explanation and their plain words (issue 3 "Explanations"; DESIGN.md "'Why
pending' ... answered from those events"). Every code is stable: it ends up in events and the API.

This module sits below `steward.policy.model` (an `Explanation` renders its text with it) and imports
nothing of the policy, so the model and the explanations that build on it import in one direction
(ADR 0040).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol


class Explained(Protocol):
    """What the words read of an explanation (`steward.policy.model.Explanation`)."""

    @property
    def reason(self) -> str: ...
    @property
    def blocking_gpus(self) -> int: ...
    @property
    def blocking_scope(self) -> str: ...
    @property
    def blocking_until(self) -> float | None: ...
    @property
    def position(self) -> int: ...
    @property
    def evidence(self) -> Mapping[str, Any]: ...


# Why a job would run unfunded: `contract.funding_gap` returns them (the rule lives there)
NO_ALLOCATION = "no_allocation"
UNFUNDED_BY_REQUEST = "unfunded_by_request"
ENTITLEMENT_USED = "entitlement_used"
# Why a job waits (the cycle's phases and the bulk explanations of steward.policy.explain give them)
WAITING_FOR_PROTECTION = "waiting_for_protection"
OUTRANKED = "outranked"
INSUFFICIENT_CAPACITY = "insufficient_capacity"
PREEMPTING = "preempting"
RESERVED = "reserved"
BLOCKED_BY_RESERVATION = "blocked_by_reservation"
TOO_LARGE = "too_large"
PREEMPTION_COSTS_MORE = "preemption_costs_more"

REASONS: tuple[str, ...] = (
    NO_ALLOCATION,
    UNFUNDED_BY_REQUEST,
    ENTITLEMENT_USED,
    WAITING_FOR_PROTECTION,
    OUTRANKED,
    INSUFFICIENT_CAPACITY,
    PREEMPTING,
    RESERVED,
    BLOCKED_BY_RESERVATION,
    TOO_LARGE,
    PREEMPTION_COSTS_MORE,
)


def moved_words(job_id: str, stopped: bool, beneficiary: str | None, allocation: str | None,
                gpus: int | None) -> str:
    """"Why preempted" for a consolidation move (ADR 0034, 0044: `churn.CONSOLIDATE_RULE`): the job was
    unfunded work on idle capacity, stopped so that its node's idle GPUs could be gathered for a job
    that fitted on no node, and it restarts at once on idle GPUs of another node (the move is made
    only when those exist: `churn.relocation_fits`)."""
    for_whom = "a waiting job"
    if beneficiary:
        for_whom = f"job {beneficiary}" + (f" in allocation {allocation}" if allocation else "")
    size = f" of {gpus} GPUs" if gpus is not None else ""
    moved = "was moved" if stopped else "is being moved"
    return (f"job {job_id} {moved}: it ran unfunded on idle capacity, and its node's idle GPUs were "
            f"gathered for {for_whom}{size}, which fitted on no node; it restarts at once on idle GPUs "
            f"of another node")


def _when(t: float | None, now: float) -> str:
    if t is None or math.isinf(t):
        return "an unknown time"
    d = max(0.0, t - now)
    h, rem = divmod(round(d), 3600)
    m, s = divmod(rem, 60)
    rel = f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")
    return f"t={t:.0f} (in {rel})"


def _rank_words(e: Explained) -> str:
    rank = e.evidence.get("rank", {})
    on = rank.get("on_cluster")  # ADR 0080: ordered by its standing on the cluster where it ranks best
    levels = (on or rank).get("levels") or []
    if not levels:
        return f"position {e.position} in the queue"
    lvl = levels[-1]
    where = f" on {on['cluster']}" if on else ""
    return f"allocation {lvl['allocation']} ranked {lvl['rank']} of {lvl['of']} at its level{where}"


def debug_quota_words(q: Mapping[str, Any]) -> str:
    """DESIGN.md "Debug quota": whether a debug job or session is qualified, with the figures
    (`Qualification.to_dict()`, as explanations carry it under `debug_quota`)."""
    figures = (f"debug quota {q.get('quota_gpus', 0)} GPUs, {q.get('in_use_gpus', 0)} in use, "
               f"{q.get('ahead_gpus', 0)} waiting ahead")
    if q.get("qualified"):
        return f"qualified for the debug lane ({figures}): it goes ahead of the fair-share order"
    if q.get("reason") == "over_quota":
        return f"over its allocation's debug quota ({figures}): it waits as ordinary funded work"
    return f"not qualified for the debug lane ({q.get('reason')})"


def explanation_text(e: Explained) -> str:
    """Plain words for one explanation (DESIGN.md: "'Why pending' ... answered from those events"),
    with the debug lane's qualification after it for debug work (ADR 0029)."""
    text = _reason_text(e)
    pinned = e.evidence.get("pinned_to")
    if isinstance(pinned, Mapping):  # ADR 0067: it waits for room on its pin's cluster, not elsewhere
        text += (f"; its allocation is pinned to cluster {pinned.get('cluster')} "
                 f"({pinned.get('free_gpus', 0)} GPUs it accepts free there): it runs only there")
    q = e.evidence.get("debug_quota")
    return f"{text}; {debug_quota_words(q)}" if isinstance(q, Mapping) else text


def _request_words(ev: Mapping[str, Any]) -> str:
    models, clusters = ev.get("gpu_models") or (), ev.get("clusters") or ()
    parts = ([f"GPU models {', '.join(map(str, models))}"] if models else []) + (
        [f"clusters {', '.join(map(str, clusters))}"] if clusters else [])
    return "; ".join(parts) or "any node"


def _reason_text(e: Explained) -> str:
    need = f"needs {e.blocking_gpus} more GPUs in {e.blocking_scope}"
    until = _when(e.blocking_until, e.evidence.get("now", 0.0))
    ev = e.evidence
    if e.reason == NO_ALLOCATION:
        return f"project {ev.get('project')} has no allocation: it runs unfunded, only on idle capacity; {need}"
    if e.reason == UNFUNDED_BY_REQUEST:
        return f"asked for no protection (min_runtime 0): it runs unfunded, only on idle capacity; {need}"
    if e.reason == ENTITLEMENT_USED:
        f = ev.get("funding", {})
        units = "weighted GPUs" if f.get("units") == "weighted_gpus" else "GPUs"  # ADR 0090
        return (
            f"allocation {f.get('allocation')} has no entitlement left ({f.get('funded_gpus', 0):g} of "
            f"{f.get('quota_gpus', 0):.1f} {units} funded): it runs unfunded, only on idle capacity; {need}"
        )
    if e.reason == WAITING_FOR_PROTECTION:
        return f"{need}; waiting for protections that end at {until}; {_rank_words(e)}"
    if e.reason == OUTRANKED:
        return (
            f"{need}; {_rank_words(e)}: the GPUs it needs are held by work that is not less served "
            f"or go first to jobs ahead of it"
        )
    if e.reason == PREEMPTING:
        return f"making room: {ev.get('victims', 0)} job(s) checkpoint and stop for it by {until}"
    if e.reason == RESERVED:
        return f"holds a reservation on {'/'.join(ev.get('domain', []))}: room assembles by {until}"
    if e.reason == BLOCKED_BY_RESERVATION:
        return (
            f"the free GPUs that fit it are reserved for {ev.get('reserved_for')} until {until}, "
            f"and its protection would outlast that; {need}"
        )
    if e.reason == PREEMPTION_COSTS_MORE:
        c = ev.get("churn", {})
        return (
            f"{need}; the cheapest preemption would throw away {c.get('cost_gpu_s', 0):.0f} GPU-seconds of "
            f"work, more than the {c.get('gain_gpu_s', 0):.0f} it would gain by starting early (ADR 0028): "
            f"it waits for GPUs to free; {_rank_words(e)}"
        )
    if e.reason == TOO_LARGE:
        if not ev.get("largest_gpus"):
            return (f"can never fit: no registered node offers what it accepts ({_request_words(ev)}); "
                    "cancel it, or ask an admin for such nodes")
        return (
            f"can never fit: it needs {ev.get('gpus')} GPUs in {e.blocking_scope}, and the largest has "
            f"{ev.get('largest_gpus', 0)} schedulable GPUs"
        )
    return f"{need}; {_rank_words(e)}"
