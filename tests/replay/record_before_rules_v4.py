"""Record `logs/before-rules-v4.ndjson.gz`: a log written by the ledger as it was before ADR 0082 (rules
version 3, commit 5abf03c), holding registrations that today's rules decide differently. Run with THAT
release's code, never today's (the point is a log today's code did not write):

    git archive 5abf03c services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services:. python -m tests.replay.record_before_rules_v4 OUT.ndjson.gz

What it holds (docs/adr/0082-registering-a-node-again-and-a-bound-on-its-gpus.md):
- a node drained for repair and registered again, unchanged (`steward cluster apply`), then with fewer GPUs (an
  executor's changed inventory): ready after each then (so a job was placed on it), draining today;
- a busy node retiring (`RetireNode(when_empty)`) registered again: ready then (its pending retirement
  cancelled: the last attempt's end retired nothing), retiring today;
- a node registered with 80,000 GPUs (a typo) and one with 2^31-1: accepted then, refused today.
Every decision records rules version 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

from steward.domain.commands import (
    Command,
    DrainNode,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    ReportNodeDrained,
    RetireNode,
    SetAllocations,
    SubmitJob,
)
from tests.replay.old_release import ADMIN, ALICE, EXECUTOR, Sender, record

STEPS: list[tuple[Sender, Command]] = [
    (ADMIN, SetAllocations("cluster", {"p1": 0.5, "p2": 0.5}, reason="the tree")),
    (ADMIN, RegisterNode("n1", 8, "V100", ["b1", "n1"], "local")),
    (ADMIN, RegisterNode("n2", 8, "V100", ["b1", "n2"], "local")),
    (ADMIN, DrainNode("n1", "fan failing")),
    (EXECUTOR, ReportNodeDrained("n1")),
    (ADMIN, RegisterNode("n1", 8, "V100", ["b1", "n1"], "local")),  # cluster apply: ready again
    (ADMIN, DrainNode("n1", "fan failing, again")),
    (ADMIN, RegisterNode("n1", 4, "V100", ["b1", "n1"], "local")),  # the inventory changed: ready again
    (ALICE, SubmitJob("on-n1", "p1", 2, 600, ["train"])),
    (EXECUTOR, PlaceJob("on-n1", {"n1": [0, 1]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("on-n1", 1, 4242)),
    (ALICE, SubmitJob("on-n2", "p2", 2, 600, ["train"])),
    (EXECUTOR, PlaceJob("on-n2", {"n2": [0, 1]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("on-n2", 1, 4243)),
    (ADMIN, RetireNode("n2", "decommissioned", when_empty=True)),
    (ADMIN, RegisterNode("n2", 8, "V100", ["b2", "n2"], "local")),  # ready again: the retirement is off
    (EXECUTOR, ReportJobExited("on-n2", 1, 0)),  # retired nothing then
    (EXECUTOR, ReportJobExited("on-n1", 1, 0)),
    (ADMIN, RegisterNode("typo", 80_000, "H100", ["b3", "typo"], "local")),
    (ADMIN, RegisterNode("huge", 2**31 - 1, "H100", ["b3", "huge"], "local")),
]


if __name__ == "__main__":
    record(STEPS, Path(sys.argv[1]))
