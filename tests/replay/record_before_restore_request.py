"""Record `logs/before-rules-v4-restore.ndjson.gz`: a log written by the ledger as it was before the rule change
`restore_keeps_request` (rules version 4, ADR 0086), holding a restore that today's rules decide differently.
Run with THAT release's code (main at 7e99307, rules version 3), never today's:

    git -C /work/main archive 7e99307 services migrations alembic.ini | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/services STEWARD_PURE=1 python tests/replay/record_before_restore_request.py OUT.ndjson.gz

What it holds: an interactive job (a session, submitted through `submitJob`, the only way then) that accepts only
A100s in cluster jupiter, placed, started, cancelled and restored. The restore's `JobSubmitted` records empty
`gpu_models` and `clusters` (the restored session accepted any); today's rules record the old session's. Every
decision records rules version 3.
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from pathlib import Path

from steward.audit.export import write_ndjson
from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    CancelJob,
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobStarted,
    RestoreSession,
    SetAllocations,
    SubmitJob,
)
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

START = 1_796_400_000.0  # 2026-12-05T16:00:00Z


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/old.db"
        upgrade(url)
        store = EventStore.from_url(url)
        clock = [START]
        ledger = Ledger(store, clock=lambda: clock[0], consumer_name="old-release")
        steps: list[tuple[str, str, Command]] = [
            ("admin", "admin", SetAllocations("cluster", {"p1": 0.6, "p2": 0.4}, reason="the tree")),
            ("admin", "admin", RegisterNode("c1", 8, "H100", ["ceres", "c1"], "local", cluster="ceres")),
            ("admin", "admin", RegisterNode("j1", 8, "A100", ["jupiter", "j1"], "local", cluster="jupiter")),
            ("alice", "researcher", SubmitJob("s1", "p1", 1, 600, ["jupyter"], resumable=True, job_class="interactive",
                                              gpu_models=["A100"], clusters=["jupiter"])),
            ("scheduler", "admin", PlaceJob("s1", {"j1": [0]}, True, {"policy": "test"})),
            ("executor", "admin", ReportJobStarted("s1", 1, 4242)),
            ("alice", "researcher", CancelJob("s1", "lunch")),
            ("alice", "researcher", RestoreSession("s1", "s2")),
        ]
        for actor, role, command in steps:
            ledger.process([("old-release", command_envelope(command, actor=actor, role=role).encode())], {})
            clock[0] += 1.0
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            write_ndjson(store, fh)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
