"""`steward audit replay`: re-run the pure policy (`decide`) over the log and confirm that every recorded
decision is reproduced: the same events, with the same payloads, for the same command, state and time.

A decision is the run of consecutive events of one message. Its command is read back by
`steward.domain.recorded`: from the metadata's `input` where the ledger stored the message (a rejection,
or events that do not give the command back), otherwise from the events themselves. Its time is the
events' `recorded_at` (the ledger decides a batch at one time and records it as that). Events are folded
with the same `evolve` as the ledger, through the `Projector`, older schema versions upcast on the way.

Each decision is decided again under the rules it was made under (`steward.domain.rules_version`, ADR 0038):
the version its metadata records, or, for a decision recorded before versions were, the newest earlier
version that reproduces it (those reproduced only under rules older than the last unrecorded ones are
counted and listed as `under_earlier_rules`; `by_rules` counts the reproduced decisions per version).
A reproduced decision made under rules older than today's is also decided under today's: those today's rules
decide otherwise are counted and listed as `decided_otherwise_today` (position, command, the version it was made
under, the rule changes since and the first difference), so an auditor sees every decision a rule change since
would have made differently, whether or not it records its version.

Every decision is counted as reproduced, different or unreplayable; the first `limit` of the last two are
listed: a difference with its position, command, the recorded and the replayed events and the first field
where they part; an unreplayable decision with its position, command and why. An event that cannot be
folded into the state (a malformed payload) is counted and listed as unfolded; the replay goes on without it.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from steward.domain import rules_version
from steward.domain.commands import Command, command_from_dict
from steward.domain.decide import decide_or_reject
from steward.domain.errors import DomainError
from steward.domain.events import Event
from steward.domain.recorded import UnreadableCommand, command_from_events
from steward.domain.state import LedgerState
from steward.store.eventstore import EventStore, RecordedEvent
from steward.store.projections import Projector
from steward.store.verifier import canonical_text, parse_export, read_export

LIMIT = 20  # differences and unreplayable decisions listed (all are counted)


def groups(records: Iterable[RecordedEvent]) -> Iterator[list[RecordedEvent]]:
    """Consecutive events of one message (one decision); an event without a message is a group alone."""
    group: list[RecordedEvent] = []
    for rec in records:
        if group and (rec.message_id is None or rec.message_id != group[0].message_id):
            yield group
            group = []
        group.append(rec)
    if group:
        yield group


def command_of(group: list[RecordedEvent], events: list[Event]) -> Command:
    """The command a decision decided: its stored input, or read back from its events (at their current
    schema versions). Raises `UnreadableCommand` (a `ValueError`) naming what is missing."""
    meta = group[0].metadata
    kind = meta.get("command")
    if not isinstance(kind, str):
        raise UnreadableCommand("the metadata names no command")
    if "input" in meta:
        try:
            return command_from_dict(kind, meta["input"])
        except DomainError as err:
            raise UnreadableCommand(f"the stored input does not decode: {err}") from None
    return command_from_events(kind, [e.payload for e in events])


def _plain(value: Any) -> Any:
    """A value as the log compares it: its canonical JSON read back."""
    return json.loads(canonical_text(value))


def first_difference(recorded: list[Event], replayed: list[Event]) -> str:
    """Where the replayed events first part from the recorded ones, in words: which event, and which field
    of its payload with both values."""
    for i, (rec, rep) in enumerate(zip(recorded, replayed, strict=False)):
        if (rec.stream, rec.type) != (rep.stream, rep.type):
            return (f"event {i + 1}: recorded {rec.type} on {rec.stream}, replayed {rep.type} on {rep.stream}"
                    + (f" ({rep.payload.get('reason')})" if rep.type == "CommandRejected" else ""))
        path = _first_field(_plain(rec.payload), _plain(rep.payload), "payload")
        if path is not None:
            where, was, now = path
            return f"event {i + 1} ({rec.type}) {where}: recorded {json.dumps(was)}, replayed {json.dumps(now)}"
    if len(recorded) > len(replayed):
        missing = ", ".join(e.type for e in recorded[len(replayed):])
        return f"recorded {len(recorded)} events, replayed {len(replayed)}: not replayed {missing}"
    extra = ", ".join(e.type for e in replayed[len(recorded):])
    return f"recorded {len(recorded)} events, replayed {len(replayed)}: replayed besides {extra}"


_ABSENT = "(absent)"


def _first_field(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}", a.get(key, _ABSENT), b.get(key, _ABSENT)
            found = _first_field(a[key], b[key], f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_field(x, y, f"{path}[{i}]")
            if found is not None:
                return found
    return path, a, b


def _event_dict(e: Event) -> dict[str, Any]:
    return {"stream_id": e.stream, "type": e.type, "payload": e.payload}


def _decided_otherwise_today(view: LedgerState, command: Command, at: float, recorded: list[Event],
                             got: list[tuple[str, str, str]], rules: int) -> dict[str, Any] | None:
    """How today's rules decide a decision reproduced under the earlier `rules`, when not as recorded: the version,
    the rule changes since and the first difference (None when today's rules decide it the same)."""
    try:
        today = decide_or_reject(view, command, at, rules_version.CURRENT)
    except (ValueError, DomainError, LookupError, TypeError, AttributeError) as err:
        return {"rules": rules, "changes": _changes_since(rules), "first_difference": f"not decidable today: {err}"}
    if [(e.stream, e.type, canonical_text(e.payload)) for e in today] == got:
        return None
    return {"rules": rules, "changes": _changes_since(rules), "first_difference": first_difference(recorded, today),
            "today": [_event_dict(e) for e in today]}


def _changes_since(rules: int) -> list[str]:
    """The names of the rule changes after version `rules`, up to today's."""
    return [c.name for c in rules_version.CHANGES if c.version > rules]


def replay_records(records: Iterable[RecordedEvent], limit: int = LIMIT) -> dict[str, Any]:
    """Replay `records` (a log from its first event, in position order); see the module."""
    started = time.perf_counter()
    proj = Projector()
    decisions = reproduced = different = unreplayable = unfolded = events = 0
    differences: list[dict[str, Any]] = []
    unreplayable_list: list[dict[str, Any]] = []
    unfolded_list: list[dict[str, Any]] = []
    by_rules: dict[int, int] = {}  # reproduced decisions per rules version they were replayed under
    earlier = 0  # decisions without a recorded version reproduced only under earlier rules
    earlier_list: list[dict[str, Any]] = []
    otherwise = 0  # reproduced decisions of earlier rules that today's rules decide otherwise
    otherwise_list: list[dict[str, Any]] = []
    for group in groups(records):
        head = group[0]
        try:
            recorded = [rec.as_event() for rec in group]
            unreadable: str | None = None
        except ValueError as err:  # an event at a schema version no upcaster leads from: folded as stored
            recorded = [Event(rec.stream_id, rec.type, rec.payload) for rec in group]
            unreadable = str(err)
        if head.message_id is not None:
            decisions += 1
            where = {"position": head.position, "message_id": head.message_id,
                     "command": head.metadata.get("command"), "recorded_at": head.recorded_at}
            try:
                if unreadable is not None:
                    raise UnreadableCommand(unreadable)
                recorded_rules = rules_version.recorded_version(head.metadata)
                command = command_of(group, recorded)
                got = [(e.stream, e.type, canonical_text(e.payload)) for e in recorded]
                view = proj.view()
                produced: list[Event] = []
                rules, same = rules_version.CURRENT, False
                # under the rules it records, or (none recorded) the newest of the earlier ones that reproduces it
                for rules in rules_version.candidates(recorded_rules):
                    attempt = decide_or_reject(view, command, head.recorded_at, rules)
                    if not produced:
                        produced = attempt  # a difference is shown against the newest candidate
                    if [(e.stream, e.type, canonical_text(e.payload)) for e in attempt] == got:
                        produced, same = attempt, True
                        break
            except (ValueError, DomainError, LookupError, TypeError, AttributeError) as err:
                unreplayable += 1
                if len(unreplayable_list) < limit:
                    unreplayable_list.append(where | {"reason": f"{err}" if isinstance(err, ValueError | DomainError)
                                                      else f"{type(err).__name__}: {err}"})
            else:
                if same:
                    reproduced += 1
                    by_rules[rules] = by_rules.get(rules, 0) + 1
                    if rules < rules_version.CURRENT and (today := _decided_otherwise_today(
                            view, command, head.recorded_at, recorded, got, rules)) is not None:
                        otherwise += 1
                        if len(otherwise_list) < limit:
                            otherwise_list.append(where | today)
                    if recorded_rules is None and rules < rules_version.LAST_UNRECORDED:
                        earlier += 1
                        if len(earlier_list) < limit:
                            # the changes between its rules and the newest a decision went unversioned under
                            # (a later change, ADR 0082's, came after every unversioned decision)
                            earlier_list.append(where | {"rules": rules, "changes": [
                                c.name for c in rules_version.CHANGES
                                if rules < c.version <= rules_version.LAST_UNRECORDED]})
                else:
                    different += 1
                    if len(differences) < limit:
                        differences.append(where | {
                            "first_difference": first_difference(recorded, produced),
                            "recorded": [_event_dict(e) for e in recorded],
                            "replayed": [_event_dict(e) for e in produced]})
        for rec, ev in zip(group, recorded, strict=True):
            try:
                proj.apply(ev, rec.recorded_at, rec.position, rec.hash)
            except (LookupError, TypeError, ValueError, AttributeError) as err:
                # a malformed event: the state after it is without it, and the report says so
                unfolded += 1
                if len(unfolded_list) < limit:
                    unfolded_list.append({"position": rec.position, "type": rec.type,
                                          "reason": f"{type(err).__name__}: {err}"})
            events += 1
    return {"ok": different == 0 and unreplayable == 0 and unfolded == 0, "events": events,
            "decisions": decisions, "reproduced": reproduced, "different": different, "unreplayable": unreplayable,
            "unfolded": unfolded, "differences": differences, "unreplayable_decisions": unreplayable_list,
            "unfolded_events": unfolded_list, "rules": rules_version.CURRENT,
            "by_rules": {str(v): n for v, n in sorted(by_rules.items())},
            "under_earlier_rules": earlier, "under_earlier_rules_decisions": earlier_list,
            "decided_otherwise_today": otherwise, "decided_otherwise_today_decisions": otherwise_list,
            "listed_at_most": limit, "seconds": round(time.perf_counter() - started, 3)}


def records_from_export(path: Path) -> list[RecordedEvent]:
    """The events of an export (`steward audit export`, --json or --ndjson, optionally gzipped) from the
    log's first position; raises ValueError naming the problem."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                header, events, _ = parse_export(fh.read())
        else:
            header, events, _ = read_export(path)
    except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not an export (`steward audit export`): {type(err).__name__} {err}") from None
    if not events:
        raise ValueError(f"{path} holds no events")
    if events[0].get("position") != 1:
        raise ValueError(f"{path} starts at position {events[0].get('position')}: a replay needs the log from "
                         "position 1 (export it without --from)")
    try:
        return [RecordedEvent(e["position"], e["stream_id"], e["version"], e["type"], e["schema_version"],
                              e["payload"], e["metadata"], e["message_id"], float(e["recorded_at"]),
                              e["prev_hash"], e["hash"]) for e in events]
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path} is not an export of events ({header.get('format', 'no format')}): "
                         f"an event lacks {err}") from None


def replay(store: EventStore, limit: int = LIMIT) -> dict[str, Any]:
    """Replay the stored log up to its head when the replay starts (a live log grows meanwhile)."""
    head = store.head()

    def upto() -> Iterator[RecordedEvent]:
        for rec in store.iterate():
            if rec.position > head:
                return
            yield rec

    return replay_records(upto(), limit) | {"head": head}
