"""Notifications (issue 24 "Being told", ADR 0050): which recorded events tell whom what. Pure: no IO, no
clock; the notifier (steward_workflows.notifications) feeds it the log and delivers what it returns.

- `decide_set_notifications`, `decide_delivery_failed`: the ledger's checks of the two commands.
- `Subscription`, `apply_notifications_set`: the choices in force, folded from `NotificationsSet` events.
- `notices_for(before, event, after, kinds)`: what one recorded event says, as notices (table below).
- `deliveries(notices, subscriptions, parents, position)`: who receives each notice, on which channel, under
  which delivery id (the receiver's de-duplication key: an e-mail's Message-ID, a webhook's Idempotency-Key).

| event                   | notice            | concerns                      | when                              |
| ----------------------- | ----------------- | ----------------------------- | --------------------------------- |
| SessionWarned           | session_warning   | the job's project             | always                            |
| SessionCapReached       | session_cap       | the job's project             | always                            |
| JobPreemptionRequested  | preemption        | the job's project             | always (reason and evidence)      |
| JobStarted              | started_unfunded  | the job's project             | the placement was unfunded        |
| JobFailed               | job_failed        | the job's project             | always (exit code)                |
| JobLost                 | job_lost          | the job's project             | always (reason, nodes)            |
| AllocationsSet          | share_changed     | the parent and its children   | a share changed                   |
| `BURN_EVENTS` (placements, shares, capacity) | burn_forecast | the allocation | its burn goes above 1 |

A subscription to an allocation receives the notices concerning it or any allocation under it (a manager
subscribes to their subtree's node, a researcher to their project). The subscriber is an identity string:
an API token's subject today, a person's subject once single sign-on lands (the one seam to change).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from steward.domain import budget
from steward.domain.commands import ROOT, RecordDeliveryFailed, SetNotifications
from steward.domain.errors import InvalidCommand, UnknownProject
from steward.domain.events import Event
from steward.domain.identity import person
from steward.domain.nodes import takes_new_work
from steward.domain.state import ACTIVE_STATES, LedgerState

# Each kind a subscriber can choose, with the words the CLI and the UI show for it.
KINDS: dict[str, str] = {
    "session_warning": "a session's cap or idle warning",
    "session_cap": "a session reached its cap (checkpointed and stopped, or made preemptible)",
    "preemption": "a job is asked to stop, with the decision's reason and evidence",
    "started_unfunded": "a job started unfunded (preemptible at once by funded work)",
    "job_failed": "a job failed (non-zero exit)",
    "job_lost": "a job was lost (its executor stopped answering); it is requeued",
    "share_changed": "a share changed in the subtree (managers)",
    "burn_forecast": "an allocation runs above its entitlement: at this burn it will exceed it (managers)",
}
CHANNELS = ("email", "webhook")
MAX_TARGET = 2000
MAX_SUBSCRIBER = 300
MAX_ERROR = 500
_EMAIL = re.compile(r"[^@\s<>,;:\"()\[\]\\]+@[^@\s<>,;:\"()\[\]\\]+\.[^@\s<>,;:\"()\[\]\\]+")
_URL = re.compile(r"https?://[^\s/?#@]+(?:[/?#]\S*)?")


# == the commands ======================================================================================


def target_problem(channel: str, target: str) -> str | None:
    """Why `target` cannot receive on `channel` (None when it can): an e-mail address (one, no header
    characters) or an http(s) URL, at most `MAX_TARGET` characters."""
    if channel not in CHANNELS:
        return f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}"
    if not target or len(target) > MAX_TARGET:
        return f"a {channel} target has 1 to {MAX_TARGET} characters"
    if channel == "email" and not _EMAIL.fullmatch(target):
        return f"{target!r} is not one e-mail address"
    if channel == "webhook" and not _URL.fullmatch(target):
        return f"{target!r} is not an http(s) URL"
    return None


def require_valid_notifications(state: LedgerState, cmd: SetNotifications) -> None:
    """Issue 24: a subscriber chooses known kinds of notice, of a known allocation (or the whole tree),
    on a channel that can reach them."""
    if not cmd.subscriber.strip() or len(cmd.subscriber) > MAX_SUBSCRIBER:
        raise InvalidCommand(f"a subscriber is named, in at most {MAX_SUBSCRIBER} characters")
    if cmd.allocation != ROOT and cmd.allocation not in state.allocations:
        raise UnknownProject(f"unknown allocation '{cmd.allocation}'")
    problem = target_problem(cmd.channel, cmd.target)
    if problem is not None:
        raise InvalidCommand(problem)
    unknown = sorted(set(cmd.kinds) - set(KINDS))
    if unknown:
        raise InvalidCommand(f"unknown notification kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    if len(set(cmd.kinds)) != len(cmd.kinds):
        raise InvalidCommand("a notification kind is named twice")


def decide_set_notifications(state: LedgerState, cmd: SetNotifications, now: float) -> list[Event]:
    require_valid_notifications(state, cmd)
    return [Event(cmd.aggregate, "NotificationsSet", {
        "subscriber": cmd.subscriber, "allocation": cmd.allocation, "channel": cmd.channel,
        "target": cmd.target, "kinds": sorted(cmd.kinds)})]


def decide_delivery_failed(state: LedgerState, cmd: RecordDeliveryFailed, now: float) -> list[Event]:
    """A delivery given up is a fact operators list (`steward notify failed`); recorded once per delivery
    (its stream is the delivery's, and a second report of it is refused)."""
    if not cmd.delivery_id or cmd.channel not in CHANNELS or cmd.kind not in KINDS:
        raise InvalidCommand("a failed delivery names its id, a known channel and a known kind")
    if cmd.attempts < 1:
        raise InvalidCommand(f"a failed delivery was attempted at least once, got {cmd.attempts}")
    return [Event(cmd.aggregate, "NotificationFailed", {
        "delivery_id": cmd.delivery_id, "subscriber": cmd.subscriber, "channel": cmd.channel,
        "target": cmd.target, "kind": cmd.kind, "position": cmd.position, "attempts": cmd.attempts,
        "error": cmd.error[:MAX_ERROR], "failed_at": now})]


# == the choices in force ================================================================================


@dataclass(frozen=True, slots=True)
class Subscription:
    subscriber: str
    allocation: str
    channel: str
    target: str
    kinds: frozenset[str]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.subscriber, self.allocation, self.channel, self.target)


