"""Record `logs/before-rules-v5.ndjson.gz`: a log written by the ledger as it was before ADR 0091 (rules version 4,
main at cf11843), holding decisions that today's rules decide differently. Run with THAT release's code, never
today's (the point is a log today's code did not write):

    git -C /work/main archive cf11843 services migrations alembic.ini | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/services STEWARD_PURE=1 python tests/replay/record_before_rules_v5.py OUT.ndjson.gz

What it holds (docs/adr/0091-one-executor-a-cluster-foreign-load-kept-and-a-restore-checked.md):
- a node of executor `jup-2` registered into cluster `jupiter`, whose node `j1` executor `jup` serves, and a node of
  executor `k8s` registered into the default cluster beside `local`'s `d1`: accepted then, refused today
  (`one_executor_a_cluster`);
- `d1` holding 6 GPUs of foreign load (an executor's heartbeat) registered again: its foreign load was 0 then
  (a 4-GPU job was placed on it at once), kept today (`registration_keeps_foreign`);
- a session that accepted only V100 restored after the last V100 node was retired, and a session that accepted
  only the default cluster restored after its project was pinned to `jupiter`: restored then, refused today
  (`restore_checks_request`).
Every decision records rules version 4.
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
    ReportHeartbeat,
    ReportJobStarted,
    RestoreSession,
    RetireNode,
    SetAllocations,
    SubmitJob,
)
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

START = 1_796_500_000.0  # 2026-12-06T19:46:40Z


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
            (admin, RegisterNode("j1", 8, "A100", ["jupiter", "j1"], "jup", cluster="jupiter")),
            (admin, RegisterNode("j2", 8, "A100", ["jupiter", "j2"], "jup-2", cluster="jupiter")),  # refused today
            (admin, RegisterNode("d1", 8, "H100", ["b1", "d1"], "local")),
            (admin, RegisterNode("d2", 8, "H100", ["b1", "d2"], "k8s")),  # refused today
            (admin, RegisterNode("v1", 4, "V100", ["old", "v1"], "local")),
            (executor, ReportHeartbeat("local", {}, ["d1", "v1"], foreign={"d1": 6})),
            (admin, RegisterNode("d1", 8, "H100", ["b2", "d1"], "local")),  # foreign 0 then, 6 today
            (alice, SubmitJob("on-d1", "p1", 4, 600, ["train"], gpu_models=["H100"])),
            (executor, PlaceJob("on-d1", {"d1": [0, 1, 2, 3]}, True, {"policy": "test"})),
            (alice, SubmitJob("s1", "p1", 2, 600, ["jupyter"], resumable=True, job_class="interactive",
                              gpu_models=["V100"])),
            (executor, PlaceJob("s1", {"v1": [0, 1]}, True, {"policy": "test"})),
            (executor, ReportJobStarted("s1", 1, 4242)),
            (alice, CancelJob("s1", "lunch")),
            (admin, RetireNode("v1", "the last V100 goes")),
            (alice, RestoreSession("s1", "s1-again")),  # refused today: no V100 left
            (alice, SubmitJob("s2", "p2", 1, 600, ["jupyter"], resumable=True, job_class="interactive",
                              clusters=["default"])),
            (executor, PlaceJob("s2", {"d1": [4]}, True, {"policy": "test"})),
            (executor, ReportJobStarted("s2", 1, 4243)),
            (alice, CancelJob("s2", "lunch")),
            (admin, SetAllocations("cluster", {"p2": 0.5}, reason="p2 runs on its own hardware",
                                   pins={"p2": "jupiter"})),
            (alice, RestoreSession("s2", "s2-again")),  # refused today: outside the pin
        ]
        for (actor, role), command in steps:
            ledger.process([("old-release", command_envelope(command, actor=actor, role=role).encode())], {})
            clock[0] += 1.0
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            write_ndjson(store, fh)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
