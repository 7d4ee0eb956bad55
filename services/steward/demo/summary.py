"""The demo's figures, read through the API (as the UI reads them): jobs by state, occupancy per executor,
preemptions and session caps/restores from the event log, and owed vs delivered per allocation."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx

from steward.config import Settings

FIGURES = """query($window: Float!) {
  jobCounts { state count }
  nodes { id executor gpus usedGpus jobs }
  allocations(windowS: $window) { name depth isProject entitlement owed delivered deliveredOverOwed overDelivered
    window windowStart windowEnd runningGpus waitingJobs }
}"""
EVENTS = """query($after: String, $filter: EventFilter!) {
  auditEvents(first: 500, after: $after, filter: $filter) {
    edges { cursor node { streamId type payload } } pageInfo { hasNextPage endCursor } } }"""
COUNTED_EVENTS = ["JobPreempted", "SessionCapReached", "SessionRestored", "JobPreemptionRequested"]
WAITING = ("QUEUED",)


class SummaryError(RuntimeError):
    """The API could not be read; the message says why."""


def _post(settings: Settings, token: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    try:
        resp = httpx.post(settings.resolved_api_url, json={"query": query, "variables": variables},
                          headers={"Authorization": f"Bearer {token}"}, timeout=60)
    except httpx.HTTPError as err:
        raise SummaryError(f"cannot reach the API at {settings.resolved_api_url} ({err.__class__.__name__})") from None
    if resp.status_code != 200:
        raise SummaryError(f"the API answered HTTP {resp.status_code}")
    body = resp.json()
    if body.get("errors"):
        raise SummaryError("; ".join(e.get("message", "?") for e in body["errors"]))
    data: dict[str, Any] = body["data"]
    return data


def event_counts(settings: Settings, token: str, since: float) -> dict[str, Any]:
    """Preemptions (by reason) and session caps/restores recorded since `since` (the demo's start; a
    restored session is a new job with an id of the API's choosing, so the demo's prefix cannot find it)."""
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    preempted_jobs: list[str] = []
    after: str | None = None
    while True:
        page = _post(settings, token, EVENTS, {"after": after, "filter": {
            "since": since, "types": COUNTED_EVENTS}})["auditEvents"]
        for edge in page["edges"]:
            e = edge["node"]
            counts[e["type"]] += 1
            if e["type"] == "JobPreempted":
                reasons[str(e["payload"].get("reason"))] += 1
                preempted_jobs.append(str(e["payload"].get("job_id")))
        if not page["pageInfo"]["hasNextPage"] or not page["edges"]:
            break
        after = page["pageInfo"]["endCursor"]
    return {"preempted": counts["JobPreempted"], "preemption_requests": counts["JobPreemptionRequested"],
            "preempted_by_reason": dict(reasons), "session_caps": counts["SessionCapReached"],
            "session_restores": counts["SessionRestored"], "preempted_jobs": preempted_jobs}


def figures(settings: Settings, token: str, since: float, window_s: float) -> dict[str, Any]:
    """Everything the summary table shows, as one JSON-able mapping."""
    data = _post(settings, token, FIGURES, {"window": window_s})
    states = {c["state"]: c["count"] for c in data["jobCounts"]}
    by_executor: dict[str, dict[str, int]] = {}
    for n in data["nodes"]:
        e = by_executor.setdefault(n["executor"], {"nodes": 0, "gpus": 0, "used": 0, "jobs": 0})
        e["nodes"] += 1
        e["gpus"] += n["gpus"]
        e["used"] += n["usedGpus"]
        e["jobs"] += len(n["jobs"])
    total = sum(e["gpus"] for e in by_executor.values())
    used = sum(e["used"] for e in by_executor.values())
    events = event_counts(settings, token, since)
    return {
        "jobs_submitted": sum(states.values()),
        "jobs_running": states.get("RUNNING", 0) + states.get("PLACED", 0) + states.get("PREEMPTING", 0),
        "jobs_waiting": sum(states.get(s, 0) for s in WAITING),
        "jobs_by_state": states,
        "occupancy": round(used / total, 3) if total else 0.0,
        "gpus_used": used, "gpus_total": total,
        "executors": by_executor,
        **{k: v for k, v in events.items() if k != "preempted_jobs"},
        "preempted_example": events["preempted_jobs"][-1] if events["preempted_jobs"] else None,
        "allocations": [a for a in data["allocations"] if a["isProject"]],
    }


def table(f: dict[str, Any], speed: float) -> str:
    """The summary as text: headline counts, executors, then owed vs delivered per project: the API's figures
    as `steward tree show` and the UI show them (GPU-hours of the live stack, over the window it states; a
    ratio above 1 is over-delivery). `speed` (trace seconds per real second) converts them to trace time."""
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(f["preempted_by_reason"].items())) or "none yet"
    window = f["allocations"][0]["window"] if f["allocations"] else "window"
    lines = [
        f"jobs: {f['jobs_submitted']} submitted, {f['jobs_running']} running, {f['jobs_waiting']} waiting, "
        f"{f['preempted']} preemptions ({reasons})",
        f"occupancy: {f['gpus_used']}/{f['gpus_total']} GPUs ({f['occupancy']:.0%})   "
        f"sessions: {f['session_caps']} reached their cap, {f['session_restores']} restored",
        "  ".join(f"{name}: {e['used']}/{e['gpus']} GPUs on {e['nodes']} node(s), {e['jobs']} job(s)"
                  for name, e in sorted(f["executors"].items())),
        "",
        f"owed vs delivered over the {window}, GPU-hours (x{speed:g} for trace time; ratio above 1 = over-delivery)",
        f"{'allocation':12} {'entitled':>8} {'owed GPU-h':>11} {'delivered':>10} {'ratio':>10} {'gpus':>5} "
        f"{'waiting':>8}",
    ]
    for a in f["allocations"]:
        r = a["deliveredOverOwed"]
        ratio = "-" if r is None else f"{r:.2f}" + (" over" if a["overDelivered"] else "")
        lines.append(f"{a['name']:12} {a['entitlement']:>8.1%} {a['owed'] / 3600:>11.1f} "
                     f"{a['delivered'] / 3600:>10.1f} {ratio:>10} {a['runningGpus']:>5} {a['waitingJobs']:>8}")
    return "\n".join(lines)
