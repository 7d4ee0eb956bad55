"""Where the PostgreSQL ledger runs its transactions (ADR 0025): STEWARD_LEDGER_WRITER, checked."""

from __future__ import annotations

import pytest

from steward.ledger.ledger import Ledger
from steward.ledger.service import ledger_writer_mode
from steward.store.eventstore import EventStore


@pytest.mark.parametrize(("value", "mode"), [
    (None, "process"), ("", "process"), ("process", "process"), ("thread", "thread"), (" Thread ", "thread"),
])
def test_the_writer_setting_defaults_to_the_process(monkeypatch: pytest.MonkeyPatch, value: str | None,
                                                   mode: str) -> None:
    if value is None:
        monkeypatch.delenv("STEWARD_LEDGER_WRITER", raising=False)
    else:
        monkeypatch.setenv("STEWARD_LEDGER_WRITER", value)
    assert ledger_writer_mode() == mode


def test_a_wrong_writer_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEWARD_LEDGER_WRITER", "fork")
    with pytest.raises(ValueError, match="STEWARD_LEDGER_WRITER must be 'process' or 'thread', not 'fork'"):
        ledger_writer_mode()


def test_sqlite_keeps_its_writer_in_process(tmp_path: object) -> None:
    """The writer process is PostgreSQL's: a SQLite ledger given one records in its own thread."""
    from steward.store.migrate import upgrade

    url = f"sqlite:///{tmp_path}/ledger.db"
    upgrade(url)
    ledger = Ledger(EventStore.from_url(url), writer=object())  # type: ignore[arg-type]
    assert ledger.writer is None


def test_the_ledger_refuses_a_wrong_writer_setting_by_name_without_a_traceback(tmp_path: object) -> None:
    """`steward run ledger` checks STEWARD_LEDGER_WRITER before it starts anything."""
    import os
    import subprocess
    import sys

    env = os.environ | {"STEWARD_LEDGER_WRITER": "fork", "STEWARD_RUN_DIR": str(tmp_path),
                        "STEWARD_METRICS_PORT": "off"}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", "run", "ledger"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "STEWARD_LEDGER_WRITER must be 'process' or 'thread', not 'fork'" in proc.stderr
    assert "Traceback" not in proc.stderr
