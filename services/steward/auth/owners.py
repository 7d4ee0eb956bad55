"""Who owns a job: the person who submitted it (or opened the session), as the log recorded them: the
actor (subject) and display name in the metadata of its first `JobSubmitted` or `SessionOpened` event (a
session's `SessionOpened` follows its `JobSubmitted` and is recorded by the worker running it). The API
keeps the index from the log, reading only what was recorded since it last looked (a position), so
"my jobs" costs one small read per change of the log."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sqlalchemy import select

from steward.store import schema
from steward.store.eventstore import EventStore

OWNING_EVENTS = ("JobSubmitted", "SessionOpened")


@dataclass(frozen=True, slots=True)
class Owner:
    subject: str
    name: str  # the display name the person signed in with ("" for API tokens and components)

    @property
    def display(self) -> str:
        return self.name or self.subject


class Owners:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._after = 0
        self._of: dict[str, Owner] = {}
        self._jobs: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def refresh(self, known_head: int | None = None) -> None:
        """Read the owning events recorded since the last look; nothing when `known_head` (the head the
        caller knows) is not past what was read."""
        t = schema.events
        with self._lock:
            after = self._after
        if known_head is not None and known_head <= after:
            return
        head = self.store.head()
        q = (select(t.c.position, t.c.stream_id, t.c.metadata)
             .where(t.c.position > after, t.c.position <= head, t.c.type.in_(OWNING_EVENTS))
             .order_by(t.c.position))
        with self.store.engine.connect() as conn:
            rows = conn.execute(q).all()
            conn.rollback()
        with self._lock:
            for row in rows:
                if row.position <= self._after:
                    continue
                job_id = row.stream_id.removeprefix("job-")
                if job_id in self._of:
                    # the first owning event names the owner: a session's `SessionOpened` is recorded after its
                    # `JobSubmitted` by the worker that runs it, which does not own the session
                    continue
                meta = row.metadata or {}
                owner = Owner(str(meta.get("actor") or ""), str(meta.get("actor_name") or ""))
                self._of[job_id] = owner
                self._jobs.setdefault(owner.subject, set()).add(job_id)
            self._after = max(self._after, head)

    def of(self, job_id: str, known_head: int | None = None) -> Owner | None:
        self.refresh(known_head)
        with self._lock:
            return self._of.get(job_id)

    def jobs_of(self, subject: str, known_head: int | None = None) -> frozenset[str]:
        self.refresh(known_head)
        with self._lock:
            return frozenset(self._jobs.get(subject, ()))
