"""Why a job waits or was preempted, in plain words and structured evidence.

The answer comes from what was recorded, newest first:
1. an explanation in the job's events: any event whose payload carries `explanation` (the scheduler's
   `steward.policy.explain` output: reason, blocking_gpus, blocking_scope, blocking_until, position,
   position_in_project, evidence), or whose payload is one (types `JobExplained`/`JobDeferred`);
2. otherwise one derived from the projections: free GPUs per node against the job's gang, and its place
   in the queue. `source` says which.

Preemption: the newest event of a preemption type (`JobPreempted`, `PreemptionRequested`, ...) with its
payload's evidence (victim choice, the waiting job it made room for, ranks, protection state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from steward.api.readmodel import QueueItem, ReadView
from steward.domain.identity import person
from steward.policy.churn import CONSOLIDATE_RULE
from steward.policy.reasons import moved_words
from steward.store.eventstore import RecordedEvent

EXPLANATION_EVENTS = ("JobExplained", "JobDeferred")
PREEMPTION_EVENTS = ("JobPreempted", "PreemptionRequested", "JobPreemptionRequested", "JobCheckpointRequested")
WAITING = ("QUEUED", "PREEMPTED")

# reason codes (the scheduler's own are passed through as recorded)
TOO_LARGE = "too_large"
INSUFFICIENT_CAPACITY = "insufficient_capacity"
WAITING_FOR_CYCLE = "waiting_for_cycle"
NOT_WAITING = "not_waiting"
NOT_PREEMPTED = "not_preempted"


@dataclass(frozen=True, slots=True)
class Why:
    job_id: str
    reason: str
    text: str
    source: str  # "recorded" (from an event) or "derived" (from the projections)
    blocking_gpus: int = 0
    blocking_scope: str = ""
    blocking_until: float | None = None
    position: int | None = None
    position_in_project: int | None = None
    event_position: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    position_in_clusters: int | None = None
    """ADR 0073: the order's position now among the waiting jobs that accept a cluster it accepts."""


def _recorded(events: Sequence[RecordedEvent], types: tuple[str, ...], key: str) -> RecordedEvent | None:
    for ev in reversed(events):
        if ev.type in types or isinstance(ev.payload.get(key), dict):
            return ev
    return None


def _from_recorded(job_id: str, ev: RecordedEvent, key: str) -> Why:
    nested = ev.payload.get(key)
    data: dict[str, Any] = nested if isinstance(nested, dict) else ev.payload
    raw_evidence = data.get("evidence")
    evidence: dict[str, Any] = raw_evidence if isinstance(raw_evidence, dict) else {}
    reason = str(data.get("reason") or data.get("code") or ev.type)
    text = str(data.get("text") or data.get("words") or f"{reason} (recorded at position {ev.position})")
    until = data.get("blocking_until")
    return Why(
        job_id, reason, text, "recorded", int(data.get("blocking_gpus") or 0), str(data.get("blocking_scope") or ""),
        float(until) if isinstance(until, int | float) else None,
        data.get("position") if isinstance(data.get("position"), int) else None,
        data.get("position_in_project") if isinstance(data.get("position_in_project"), int) else None,
        ev.position, dict(evidence),
    )


def why_pending(job: dict[str, Any], events: Sequence[RecordedEvent], snap: ReadView) -> Why:
    job_id = job["job_id"]
    if job["state"] not in WAITING:
        return Why(job_id, NOT_WAITING, f"job {job_id} is not waiting: it is {job['state']}", "derived")
    rec = _recorded(events, EXPLANATION_EVENTS, "explanation")
    if rec is not None and rec.position >= max((e.position for e in events if e.type != "CommandRejected"), default=0):
        why = _from_recorded(job_id, rec, "explanation")
        item = next((q for q in snap.queue() if q.job["job_id"] == job_id), None)
        # the reason is the scheduler's as recorded; the positions are the order's now
        return replace(why, position=item.position, position_in_project=item.position_in_project,
                       position_in_clusters=item.position_in_clusters) if item else why
    return derive_pending(job, snap)


