"""Evidence a person can read (issue 19): times as dates in the viewer's zone (the CLI's: the local one),
shares as fractions with before -> after, and a preemption's story in lines. Pure formatting."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any

from steward.domain.identity import person

# evidence keys that hold a time (seconds since the epoch); everything else is shown as recorded
TIME_KEYS = frozenset({"now", "start_by_preemption", "start_without", "blocking_until", "ready_at"})


def is_time_key(key: str) -> bool:
    return key in TIME_KEYS or key.endswith("_at") or key.endswith("_until")


def local_time(epoch_s: float | None, tz: tzinfo | None = None) -> str:
    """`2026-12-02 06:10:03 CET`: the viewer's zone (`tz`; None: this machine's local zone)."""
    if epoch_s is None:
        return "-"
    at = datetime.fromtimestamp(float(epoch_s), UTC).astimezone(tz)
    return at.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def readable_evidence(value: Any, tz: tzinfo | None = None, key: str = "") -> Any:
    """The evidence with every time (by key: `*_at`, `*_until`, `now`, ...) as a local date; the rest as is."""
    if isinstance(value, dict):
        return {k: readable_evidence(v, tz, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [readable_evidence(v, tz, key) for v in value]
    if is_time_key(key) and isinstance(value, int | float) and not isinstance(value, bool) \
            and value not in (float("inf"), float("-inf")):
        return local_time(value, tz)
    return value


# the API's contract times of a job (epoch seconds, as its events recorded them): shown as local dates
CONTRACT_TIME_FIELDS = ("protectedUntil", "sessionCapAt", "sessionWarningsAt")


def contract_times(job: dict[str, Any], tz: tzinfo | None = None) -> dict[str, Any]:
    """`job` (the API's Job fields) with `protectedUntil`, `sessionCapAt` and each of `sessionWarningsAt` as
    local dates (`-` when not recorded); the other fields as they are."""
    out = dict(job)
    for key in CONTRACT_TIME_FIELDS:
        if key not in out:
            continue
        value = out[key]
        if isinstance(value, list):
            out[key] = ", ".join(local_time(v, tz) for v in value) or "-"
        else:
            out[key] = local_time(value, tz)
    return out


def share_change(before: float | None, after: float) -> str:
    return f"new -> {after:.3f}" if before is None else f"{before:.3f} -> {after:.3f}"


def quota_change(before: int | None, after: int | None, named: bool) -> str:
    def q(x: int | None) -> str:
        return "default" if x is None else str(x)
    return f"{q(before)} -> {q(after)}" if named else q(after)


def name_change(before: str | None, after: str | None, named: bool) -> str:
    """A display name before -> after when the change named it (`(id)`: shown by its id), else the name then."""
    def n(x: str | None) -> str:
        return "(id)" if x is None else repr(x) if x != x.strip() else x
    if named:
        return f"{n(before)} -> {n(after)}"
    return "-" if after is None else n(after)


def pin_change(before: str | None, after: str | None, named: bool) -> str:
    """A pin before -> after when the change named it (`any`: unpinned, ADR 0067), else the pin then."""
    def p(x: str | None) -> str:
        return "any" if x is None else x
    if named:
        return f"{p(before)} -> {p(after)}"
    return "-" if after is None else after


def history_rows(entries: list[dict[str, Any]], tz: tzinfo | None = None) -> list[list[str]]:
    """`allocationHistory` entries as table rows: when, allocation, its display name, share, debug quota and
    pin before -> after, who, why."""
    return [[local_time(e["recordedAt"], tz), e["allocation"],
             name_change(e.get("displayNameBefore"), e.get("displayNameAfter"), bool(e.get("displayNameSet"))),
             e["parent"], share_change(e["shareBefore"], e["shareAfter"]),
             quota_change(e["debugQuotaBefore"], e["debugQuotaAfter"], e["debugQuotaSet"]),
             pin_change(e.get("pinBefore"), e.get("pinAfter"), bool(e.get("pinSet"))),
             e["actor"] or "-", e["reason"], str(e["position"])] for e in entries]


HISTORY_HEADERS = ["when", "allocation", "name", "parent", "share", "debug quota", "pin", "by", "reason",
                   "position"]


def preemption_lines(story: dict[str, Any], tz: tzinfo | None = None) -> list[str]:
    """The story of a preemption (`steward.api.explain.preemption_story`) in lines, times in `tz`."""
    lines: list[str] = []
    if story.get("beneficiary_job_id"):
        who = f"gained: job {story['beneficiary_job_id']}"
        if story.get("beneficiary_allocation"):
            who += f" (allocation {story['beneficiary_allocation']})"
        if story.get("beneficiary_gpus") is not None:
            who += f", {story['beneficiary_gpus']} GPUs"
        lines.append(who)
    gain, cost = story.get("gain_gpu_s"), story.get("cost_gpu_s")
    if gain is not None and cost is not None:
        lines.append(f"by how much: {_gpu_h(gain)} of earlier start against {_gpu_h(cost)} of work lost here")
    elif story.get("lost_gpu_s") is not None:
        lines.append(f"work lost: {_gpu_h(story['lost_gpu_s'])} since the last checkpoint")
    if story.get("requested_by"):
        role = f" ({story['requested_role']})" if story.get("requested_role") else ""
        lines.append(f"asked by: {person(story['requested_by'], story.get('requested_by_name'))}{role}")
    if story.get("note"):
        lines.append(f"note: {story['note']}")
    if story.get("requested_at") is not None:
        lines.append(f"requested: {local_time(story['requested_at'], tz)}")
    if story.get("stopped_at") is not None:
        lines.append(f"stopped: {local_time(story['stopped_at'], tz)}")
    return lines


def _gpu_h(gpu_s: Any) -> str:
    if gpu_s is None:
        return "-"
    return "unbounded" if float(gpu_s) == float("inf") else f"{float(gpu_s) / 3600:.2f} GPU-h"
