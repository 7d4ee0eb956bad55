"""Record `logs/before-rules-v6.ndjson.gz`: a log written by the ledger as it was before ADR 0098 (rules version 5,
main at c71363a), holding a decision that today's rules decide differently. Run with THAT release's code, never
today's (the point is a log today's code did not write):

    git archive c71363a services migrations alembic.ini | tar -x -C /tmp/old
    STEWARD_PURE=1 PYTHONPATH=/tmp/old/services:. python -m tests.replay.record_before_rules_v6 OUT.ndjson.gz

What it holds (docs/adr/0098-a-policy-change-weighs-a-gpu-model-by-the-weight-rule.md): a `SetPolicy` making the
V100's weight 0 (its hours free to every budget): accepted then, refused today (`model_weights_positive`); a job
placed on the V100 node while the weight was 0; a `SetPolicy` of weight 0.25 (accepted under both rules).
Every decision records rules version 5.
"""

from __future__ import annotations

import sys
from pathlib import Path

from steward.domain.commands import (
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobStarted,
    SetAllocations,
    SetPolicy,
    SubmitJob,
)
from tests.replay.old_release import ADMIN, ALICE, EXECUTOR, SCHEDULER, Sender, record

STEPS: list[tuple[Sender, Command]] = [
    (ADMIN, SetAllocations("cluster", {"p1": 0.5, "p2": 0.5}, reason="the tree")),
    (ADMIN, RegisterNode("h1", 8, "H100", ["b1", "h1"], "local")),
    (ADMIN, RegisterNode("v1", 4, "V100", ["b1", "v1"], "local")),
    (ADMIN, SetPolicy({"gpu_model_weights": {"H100": 1.0, "V100": 0}}, reason="the V100s are free")),  # refused today
    (ALICE, SubmitJob("on-v1", "p1", 4, 600, ["train"], gpu_models=["V100"])),
    (SCHEDULER, PlaceJob("on-v1", {"v1": [0, 1, 2, 3]}, True, {"policy": "test"})),
    (EXECUTOR, ReportJobStarted("on-v1", 1, 4242)),
    (ADMIN, SetPolicy({"gpu_model_weights": {"H100": 1.0, "V100": 0.25}}, reason="the V100s cost a quarter")),
]


if __name__ == "__main__":
    record(STEPS, Path(sys.argv[1]))