def derive_pending(job: dict[str, Any], snap: ReadView, item: QueueItem | None = None) -> Why:
    if item is None:
        item = next((q for q in snap.queue() if q.job["job_id"] == job["job_id"]), None)
    position = item.position if item else None
    in_project = item.position_in_project if item else None
    in_clusters = item.position_in_clusters if item else None
    max_node, max_free, total, total_free = snap.capacity_figures()
    gpus = int(job["gpus"])
    ahead = (position - 1) if position else 0
    place = f"position {position} of {len(snap.queue())} in the queue, {in_project} in project {job['project']}"
    if in_clusters is not None and in_clusters != position:  # ADR 0073: several clusters
        place += f", {in_clusters} among the jobs waiting for the clusters it accepts"
    evidence: dict[str, Any] = {
        "gpus": gpus, "largest_node_gpus": max_node, "largest_free_on_one_node": max_free,
        "cluster_gpus": total, "cluster_free_gpus": total_free, "jobs_ahead": ahead,
        "priority": job["priority"], "submitted_at": job["submitted_at"], **order_evidence(job, snap),
    }
    if gpus > total:
        blocking, scope = gpus - total, "the cluster"
        return Why(job["job_id"], TOO_LARGE, f"can never fit: needs {blocking} more GPUs than the cluster has",
                   "derived", blocking, scope, None, position, in_project, None, evidence, in_clusters)
    if gpus <= max_node:
        scope, usable = "one node", max_free
    else:
        scope, usable = "the cluster (whole nodes)", total_free
    if usable < gpus:
        blocking = gpus - usable
        return Why(job["job_id"], INSUFFICIENT_CAPACITY, f"needs {blocking} more GPUs in {scope}; {place}",
                   "derived", blocking, scope, None, position, in_project, None, evidence, in_clusters)
    return Why(job["job_id"], WAITING_FOR_CYCLE,
               f"room exists in {scope}; the scheduler places it at its next cycle unless jobs ahead take it; {place}",
               "derived", 0, scope, None, position, in_project, None, evidence, in_clusters)


def order_evidence(job: dict[str, Any], snap: ReadView) -> dict[str, Any]:
    """How the queue is ordered, and the job's project's fair-share standing (ranks, shares, usage)."""
    order = snap.policy_order()
    if order is None:
        return {"order": "priority, then submit time"}
    words = ("hierarchical fair share (most under-served project first), then priority and submit time "
             "inside the project") if order.ordering == "fair_share" else "priority, then submit time"
    return {"order": words, "ordering": order.ordering, "standing": order.standing.get(job["project"])}


def queued(job: dict[str, Any], snap: ReadView, item: QueueItem,
           deferral: tuple[int, dict[str, Any]] | None) -> Why:
    """A queue entry's reason: the scheduler's latest recorded explanation (`JobDeferred`) when it is
    newer than the job's last change, else one derived from the projections. Positions are always the
    current order's."""
    if deferral is None or deferral[0] < int(job["position"]):
        return derive_pending(job, snap, item)
    position, data = deferral
    raw = data.get("evidence")
    until = data.get("blocking_until")
    return Why(job["job_id"], str(data.get("reason") or "deferred"),
               str(data.get("text") or f"{data.get('reason')} (recorded at position {position})"), "recorded",
               int(data.get("blocking_gpus") or 0), str(data.get("blocking_scope") or ""),
               float(until) if isinstance(until, int | float) else None, item.position, item.position_in_project,
               position, dict(raw) if isinstance(raw, dict) else {}, item.position_in_clusters)


def why_preempted(job: dict[str, Any], events: Sequence[RecordedEvent]) -> Why:
    """The newest preemption as recorded, with its story (`evidence["preemption"]`, `preemption_story`)
    and words that say who gained, by how much, and the requester's note."""
    rec = _recorded(events, PREEMPTION_EVENTS, "preemption")
    if rec is None:
        return Why(job["job_id"], NOT_PREEMPTED, f"job {job['job_id']} has not been preempted", "derived")
    why = _from_recorded(job["job_id"], rec, "preemption")
    attempt = rec.payload.get("attempt")
    request = next((e for e in reversed(events) if e.type == "JobPreemptionRequested" and e.position <= rec.position
                    and (attempt is None or e.payload.get("attempt") in (None, attempt))), None)
    story = preemption_story(request.payload if request else None, rec.payload if rec is not request else None)
    nested = rec.payload.get("preemption")
    text = why.text if isinstance(nested, dict) and nested.get("text") else preemption_words(job["job_id"], story)
    return replace(why, text=text, evidence=why.evidence | {"preemption": story})


