"""`steward audit replay`: re-run the pure policy (`decide`) over the log and confirm that every recorded
decision is reproduced: the same events, with the same payloads, for the same command and state.

The command of an accepted decision is read back from its event's payload (every command field is in
it); a rejection carries its command in the metadata (`input`). Events are folded with the same
`evolve` as the ledger, through the `Projector`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from steward.audit.verifier import canonical_text
from steward.domain.commands import COMMAND_TYPES, command_from_dict
from steward.domain.decide import decide_or_reject
from steward.domain.errors import DomainError
from steward.store.eventstore import EventStore, RecordedEvent
from steward.store.projections import Projector


def _groups(store: EventStore) -> Iterator[list[RecordedEvent]]:
    """Consecutive events of one message (one decision)."""
    group: list[RecordedEvent] = []
    for rec in store.iterate():
        if group and (rec.message_id is None or rec.message_id != group[0].message_id):
            yield group
            group = []
        group.append(rec)
    if group:
        yield group


def command_of(group: list[RecordedEvent]) -> Any:
    meta = group[0].metadata
    kind = meta.get("command")
    if kind not in COMMAND_TYPES:
        raise ValueError(f"the metadata names no known command ({kind!r})")
    if "input" in meta:
        return command_from_dict(kind, meta["input"])
    payload = group[0].as_event().payload
    names = {f.name for f in dataclasses.fields(COMMAND_TYPES[kind])}
    return command_from_dict(kind, {k: v for k, v in payload.items() if k in names})


def replay(store: EventStore, limit_differences: int = 20) -> dict[str, Any]:
    started = time.perf_counter()
    proj = Projector()
    decisions = reproduced = events = 0
    differences: list[dict[str, Any]] = []
    unreplayable: list[dict[str, Any]] = []
    for group in _groups(store):
        now = group[0].recorded_at
        if group[0].message_id is not None:
            decisions += 1
            try:
                produced = decide_or_reject(proj.view(), command_of(group), now)
            except (ValueError, DomainError, KeyError) as err:
                if len(unreplayable) < limit_differences:
                    unreplayable.append({"position": group[0].position, "reason": str(err)})
                produced = None
            if produced is not None:
                want = [(e.stream, e.type, canonical_text(e.payload)) for e in produced]
                got = [(r.stream_id, r.type, canonical_text(r.as_event().payload)) for r in group]
                if want == got:
                    reproduced += 1
                elif len(differences) < limit_differences:
                    differences.append({"position": group[0].position, "message_id": group[0].message_id,
                                        "recorded": [list(g) for g in got], "replayed": [list(w) for w in want]})
                else:
                    differences.append({"position": group[0].position, "truncated": True})
        for rec in group:
            proj.apply(rec.as_event(), rec.recorded_at, rec.position, rec.hash)
            events += 1
    different = decisions - reproduced - len(unreplayable)
    return {"ok": different == 0 and not unreplayable, "events": events, "decisions": decisions,
            "reproduced": reproduced, "different": different, "unreplayable": len(unreplayable),
            "differences": differences[:limit_differences], "unreplayable_examples": unreplayable,
            "seconds": round(time.perf_counter() - started, 3)}
