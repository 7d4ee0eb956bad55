"""`steward sim` / `python -m steward.sim`: run a scenario, compare policies, or replay history.

    --scenario FILE --policy NAME [--json] [--out DIR] [--set KEY=VALUE ...]
    --scenario FILE --compare steward,ai2,fair-tree,fifo-priority,tiresias --out DIR [--json]
    --from-events FILE --policy NAME [--set KEY=VALUE ...] [--json] [--out DIR]

`main(argv)` returns the exit code: 0 done, 2 bad input (one line on stderr, no traceback),
1 the simulation itself failed (a policy decision the cluster cannot carry out).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from steward.sim.errors import SimError, SimulationFailed

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


class _Usage(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="steward sim",
        description="Trace-driven simulation of the scheduling policy (see docs/results.md).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", metavar="FILE", help="scenario YAML (with its trace CSV)")
    src.add_argument("--from-events", metavar="FILE",
                     help="recorded history to replay (scenario YAML today; event-log NDJSON later)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--policy", metavar="NAME", help="steward, ai2, fair-tree, fifo-priority or tiresias")
    what.add_argument("--compare", metavar="A,B,...", help="several policies on the same scenario")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="sets",
                   help="what-if override: share.NODE=X, window_days=N, max_min_runtime_s=S, "
                        "session_cap_s=S, settings.KNOB=V, max_jobs=N (repeatable)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--out", metavar="DIR", help="write tables (CSV) and plots (PNG) here")
    p.add_argument("--no-plots", action="store_true", help="with --out: tables only")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="with --compare: run N policies at once in separate processes")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(args_list)
    except _Usage as exc:
        _say(f"steward sim: {exc}")
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        return _run(args)
    except SimulationFailed as exc:
        _say(f"steward sim: {exc}")
        return EXIT_FAILED
    except SimError as exc:
        _say(f"steward sim: {exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _say("steward sim: interrupted")
        return 130


def _run(args: argparse.Namespace) -> int:
    from steward.sim.run import compare, replay, run_scenario, simulate
    from steward.sim.scenario import parse_set_args

    overrides = parse_set_args(args.sets)
    if args.compare:
        if args.from_events:
            raise SimError("--compare works with --scenario (replay one policy at a time)")
        if not args.out:
            raise SimError("--compare needs --out DIR for its table and plots")
        names = [n for n in args.compare.split(",") if n.strip()]
        results = compare(args.scenario, names, args.out, overrides, plots=not args.no_plots,
                          workers=max(1, args.workers))
        if args.json:
            print(json.dumps([r.to_json() for r in results], indent=2))
        else:
            from steward.sim.report import text_table

            print(text_table([r.to_json() for r in results]))
            print(f"tables and plots: {Path(args.out).resolve()}")
        return EXIT_OK
    if args.from_events:
        result = replay(args.from_events, args.policy, overrides)
    else:
        result = run_scenario(args.scenario, args.policy, overrides)
    _ = simulate  # re-exported for callers that already hold a Scenario
    if args.out:
        from steward.sim.report import write_outputs

        write_outputs([result], Path(args.out), plots=not args.no_plots)
    figures: dict[str, Any] = result.to_json()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        from steward.sim.report import text_table

        print(text_table([figures]))
    if result.recorder.unfinished:
        _say(f"steward sim: warning: {result.recorder.unfinished} job(s) never finished")
    return EXIT_OK


def _say(line: str) -> None:
    print(line.replace("\n", " "), file=sys.stderr)
