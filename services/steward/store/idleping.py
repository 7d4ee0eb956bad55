"""A connection pool that pings a connection before handing it out only when it sat unused for a while (ADR 0079).

SQLAlchemy's `pool_pre_ping` pings on every checkout: a store round trip before each use, which under the
soak's load was a tenth of the API's busy time. A connection used a moment ago is as good as a ping: if the
server went away since, its next statement fails with a disconnect, which SQLAlchemy turns into the
invalidation of every connection of the pool opened before (they are dead too), and the API's feeder, which
uses the pool every `STEWARD_API_FEED_POLL_S`, is the one that meets it first when the API is busy or quiet
alike. A connection idle for `idle_s` or more is pinged as before, and a failed ping invalidates the pool and
hands out a fresh connection (so a process that sat through a PostgreSQL restart does not fail its first
request)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InvalidatePoolError

IDLE_SINCE = "steward_idle_since"


def ping_when_idle(engine: Engine, idle_s: float, clock: Callable[[], float] = time.monotonic,
                   ping: Callable[[Any], object] | None = None) -> None:
    """Ping a connection of `engine`'s pool at checkout when it was checked in `idle_s` or more ago; a failed
    ping invalidates the pool (the checkout then opens a fresh connection). `ping`: the dialect's by default."""
    do_ping = ping or engine.dialect.do_ping

    @event.listens_for(engine, "checkin")
    def _checkin(dbapi_connection: Any, record: Any) -> None:
        record.info[IDLE_SINCE] = clock()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop(IDLE_SINCE, None)
        if since is None or clock() - since < idle_s:  # just opened, or used a moment ago
            return
        try:
            do_ping(dbapi_connection)
        except Exception as err:
            raise InvalidatePoolError(f"a connection idle for {clock() - since:.1f} s is dead: {err}") from err
