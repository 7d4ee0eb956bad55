"""Record `logs/before-rules-v5.ndjson.gz`: a log written by the ledger as it was before ADR 0091 (rules version 4,
main at cf11843), holding decisions that today's rules decide differently. Run with THAT release's code, never
today's (the point is a log today's code did not write):

    git archive cf11843 services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services:. python -m tests.replay.record_before_rules_v5 OUT.ndjson.gz

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

import sys
from pathlib import Path

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
from tests.replay.old_release import ADMIN, ALICE, EXECUTOR, SCHEDULER, Sender, record

STEPS: list[tuple[Sender, Command]] = [
    (ADMIN, SetAllocations("cluster", {"p1": 0.5, "p2": 0.5}, reason="the tree")),
    (ADMIN, RegisterNode("j1", 8, "A100", ["jupiter", "j1"], "jup", cluster="jupiter")),
    (ADMIN, RegisterNode("j2", 8, "A100", ["jupiter", "j2"], "jup-2", cluster="jupiter")),  # refused today
    (ADMIN, RegisterNode("d1", 8, "H100", ["b1", "d1"], "local")),
    (ADMIN, RegisterNode("d2", 8, "H100", ["b1", "d2"], "k8s")),  # refused today
    (ADMIN, RegisterNode("v1", 4, "V100", ["old", "v1"], "local")),
    (EXECUTOR, ReportHeartbeat("local", {}, ["d1", "v1"], foreign={"d1": 6})),
    (ADMIN, RegisterNode("d1", 8, "H100", ["b2", "d1"], "local")),  # foreign 0 then, 6 today
    (ALICE, SubmitJob("on-d1", "p1", 4, 600, ["train"], gpu_models=["H100"])),
    (SCHEDULER, PlaceJob("on-d1", {"d1": [0, 1, 2, 3]}, True, {"policy": "test"})),
    (ALICE, SubmitJob("s1", "p1", 2, 600, ["jupyter"], resumable=True, job_class="interactive",
                      gpu_models=["V100"])),
    (SCHEDULER, PlaceJob("s1", {"v1": [0, 1]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("s1", 1, 4242)),
    (ALICE, CancelJob("s1", "lunch")),
    (ADMIN, RetireNode("v1", "the last V100 goes")),
    (ALICE, RestoreSession("s1", "s1-again")),  # refused today: no V100 left
    (ALICE, SubmitJob("s2", "p2", 1, 600, ["jupyter"], resumable=True, job_class="interactive",
                      clusters=["default"])),
    (SCHEDULER, PlaceJob("s2", {"d1": [4]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("s2", 1, 4243)),
    (ALICE, CancelJob("s2", "lunch")),
    (ADMIN, SetAllocations("cluster", {"p2": 0.5}, reason="p2 runs on its own hardware", pins={"p2": "jupiter"})),
    (ALICE, RestoreSession("s2", "s2-again")),  # refused today: outside the pin
]


if __name__ == "__main__":
    record(STEPS, Path(sys.argv[1]))
