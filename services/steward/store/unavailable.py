"""Which database driver errors mean "the store cannot be reached now" (a PostgreSQL that restarts, refuses
connections or dropped them), as opposed to a fault of a query: the API answers those with 503 and a stable
code instead of HTTP 500 and a traceback (ADR 0064). Pure: it only reads the exception chain it is given."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

CODE = "store_unavailable"
RETRY_AFTER_S = 2  # what the API tells clients to wait (PostgreSQL's restart takes seconds)

# SQLSTATEs of a server that is away or going: connection exceptions (class 08), admin/crash shutdown and
# "the database system is starting up / shutting down" (57P01-57P03)
_AWAY_STATES = ("57P01", "57P02", "57P03")


def _reason(err: BaseException) -> str | None:
    if isinstance(err, PoolTimeout):
        return "no connection free in the pool (the database is slow or away)"
    if isinstance(err, DisconnectionError | InterfaceError):
        orig = getattr(err, "orig", None)
        return _first_line(orig if isinstance(orig, BaseException) else err)
    if isinstance(err, OperationalError):
        orig = err.orig
        state = getattr(orig, "sqlstate", None)
        if err.connection_invalidated or state is None or state.startswith("08") or state in _AWAY_STATES:
            return _first_line(orig)
        return None  # a query's own failure (a statement timeout, a deadlock): a fault, not an outage
    return None


def _first_line(err: BaseException | None) -> str:
    text = str(err or "").strip()
    return text.splitlines()[0].strip() if text else type(err).__name__


def unavailable(err: BaseException) -> str | None:
    """Why the store is unreachable, when `err` (or an error it was raised from) says so; else None."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        reason = _reason(current)
        if reason is not None:
            return reason
        current = current.__cause__ or current.__context__
    return None


def store_name(url: str) -> str:
    """The store as people name it: "PostgreSQL at HOST:PORT" (never the user or password), or "SQLite"."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return "the store"
    if parsed.get_backend_name() == "postgresql":
        return f"PostgreSQL at {parsed.host or 'localhost'}:{parsed.port or 5432}"
    return parsed.get_backend_name().replace("sqlite", "SQLite")


def unavailable_message(url: str, reason: str) -> str:
    return f"the store ({store_name(url)}) is unavailable: {reason}; retry in {RETRY_AFTER_S} s"
