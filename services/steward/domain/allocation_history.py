"""The allocation history (DESIGN.md "org tree and allocations"; issue 19): every recorded `AllocationsSet`
as one row per allocation it named — who, when, why, the share, debug quota and display name before and after.

Pure: the recorded events in, rows out. The tree is folded with the ledger's own rule
(`steward.domain.state.apply_allocations_set`), so "before" is exactly what the ledger held."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from steward.domain.state import AllocationNode, apply_allocations_set


@dataclass(frozen=True, slots=True)
class AllocationChange:
    """One allocation named by one recorded `AllocationsSet`. `share_before` is None when the event
    created the allocation; a debug quota of None is the default that follows the share."""

    position: int
    recorded_at: float
    actor: str
    reason: str
    parent: str
    allocation: str
    share_before: float | None
    share_after: float
    debug_quota_before: int | None
    debug_quota_after: int | None
    debug_quota_set: bool  # the event named this allocation's debug quota
    display_name_before: str | None = None  # None: shown by its id
    display_name_after: str | None = None
    display_name_set: bool = False  # the event named this allocation's display name
    pin_before: str | None = None  # None: not pinned itself (ADR 0067)
    pin_after: str | None = None
    pin_set: bool = False  # the event named this allocation's pin


@dataclass(frozen=True, slots=True)
class AllocationsSetRecord:
    """What the history needs of one recorded `AllocationsSet` event."""

    position: int
    recorded_at: float
    actor: str
    payload: dict[str, Any]


def allocation_changes(records: Iterable[AllocationsSetRecord]) -> list[AllocationChange]:
    """Every allocation each event named, oldest first (records in log order)."""
    tree: dict[str, AllocationNode] = {}
    out: list[AllocationChange] = []
    for rec in records:
        after = apply_allocations_set(tree, rec.payload)
        quotas: dict[str, Any] = rec.payload.get("debug_quotas") or {}
        names: dict[str, Any] = rec.payload.get("display_names") or {}
        pins: dict[str, Any] = rec.payload.get("pins") or {}
        named = list(dict.fromkeys([*rec.payload["shares"], *quotas, *names, *pins]))
        for child in named:
            new = after.get(child)
            if new is None:  # a quota for an allocation that does not exist changes nothing
                continue
            old = tree.get(child)
            out.append(AllocationChange(
                position=rec.position, recorded_at=rec.recorded_at, actor=rec.actor,
                reason=str(rec.payload.get("reason") or ""), parent=new.parent, allocation=child,
                share_before=old.share if old else None, share_after=new.share,
                debug_quota_before=old.debug_quota_gpus if old else None, debug_quota_after=new.debug_quota_gpus,
                debug_quota_set=child in quotas,
                display_name_before=old.display_name if old else None, display_name_after=new.display_name,
                display_name_set=child in names,
                pin_before=old.pin if old else None, pin_after=new.pin, pin_set=child in pins,
            ))
        tree = after
    return out
