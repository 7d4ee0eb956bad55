"""API tokens as the API process checks them: every row of `api_tokens` kept in memory and read again
whole by one query every `refresh_s`, instead of one query per token per `STEWARD_API_AUTH_CACHE_S`
(with 200 users, 100 queries a second: the soak's largest cost once the projections were in memory).
The check itself is the store's (`steward.auth.tokens.principal_of`).

A revocation made elsewhere takes effect within `refresh_s` (the same bound as the authenticator's
cache: docs/api.md); one made through this process at once (its row is dropped and read again). A
token id not in memory (minted since the last read) is looked up in the store."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from sqlalchemy import select

from steward.auth.principal import Principal
from steward.auth.tables import api_tokens
from steward.auth.tokens import TokenStore, looks_like_api_token, parse, principal_of
from steward.store.eventstore import EventStore


class MirroredTokens(TokenStore):
    def __init__(self, store: EventStore, refresh_s: float = 2.0) -> None:
        super().__init__(store)
        self.refresh_s = refresh_s
        self._rows: dict[str, Any] = {}
        self._read_at = -math.inf
        self._lock = threading.Lock()
        self._revoked_here: set[str] = set()  # always read from the store (a read in flight may predate it)

    def fresh(self) -> bool:
        """Whether a check needs no store round trip for a token already in memory."""
        return time.monotonic() - self._read_at < self.refresh_s

    def _refresh(self) -> None:
        if self.fresh() or not self._lock.acquire(blocking=self._read_at == -math.inf):
            return  # another thread is reading: the rows in memory meanwhile (at most `refresh_s` old)
        try:
            started = time.monotonic()
            with self.store.engine.connect() as conn:
                rows = {r.token_id: r for r in conn.execute(select(api_tokens))}
                conn.rollback()
            self._rows, self._read_at = rows, started
        finally:
            self._lock.release()

    def row(self, token_id: str) -> Any:
        self._refresh()
        row = self._rows.get(token_id) if token_id not in self._revoked_here else None
        if row is None:
            row = super().row(token_id)
        return row

    def cached_row(self, token_id: str) -> Any:
        """The row in memory when fresh (no IO), else None."""
        return self._rows.get(token_id) if self.fresh() and token_id not in self._revoked_here else None

    def revoke(self, token_id: str, by: str, now: float | None = None) -> bool:
        self._revoked_here.add(token_id)
        return super().revoke(token_id, by, now)


def checked_in_memory(tokens: TokenStore, token: str) -> Principal | None:
    """The principal of an API token whose row is in memory and fresh (no IO: callable on the event loop;
    raises TokenError as the store's check does), else None (check it in a thread)."""
    if not isinstance(tokens, MirroredTokens) or not looks_like_api_token(token):
        return None
    token_id, secret = parse(token)
    row = tokens.cached_row(token_id)
    return principal_of(row, token_id, secret) if row is not None else None
