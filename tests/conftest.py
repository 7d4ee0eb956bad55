"""Shared test configuration: Hypothesis profiles (fast by default, thorough in CI via HYPOTHESIS_PROFILE)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


# Every event a test writes in this process is checked against its schema at the version it is written at
# (schema/events/): a field added to an event and not to its schema fails the test that writes it, the day it
# is added, where before it was found only when a recorded log happened to hold one (four stale schemas in
# session 21). The check wraps the three adapters of the ledger's batch transaction (store/recorder.py): the
# embedded store (`SQLiteTransaction.append`), PostgreSQL in the ledger's thread (`PostgresTransaction.append`)
# and in its writer process (`WriterTransaction.append`): what the ledger decides. Events a test or a benchmark
# writes by hand through `EventRecorder.append` (fixtures with bare payloads) are not checked, nor what the
# processes the integration tests start write.
SCHEMA_VIOLATIONS: list[str] = []


def _check_schemas(records: Sequence[Any]) -> None:
    from steward.store.upcasting import SchemaError, validate

    for rec in records:
        try:
            validate(rec.type, rec.schema_version, rec.payload)
        except SchemaError as err:
            SCHEMA_VIOLATIONS.append(f"event {rec.position} ({rec.stream_id}): {err}")
            raise


def _checked(write: Callable[..., Any], records_at: int) -> Callable[..., Any]:
    @functools.wraps(write)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_schemas(args[records_at])
        return write(*args, **kwargs)

    return wrapper


@pytest.fixture(autouse=True, scope="session")
def _events_match_their_schemas() -> Iterator[None]:
    # imported here, not at the top: this file is read before tests/integration/conftest.py sets the test
    # stack's environment, and steward.config reads where its settings files are when it is first imported
    from steward.ledger.recording.writer import WriterTransaction
    from steward.store.recorder import PostgresTransaction, SQLiteTransaction

    patch = pytest.MonkeyPatch()
    patch.setattr(SQLiteTransaction, "append", _checked(SQLiteTransaction.append, 1))
    patch.setattr(PostgresTransaction, "append", _checked(PostgresTransaction.append, 1))
    patch.setattr(WriterTransaction, "append", _checked(WriterTransaction.append, 1))
    yield
    patch.undo()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A violation fails the run even when the code under test caught the error the check raised."""
    if SCHEMA_VIOLATIONS:
        print("\nevents written against their schemas (tests/conftest.py):\n  " + "\n  ".join(SCHEMA_VIOLATIONS[:20]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