Subscriptions = Mapping[tuple[str, str, str, str], Subscription]


def apply_notifications_set(subs: Subscriptions, payload: Mapping[str, Any]) -> dict[tuple[str, str, str, str],
                                                                                        Subscription]:
    """The subscriptions after one `NotificationsSet`: its kinds replace the key's; none removes it."""
    sub = Subscription(str(payload["subscriber"]), str(payload["allocation"]), str(payload["channel"]),
                       str(payload["target"]), frozenset(payload.get("kinds") or ()))
    out = dict(subs)
    if sub.kinds:
        out[sub.key] = sub
    else:
        out.pop(sub.key, None)
    return out


def wanted_kinds(subs: Subscriptions) -> frozenset[str]:
    return frozenset(k for s in subs.values() for k in s.kinds)


# == what an event says ==================================================================================


@dataclass(frozen=True, slots=True)
class Notice:
    """What one event says to whoever follows `allocations` (the allocations it concerns)."""

    kind: str
    allocations: tuple[str, ...]
    title: str
    job_id: str = ""
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Stable within its event (the delivery id is built from it)."""
        return f"{self.kind}:{','.join(self.allocations)}:{self.job_id}"


def _seconds(s: Any) -> str:
    v = float(s or 0.0)
    return f"{v / 60:.0f} min" if v >= 120 else f"{v:.0f} s"


def _job_notice(before: LedgerState, event: Event, kind: str, title: str, **facts: Any) -> list[Notice]:
    job_id = str(event.payload.get("job_id", ""))
    job = before.jobs.get(job_id)
    if job is None:
        return []
    return [Notice(kind, (job.project,), title.format(job=job_id, project=job.project), job_id,
                   {"project": job.project, "attempt": event.payload.get("attempt", job.attempt)} | facts)]


def _session_warned(before: LedgerState, event: Event) -> list[Notice]:
    p = event.payload
    what = "its cap" if p.get("kind") == "cap" else "losing its protection (idle)"
    return _job_notice(before, event, "session_warning",
                       f"Session {{job}} ({{project}}): {_seconds(p.get('seconds_left'))} left before {what}",
                       warning=p.get("kind"), seconds_left=p.get("seconds_left"), cap_at=p.get("cap_at"))


def _session_cap(before: LedgerState, event: Event) -> list[Notice]:
    action = event.payload.get("action")
    then = "checkpointed and stopped" if action == "stop" else "now preemptible"
    return _job_notice(before, event, "session_cap", f"Session {{job}} ({{project}}) reached its cap: {then}",
                       action=action, cap_at=event.payload.get("cap_at"))


def _preemption(before: LedgerState, event: Event) -> list[Notice]:
    p = event.payload
    for_job = f" for job {p['for_job_id']}" if p.get("for_job_id") else ""
    evidence = dict(p.get("evidence") or {})
    why = str(p.get("reason"))
    if evidence.get("requested_by"):  # a person asked (a manager's or an admin's requeue): their words and name
        note = f": {evidence['note']}" if evidence.get("note") else ""
        why += f"{note}; asked by {person(evidence['requested_by'], evidence.get('requested_by_name'))}"
    return _job_notice(before, event, "preemption",
                       f"Job {{job}} ({{project}}) is being preempted ({why}){for_job}: "
                       f"checkpoint within {_seconds(p.get('grace_s'))}",
                       reason=p.get("reason"), grace_s=p.get("grace_s"), for_job_id=p.get("for_job_id", ""),
                       requeue=p.get("requeue"), evidence=dict(p.get("evidence") or {}))


def _started(before: LedgerState, event: Event) -> list[Notice]:
    job = before.jobs.get(str(event.payload.get("job_id", "")))
    if job is None or job.funded:
        return []
    return _job_notice(before, event, "started_unfunded",
                       "Job {job} ({project}) started unfunded: funded work may preempt it at once",
                       protected_until=event.payload.get("protected_until"))


def _failed(before: LedgerState, event: Event) -> list[Notice]:
    code = event.payload.get("exit_code")
    return _job_notice(before, event, "job_failed", f"Job {{job}} ({{project}}) failed with exit code {code}",
                       exit_code=code)


def _lost(before: LedgerState, event: Event) -> list[Notice]:
    p = event.payload
    return _job_notice(before, event, "job_lost", f"Job {{job}} ({{project}}) was lost ({p.get('reason')}); "
                       "it is requeued", reason=p.get("reason"), nodes=list(p.get("nodes") or ()))


def _share_changed(before: LedgerState, event: Event, by: str = "") -> list[Notice]:
    p = event.payload
    parent = str(p.get("parent", ""))
    changes = {}
    for child, share in dict(p.get("shares") or {}).items():
        old = before.allocations.get(child)
        if old is None or old.share != share:
            changes[child] = {"from": None if old is None else old.share, "to": share}
    if not changes:
        return []
    words = ", ".join(f"{c} {'new' if v['from'] is None else format(v['from'], '.0%')} -> {v['to']:.0%}"
                      for c, v in sorted(changes.items()))
    return [Notice("share_changed", (parent, *sorted(changes)),
                   f"Shares under {parent} changed{f' by {by}' if by else ''}: {words}",
                   facts={"parent": parent, "changes": changes, "reason": p.get("reason", "")}
                   | ({"by": by} if by else {}))]


_JOB_RULES: dict[str, Callable[[LedgerState, Event], list[Notice]]] = {
    "SessionWarned": _session_warned,
    "SessionCapReached": _session_cap,
    "JobPreemptionRequested": _preemption,
    "JobStarted": _started,
    "JobFailed": _failed,
    "JobLost": _lost,
    "AllocationsSet": _share_changed,
}
RULE_KINDS: dict[str, str] = {"SessionWarned": "session_warning", "SessionCapReached": "session_cap",
                              "JobPreemptionRequested": "preemption", "JobStarted": "started_unfunded",
                              "JobFailed": "job_failed", "JobLost": "job_lost", "AllocationsSet": "share_changed"}
# what moves an allocation's burn: GPUs taken, shares, capacity
BURN_EVENTS = frozenset({"JobPlaced", "AllocationsSet", "NodeRegistered", "NodeDrainRequested", "NodeDrained",
                         "NodeResumed", "NodeRetirementPending", "NodeRetired", "ExecutorHeartbeat"})


def path_of(parents: Mapping[str, str], name: str) -> list[str]:
    """`name` and its ancestors up to (not including) the root."""
    out: list[str] = []
    while name in parents and name not in out and len(out) <= 16:
        out.append(name)
        name = parents[name]
    return out


def burns(state: LedgerState) -> dict[str, tuple[float | None, int, float]]:
    """Per allocation: (burn, GPUs its jobs hold, GPUs it is entitled to), burn as `budget.burn` (the API's
    figure): what runs in its subtree now over its entitlement × the ready capacity."""
    parents = {n: a.parent for n, a in state.allocations.items()}
    ents = budget.entitlements({n: (a.parent, a.share) for n, a in state.allocations.items()})
    capacity = sum(n.gpus for n in state.nodes.values() if takes_new_work(n.state))
    running: dict[str, int] = {}
    for job in state.jobs.values():
        if job.state in ACTIVE_STATES:
            for a in path_of(parents, job.project):
                running[a] = running.get(a, 0) + job.gpus
    out = {}
    for name in state.allocations:
        entitled = ents[name] * capacity
        out[name] = (budget.burn(running.get(name, 0), entitled), running.get(name, 0), entitled)
    return out


def _burn_notices(before: LedgerState, after: LedgerState) -> list[Notice]:
    was, now = burns(before), burns(after)
    out = []
    for name, (burn, gpus, entitled) in sorted(now.items()):
        if budget.over_entitlement(burn) and not budget.over_entitlement(was.get(name, (None, 0, 0.0))[0]):
            out.append(Notice("burn_forecast", (name,),
                              f"{name} runs {gpus} GPUs against an entitlement of {entitled:.1f}: at this burn "
                              f"({burn:.0%}) it will exceed its entitlement",
                              facts={"allocation": name, "burn": burn, "running_gpus": gpus,
                                     "entitled_gpus": entitled}))
    return out


def notices_for(before: LedgerState, event: Event, after: LedgerState,
                kinds: Iterable[str] | None = None, by: str = "") -> list[Notice]:
    """What `event` (applied to `before`, giving `after`) says, of the `kinds` asked (None: every kind).
    `by`: who recorded it ("Name (subject)", from the event's metadata), named where a person decided (a share
    change; a requeue names its asker from the request's own evidence)."""
    wanted = frozenset(KINDS) if kinds is None else frozenset(kinds)
    out: list[Notice] = []
    rule = _JOB_RULES.get(event.type)
    if rule is not None and RULE_KINDS[event.type] in wanted:
        out.extend(_share_changed(before, event, by) if event.type == "AllocationsSet" else rule(before, event))
    if "burn_forecast" in wanted and event.type in BURN_EVENTS:
        out.extend(_burn_notices(before, after))
    return out


# == who receives it =====================================================================================


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notice to one subscriber's target; `delivery_id` is the same however often it is derived."""

    delivery_id: str
    position: int
    subscriber: str
    channel: str
    target: str
    kind: str
    title: str
    text: str
    job_id: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


def delivery_id(position: int, notice_key: str, subscriber: str, channel: str, target: str) -> str:
    digest = hashlib.sha256("\x1f".join((str(position), notice_key, subscriber, channel, target)).encode())
    return f"n{position}-{digest.hexdigest()[:24]}"


def render_text(notice: Notice, position: int) -> str:
    """The body of the message: the title, then each fact on a line (evidence last), then where it is."""
    lines = [notice.title, ""]
    for k, v in notice.facts.items():
        if k != "evidence":
            lines.append(f"{k}: {v}")
    evidence = notice.facts.get("evidence")
    if evidence:
        lines += ["", "evidence (the decision's):"] + [f"  {k}: {v}" for k, v in sorted(evidence.items())]
    lines += ["", f"recorded at log position {position}"
              + (f"; `steward why {notice.job_id}` explains it" if notice.job_id else "")]
    return "\n".join(lines)


def deliveries(notices: Iterable[Notice], subs: Subscriptions, parents: Mapping[str, str],
               position: int) -> list[Delivery]:
    """Each notice to each subscription following one of the allocations it concerns (or the whole tree)
    that chose its kind; once per (subscriber, channel, target) however many subscriptions match."""
    out: list[Delivery] = []
    for notice in notices:
        above = {ROOT}
        for a in notice.allocations:
            above.update(path_of(parents, a))
        seen: set[tuple[str, str, str]] = set()
        for sub in sorted(subs.values(), key=lambda s: s.key):
            who = (sub.subscriber, sub.channel, sub.target)
            if notice.kind not in sub.kinds or sub.allocation not in above or who in seen:
                continue
            seen.add(who)
            out.append(Delivery(delivery_id(position, notice.key, *who), position, sub.subscriber, sub.channel,
                                sub.target, notice.kind, notice.title, render_text(notice, position),
                                notice.job_id, dict(notice.facts)))
    return out
