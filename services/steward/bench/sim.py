"""`steward bench sim [--scenario FILE] [--policy NAME] [--max-jobs N]`: simulate a scenario and print
one JSON object: the figures of the run plus where the time went (cycles, time inside the policy), and
`build`: `compiled` or `pure` (ADR 0020; `STEWARD_PURE=1` runs the pure sources).

The issue-4 target is `wall_s` <= 60 for the whole philly scenario under `steward`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from steward.native import compiled_in_use
from steward.sim.errors import SimError
from steward.sim.run import run_scenario

DEFAULT_SCENARIO = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "scenarios" / "philly.yaml"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="steward bench sim")
    p.add_argument("--scenario", default=str(DEFAULT_SCENARIO))
    p.add_argument("--policy", default="steward")
    p.add_argument("--max-jobs", type=int, default=None)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    overrides = {"max_jobs": str(args.max_jobs)} if args.max_jobs is not None else {}  # 0: refused, not "all"
    try:
        result = run_scenario(args.scenario, args.policy, overrides)
    except SimError as exc:
        print(f"steward bench sim: {exc}", file=sys.stderr)
        return 2
    out = {**result.to_json(), **{k: v for k, v in result.diagnostics().items() if k != "cycles_by_trigger"},
           "build": "compiled" if compiled_in_use() else "pure"}  # ADR 0020: which code ran
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
