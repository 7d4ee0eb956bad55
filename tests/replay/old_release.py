"""What the `record_before_*.py` scripts share: a ledger of an earlier release, on a fresh SQLite store, decides a
list of commands one message at a time (each sent by its actor in their role, a second apart from `START`), and
the log it wrote is saved as gzipped NDJSON (`steward audit export`'s format) for tests/replay/logs.

It imports only what every release since rules version 3 has (the envelope, the ledger, the store, the export),
because it runs with THAT release's code on the path, never today's:

    git archive COMMIT services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services:. python -m tests.replay.record_before_NAME OUT.ndjson.gz
"""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Sequence
from pathlib import Path

from steward.audit.export import write_ndjson
from steward.bus.envelope import command_envelope
from steward.domain.commands import Command
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

START = 1_796_400_000.0  # 2026-12-05T16:00:00Z

Sender = tuple[str, str]  # (actor, role)
ADMIN: Sender = ("admin", "admin")
ALICE: Sender = ("alice", "researcher")
EXECUTOR: Sender = ("executor", "admin")
SCHEDULER: Sender = ("scheduler", "admin")


def record(steps: Sequence[tuple[Sender, Command]], out: Path) -> None:
    """Decide `steps` in order with the release on the path and write the log it recorded to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/old.db"
        upgrade(url)
        store = EventStore.from_url(url)
        clock = [START]
        ledger = Ledger(store, clock=lambda: clock[0], consumer_name="old-release")
        for (actor, role), command in steps:
            ledger.process([("old-release", command_envelope(command, actor=actor, role=role).encode())], {})
            clock[0] += 1.0
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            write_ndjson(store, fh)
