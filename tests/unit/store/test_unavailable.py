"""Which driver errors mean "the store cannot be reached now" (ADR 0064): the API answers those 503 with the
code `store_unavailable`; a query's own failure stays a fault (HTTP 500 / a masked GraphQL error)."""

from __future__ import annotations

import psycopg
import psycopg.errors as pg
import pytest
from sqlalchemy.exc import DisconnectionError, IntegrityError, InterfaceError, OperationalError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from steward.store.unavailable import store_name, unavailable, unavailable_message


def op(orig: BaseException, invalidated: bool = False) -> OperationalError:
    return OperationalError("SELECT 1", {}, orig, connection_invalidated=invalidated)


REFUSED = psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 55653 failed: '
                                   "Connection refused\n\tIs the server running on that host?")


@pytest.mark.parametrize(("err", "reason"), [
    (op(REFUSED), 'connection failed: connection to server at "127.0.0.1", port 55653 failed: Connection refused'),
    (op(pg.AdminShutdown("terminating connection due to administrator command")),
     "terminating connection due to administrator command"),
    (op(pg.CannotConnectNow("the database system is shutting down")), "the database system is shutting down"),
    (op(pg.CannotConnectNow("the database system is starting up")), "the database system is starting up"),
    (op(pg.CrashShutdown("crash")), "crash"),
    (op(pg.ConnectionFailure("server closed the connection unexpectedly")),
     "server closed the connection unexpectedly"),
    (op(pg.QueryCanceled("canceling statement due to statement timeout"), invalidated=True),
     "canceling statement due to statement timeout"),  # the connection went with it
    (InterfaceError("SELECT 1", {}, psycopg.InterfaceError("the connection is closed")), "the connection is closed"),
    (DisconnectionError("pre-ping failed"), "pre-ping failed"),
    (PoolTimeout("QueuePool limit of size 5 overflow 10 reached"),
     "no connection free in the pool (the database is slow or away)"),
    # faults of a query: not an outage
    (op(pg.QueryCanceled("canceling statement due to statement timeout")), None),
    (op(pg.DeadlockDetected("deadlock detected")), None),
    (IntegrityError("INSERT", {}, pg.UniqueViolation("duplicate key")), None),
    (ProgrammingError("SELECT", {}, pg.UndefinedTable("relation does not exist")), None),
    (ValueError("not a database error"), None),
])
def test_which_errors_are_an_outage(err: BaseException, reason: str | None) -> None:
    assert unavailable(err) == reason


def test_an_outage_raised_from_inside_another_error_is_found() -> None:
    try:
        try:
            raise op(REFUSED)
        except OperationalError as inner:
            raise RuntimeError("token lookup failed") from inner
    except RuntimeError as outer:
        assert unavailable(outer) is not None


@pytest.mark.parametrize(("url", "name"), [
    ("postgresql+psycopg://steward_app:secret@127.0.0.1:55653/steward", "PostgreSQL at 127.0.0.1:55653"),
    ("postgresql+psycopg://steward_app:***@db/steward", "PostgreSQL at db:5432"),
    ("sqlite:////tmp/steward.db", "SQLite"),
    ("not a url", "the store"),
])
def test_the_store_is_named_without_its_credentials(url: str, name: str) -> None:
    assert store_name(url) == name
    message = unavailable_message(url, "Connection refused")
    assert name in message and "secret" not in message and "retry in 2 s" in message
