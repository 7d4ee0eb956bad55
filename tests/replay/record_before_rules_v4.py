"""Record `logs/before-rules-v4.ndjson.gz`: a log written by the ledger as it was before ADR 0082 (rules
version 3, commit 5abf03c), holding registrations that today's rules decide differently. Run with THAT
release's code, never today's (the point is a log today's code did not write):

    git archive 5abf03c services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services python tests/replay/record_before_rules_v4.py OUT.ndjson.gz

What it holds (docs/adr/0082-registering-a-node-again-and-a-bound-on-its-gpus.md):
- a node drained for repair and registered again, unchanged (`steward cluster apply`), then with fewer GPUs (an
  executor's changed inventory): ready after each then (so a job was placed on it), draining today;
- a busy node retiring (`RetireNode(when_empty)`) registered again: ready then (its pending retirement
  cancelled: the last attempt's end retired nothing), retiring today;
- a node registered with 80,000 GPUs (a typo) and one with 2^31-1: accepted then, refused today.
Every decision records rules version 3.
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from pathlib import Path

from steward.audit.export import write_ndjson
from steward.bus.envelope import command_envelope
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
        admin, alice, executor = ("admin", "admin"), ("alice", "researcher"), ("executor", "admin")
        steps: list[tuple[tuple[str, str], Command]] = [
            (admin, SetAllocations("cluster", {"p1": 0.5, "p2": 0.5}, reason="the tree")),
            (admin, RegisterNode("n1", 8, "V100", ["b1", "n1"], "local")),
            (admin, RegisterNode("n2", 8, "V100", ["b1", "n2"], "local")),
            (admin, DrainNode("n1", "fan failing")),
            (executor, ReportNodeDrained("n1")),
            (admin, RegisterNode("n1", 8, "V100", ["b1", "n1"], "local")),  # cluster apply: ready again
            (admin, DrainNode("n1", "fan failing, again")),
            (admin, RegisterNode("n1", 4, "V100", ["b1", "n1"], "local")),  # the inventory changed: ready again
            (alice, SubmitJob("on-n1", "p1", 2, 600, ["train"])),
            (executor, PlaceJob("on-n1", {"n1": [0, 1]}, True, {"policy": "test"})),
            (executor, ReportJobStarted("on-n1", 1, 4242)),
            (alice, SubmitJob("on-n2", "p2", 2, 600, ["train"])),
            (executor, PlaceJob("on-n2", {"n2": [0, 1]}, True, {"policy": "test"})),
            (executor, ReportJobStarted("on-n2", 1, 4243)),
            (admin, RetireNode("n2", "decommissioned", when_empty=True)),
            (admin, RegisterNode("n2", 8, "V100", ["b2", "n2"], "local")),  # ready again: the retirement is off
            (executor, ReportJobExited("on-n2", 1, 0)),  # retired nothing then
            (executor, ReportJobExited("on-n1", 1, 0)),
            (admin, RegisterNode("typo", 80_000, "H100", ["b3", "typo"], "local")),
            (admin, RegisterNode("huge", 2**31 - 1, "H100", ["b3", "huge"], "local")),
        ]
        for (actor, role), command in steps:
            ledger.process([("old-release", command_envelope(command, actor=actor, role=role).encode())], {})
            clock[0] += 1.0
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            write_ndjson(store, fh)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
