"""The allocation history as the API serves it (issue 19): the recorded `AllocationsSet` events read
from the log (synchronous; called in a thread), folded by `steward.domain.allocation_history`, and cut
to what the principal may see."""

from __future__ import annotations

from collections.abc import Callable

import strawberry
from sqlalchemy import select

from steward.api.scalars import BigInt
from steward.domain.allocation_history import AllocationChange, AllocationsSetRecord, allocation_changes
from steward.store import schema
from steward.store.eventstore import EventStore, row_to_recorded


def read_allocation_changes(store: EventStore) -> list[AllocationChange]:
    """Every allocation change in the log, oldest first. The tree's changes are few (one event per
    manager's decision), so the whole history is folded: "before" needs every earlier event."""
    t = schema.events
    with store.engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.type == "AllocationsSet").order_by(t.c.position)).all()
        conn.rollback()
    records = []
    for row in rows:
        rec = row_to_recorded(row)
        records.append(AllocationsSetRecord(rec.position, rec.recorded_at, str(rec.metadata.get("actor") or ""),
                                            rec.payload))
    return allocation_changes(records)


def visible_changes(changes: list[AllocationChange], sees: Callable[[str], bool],
                    under: frozenset[str] | None, first: int) -> list[AllocationChange]:
    """Newest first, at most `first`: only allocations the principal sees (and under `under` if given)."""
    kept = [c for c in reversed(changes) if sees(c.allocation) and (under is None or c.allocation in under)]
    return kept[:first]


@strawberry.type(description="One allocation named by one recorded allocation change: who, when (seconds "
                             "since the epoch, UTC), why, and the share, debug quota and display name before "
                             "and after.")
class AllocationChangeEntry:
    position: BigInt
    recorded_at: float
    actor: str
    reason: str
    parent: str
    allocation: str
    share_before: float | None = strawberry.field(description="null: this change created the allocation.")
    share_after: float
    debug_quota_before: BigInt | None = strawberry.field(description="GPUs; null: the default (follows the share).")
    debug_quota_after: BigInt | None = strawberry.field(description="GPUs; null: the default (follows the share).")
    debug_quota_set: bool = strawberry.field(description="The change named this allocation's debug quota.")
    display_name_before: str | None = strawberry.field(description="null: shown by its id.")
    display_name_after: str | None = strawberry.field(description="null: shown by its id.")
    display_name_set: bool = strawberry.field(description="The change named this allocation's display name.")
    pin_before: str | None = strawberry.field(default=None, description="null: not pinned itself (ADR 0067).")
    pin_after: str | None = strawberry.field(default=None, description="null: not pinned itself (ADR 0067).")
    pin_set: bool = strawberry.field(default=False, description="The change named this allocation's pin.")

    @staticmethod
    def of(c: AllocationChange) -> AllocationChangeEntry:
        return AllocationChangeEntry(
            position=c.position, recorded_at=c.recorded_at, actor=c.actor, reason=c.reason, parent=c.parent,
            allocation=c.allocation, share_before=c.share_before, share_after=c.share_after,
            debug_quota_before=c.debug_quota_before, debug_quota_after=c.debug_quota_after,
            debug_quota_set=c.debug_quota_set, display_name_before=c.display_name_before,
            display_name_after=c.display_name_after, display_name_set=c.display_name_set,
            pin_before=c.pin_before, pin_after=c.pin_after, pin_set=c.pin_set)
