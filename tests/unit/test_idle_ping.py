"""The API's pool pings a connection before use only when it sat unused for a while (ADR 0079): a busy API's
connections are used every moment and cost no ping each, a connection idle past `idle_s` is pinged, and a dead
one is replaced, with every connection opened before it, before anyone uses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from steward.store.idleping import ping_when_idle

CASES = {
    # seconds idle before the second checkout -> pinged?
    "used a moment ago": (0.2, False),
    "idle just under the limit": (0.99, False),
    "idle past the limit": (1.0, True),
    "idle for minutes": (300.0, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_connection_is_pinged_only_after_sitting_idle(tmp_path: Path, name: str) -> None:
    idle, pinged = CASES[name]
    now = [100.0]
    pings: list[Any] = []
    engine = create_engine(f"sqlite:///{tmp_path / 'pool.db'}", pool_size=1, max_overflow=0)
    ping_when_idle(engine, 1.0, clock=lambda: now[0], ping=pings.append)
    with engine.connect() as conn:  # freshly opened: never pinged
        conn.execute(text("select 1"))
    assert pings == []
    now[0] += idle
    with engine.connect() as conn:
        conn.execute(text("select 1"))
    assert len(pings) == (1 if pinged else 0)


def test_a_dead_idle_connection_is_replaced_with_the_whole_pool_before_use(tmp_path: Path) -> None:
    now = [100.0]
    engine = create_engine(f"sqlite:///{tmp_path / 'pool.db'}", pool_size=2, max_overflow=0)
    dead: set[int] = set()

    def ping(dbapi_connection: Any) -> None:
        if id(dbapi_connection) in dead:
            raise ConnectionError("server closed the connection unexpectedly")

    ping_when_idle(engine, 1.0, clock=lambda: now[0], ping=ping)
    a, b = engine.connect(), engine.connect()
    old = [a.connection.dbapi_connection, b.connection.dbapi_connection]  # held: their ids stay theirs
    first = {id(c) for c in old}
    a.close()
    b.close()
    dead |= first  # the server restarted meanwhile
    now[0] += 5.0
    with engine.connect() as conn:  # the first checkout meets a dead connection: the pool is recycled
        assert conn.execute(text("select 1")).scalar_one() == 1
        assert id(conn.connection.dbapi_connection) not in first
        with engine.connect() as other:  # the other old connection too, without a ping of its own
            assert other.execute(text("select 1")).scalar_one() == 1
            assert id(other.connection.dbapi_connection) not in first