def _part(evidence: dict[str, Any], key: str) -> dict[str, Any]:
    value = evidence.get(key)
    return value if isinstance(value, dict) else {}


def preemption_story(requested: dict[str, Any] | None, preempted: dict[str, Any] | None) -> dict[str, Any]:
    """Who gained and by how much, and who asked, from the recorded request (`JobPreemptionRequested`: the
    scheduler's evidence names the waiting job and its allocation, and the churn rule's gain and cost, see
    `steward.policy.churn.ChurnCheck.evidence`; a manager's request carries `requested_by` and `note`) and
    the recorded stop (`JobPreempted`). Times are seconds since the epoch; a viewer shows them in its zone."""
    req = requested or {}
    stop = preempted or {}
    ev: dict[str, Any] = dict(req.get("evidence") or {})
    stop_ev: dict[str, Any] = dict(stop.get("evidence") or {})
    waiting, churn, victim = (_part(ev, k) for k in ("waiting", "churn", "victim"))
    beneficiary = waiting.get("job_id") or req.get("for_job_id") or stop_ev.get("for_job_id") or None
    lost = ev.get("lost_gpu_s", victim.get("lost_gpu_s"))
    return {
        "reason": str(stop.get("reason") or req.get("reason") or ""),
        "moved": ev.get("rule") == CONSOLIDATE_RULE,  # ADR 0034, 0044: a consolidation move
        "beneficiary_job_id": beneficiary,
        "beneficiary_allocation": waiting.get("project"),
        "beneficiary_gpus": waiting.get("gpus"),
        "gain_gpu_s": churn.get("gain_gpu_s"),
        "cost_gpu_s": churn.get("cost_gpu_s", lost),
        "lost_gpu_s": lost,
        "requested_by": ev.get("requested_by"),
        "requested_by_name": ev.get("requested_by_name"),  # the person's name (single sign-on), when one asked
        "requested_role": ev.get("role"),
        "note": ev.get("note") or None,
        "requested_at": req.get("requested_at", stop_ev.get("requested_at")),
        "grace_s": req.get("grace_s", stop_ev.get("grace_s")),
        "stopped_at": stop_ev.get("stopped_at"),
        "requeued": stop.get("requeue", req.get("requeue")),
    }


def _gpu_h(gpu_s: Any) -> str:
    return "unbounded" if isinstance(gpu_s, float) and gpu_s == float("inf") else f"{float(gpu_s) / 3600:.2f} GPU-h"


def preemption_words(job_id: str, story: dict[str, Any]) -> str:
    """`preemption_story` in one sentence (no times: the viewer shows those in its own zone)."""
    reason = str(story["reason"] or "preemption").replace("_", " ")
    stopped = "was preempted" if story["stopped_at"] is not None else "is being preempted"
    parts = [f"job {job_id} {stopped} ({reason})"]
    if story.get("moved"):
        parts = [moved_words(job_id, story["stopped_at"] is not None, story["beneficiary_job_id"],
                             story["beneficiary_allocation"], story["beneficiary_gpus"])]
    elif story["beneficiary_job_id"]:
        who = f"job {story['beneficiary_job_id']}"
        if story["beneficiary_allocation"]:
            who += f" in allocation {story['beneficiary_allocation']}"
        if story["beneficiary_gpus"] is not None:
            who += f", {story['beneficiary_gpus']} GPUs"
        parts.append(f"to make room for {who}")
    if story["gain_gpu_s"] is not None and story["cost_gpu_s"] is not None:
        parts.append(f"it gained {_gpu_h(story['gain_gpu_s'])} of earlier start against "
                     f"{_gpu_h(story['cost_gpu_s'])} of work lost here")
    elif story["lost_gpu_s"] is not None:
        parts.append(f"{_gpu_h(story['lost_gpu_s'])} of work since the last checkpoint was lost")
    if story["requested_by"]:
        asked = f"asked by {person(story['requested_by'], story.get('requested_by_name'))}" + (
            f" ({story['requested_role']})" if story["requested_role"] else "")
        parts.append(asked + (f": \"{story['note']}\"" if story["note"] else ""))
    return "; ".join(parts)
