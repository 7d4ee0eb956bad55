"""Every access denial is recorded: who, what operation, on what, why, from where.

The domain has no command for it yet, so denials go to the `access_denials` table (not the hash-chained
event log, which only the ledger writes); the API serves them to auditors next to the event stream.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from steward.auth.principal import Principal
from steward.auth.tables import access_denials
from steward.store.eventstore import EventStore

log = logging.getLogger("steward.auth.denials")


@dataclass(frozen=True, slots=True)
class Denial:
    operation: str
    target: str
    reason: str


class DenialRecorder:
    def __init__(self, store: EventStore) -> None:
        self.store = store

    def record(self, principal: Principal | None, denial: Denial, client: str = "") -> None:
        row = {
            "at": time.time(),
            "subject": principal.subject if principal else "anonymous",
            "role": principal.role.value if principal else "none",
            "token_id": principal.token_id if principal else None,
            "operation": denial.operation[:100],
            "target": denial.target[:300],
            "reason": denial.reason[:300],
            "client": client[:100],
        }
        try:
            with self.store.engine.begin() as conn:
                conn.execute(access_denials.insert(), [row])
        except Exception:  # a denial is refused either way; losing its record must be loud
            log.exception("could not record an access denial: %s", row)

    def read(self, after_id: int = 0, limit: int = 100, subject: str | None = None) -> list[dict[str, Any]]:
        q = select(access_denials).where(access_denials.c.id > after_id).order_by(access_denials.c.id).limit(limit)
        if subject:
            q = q.where(access_denials.c.subject == subject)
        with self.store.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q)]
            conn.rollback()
        return rows
