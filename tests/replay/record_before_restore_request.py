"""Record `logs/before-rules-v4-restore.ndjson.gz`: a log written by the ledger as it was before the rule change
`restore_keeps_request` (rules version 4, ADR 0086), holding a restore that today's rules decide differently.
Run with THAT release's code (main at 7e99307, rules version 3), never today's:

    git archive 7e99307 services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services:. python -m tests.replay.record_before_restore_request OUT.ndjson.gz

What it holds: an interactive job (a session, submitted through `submitJob`, the only way then) that accepts only
A100s in cluster jupiter, placed, started, cancelled and restored. The restore's `JobSubmitted` records empty
`gpu_models` and `clusters` (the restored session accepted any); today's rules record the old session's. Every
decision records rules version 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
from tests.replay.old_release import ADMIN, ALICE, EXECUTOR, SCHEDULER, Sender, record

STEPS: list[tuple[Sender, Command]] = [
    (ADMIN, SetAllocations("cluster", {"p1": 0.6, "p2": 0.4}, reason="the tree")),
    (ADMIN, RegisterNode("c1", 8, "H100", ["ceres", "c1"], "local", cluster="ceres")),
    (ADMIN, RegisterNode("j1", 8, "A100", ["jupiter", "j1"], "local", cluster="jupiter")),
    (ALICE, SubmitJob("s1", "p1", 1, 600, ["jupyter"], resumable=True, job_class="interactive",
                      gpu_models=["A100"], clusters=["jupiter"])),
    (SCHEDULER, PlaceJob("s1", {"j1": [0]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("s1", 1, 4242)),
    (ALICE, CancelJob("s1", "lunch")),
    (ALICE, RestoreSession("s1", "s2")),
]


if __name__ == "__main__":
    record(STEPS, Path(sys.argv[1]))
