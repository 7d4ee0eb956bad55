"""Record `logs/before-rules-v2.ndjson.gz`: a log written by the ledger as it was before three rule changes
(the commit before 479c496), holding commands that today's rules decide differently. Run with THAT
release's code, never today's (the point is a log today's code did not write):

    git archive 479c496^ services migrations alembic.ini | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/services python tests/replay/record_before_rules.py OUT.ndjson.gz

What it holds (docs/adr/0038-rules-version.md):
- a job asking more GPUs than the registered cluster: accepted then (JobSubmitted), refused today;
- names outside today's id pattern (a job "job with spaces", an org node "team a"): accepted then, refused
  by today's decoder (they never reach a decision);
- a policy change setting `lane_hold_s`: accepted then (PolicySet), a retired setting today; and a later
  policy change whose recorded `settings` still carry it (today's merge drops retired settings);
- ordinary work around them, so the replay folds a state that depends on them.
Every decision records no rules version (the field did not exist).
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from pathlib import Path

from steward.ledger.core import Ledger

from steward.audit.export import write_ndjson
from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    CancelJob,
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    SetPolicy,
    SubmitJob,
)
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

START = 1_796_000_000.0  # 2026-12-01T00:53:20Z


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/old.db"
        upgrade(url)
        store = EventStore.from_url(url)
        clock = [START]
        ledger = Ledger(store, clock=lambda: clock[0], consumer_name="old-release")
        steps: list[tuple[str, str, Command]] = [
            ("admin", "admin", SetAllocations("cluster", {"research": 0.7, "team a": 0.3}, reason="the tree")),
            ("admin", "admin", SetAllocations("research", {"p1": 0.5, "p2": 0.5}, reason="projects")),
            ("admin", "admin", RegisterNode("n1", 8, "V100", ["b1", "n1"], "local")),
            ("admin", "admin", RegisterNode("n2", 8, "V100", ["b1", "n2"], "local")),
            ("admin", "admin", SetPolicy({"lane_hold_s": 120.0}, reason="hold the lane's room two minutes")),
            ("admin", "admin", SetPolicy({"settle_s": 30.0}, reason="settle")),
            ("alice", "researcher", SubmitJob("too-big", "p1", 64, 600, ["train"])),
            ("alice", "researcher", SubmitJob("job with spaces", "p1", 2, 600, ["train"])),
            ("alice", "researcher", SubmitJob("fits", "p2", 4, 600, ["train"])),
            ("scheduler", "admin", PlaceJob("fits", {"n1": [0, 1, 2, 3]}, True, {"policy": "test"})),
            ("executor", "admin", ReportJobStarted("fits", 1, 4242)),
            ("executor", "admin", ReportJobExited("fits", 1, 0)),
            ("alice", "researcher", CancelJob("too-big", "it can never run")),
            ("admin", "admin", SetPolicy({"lane_hold_s": 60.0}, reason="shorter hold")),
        ]
        for actor, role, command in steps:
            ledger.process([("old-release", command_envelope(command, actor=actor, role=role).encode())], {})
            clock[0] += 1.0
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            write_ndjson(store, fh)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
