"""`steward bench suite [--quick] [--workers N] [--seeds N] [--policies A,B] [--out DIR]`: the whole
scenario suite (steward.sim.suite: Philly plus the generated scenarios, every policy, 3 seeds) as a
benchmark. Prints one JSON object: the suite's table, checks and per-criterion summary, its wall time
(`suite.wall_s`, the whole run including generation) and `build` (`compiled` or `pure`, ADR 0020).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from steward.native import compiled_in_use
from steward.sim.errors import SimError
from steward.sim.suite import PHILLY, resolve_policies, run_suite, select


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="steward bench suite")
    p.add_argument("--json", action="store_true", help="accepted for symmetry; the output is always JSON")
    p.add_argument("--quick", action="store_true", help="1 seed, small generated scenarios, Philly's first jobs")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--policies", default=None)
    p.add_argument("--out", default=None, help="also write suite.csv, suite.md, checks.csv, suite.json here")
    p.add_argument("--no-philly", action="store_true")
    p.add_argument("--scenarios", default=None, help="only these scenarios of the suite")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    try:
        result = run_suite(resolve_policies(args.policies), seeds=seeds, quick=args.quick,
                           workers=args.workers, out_dir=args.out, scenarios=select(args.scenarios),
                           philly=None if args.no_philly else PHILLY,
                           progress=lambda t, k, n: print(f"[{k}/{n}] {t.scenario} seed {t.seed} {t.policy}",
                                                          file=sys.stderr, flush=True))
    except SimError as exc:
        print(f"steward bench suite: {exc}", file=sys.stderr)
        return 2
    out = {"wall_s": result.meta["wall_s"], "build": "compiled" if compiled_in_use() else "pure",
           **result.to_json()}
    print(json.dumps(out, indent=2))
    return 1 if result.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
