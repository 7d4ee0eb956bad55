"""`steward sim` / `python -m steward.sim`: run a scenario, compare policies, or replay history.

    --scenario FILE --policy NAME [--json] [--out DIR] [--set KEY=VALUE ...]
    --scenario FILE --compare steward,ai2,fair-tree,fifo-priority,tiresias --out DIR [--json]
    --from-events FILE --policy NAME [--set KEY=VALUE ...] [--json] [--out DIR]
    generate --family NAME --seed N --out DIR [--nodes N --load X --jobs N --days D --param K=V ...]
    generate --list
    suite [--json] [--quick] [--policies a,b] [--seeds 3] [--workers N] [--out DIR] [--scenarios a,b]

`main(argv)` returns the exit code: 0 done, 2 bad input (one line on stderr, no traceback),
1 the simulation itself failed (a policy decision the cluster cannot carry out).
"""

from __future__ import annotations

import argparse
import dataclasses
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
        description="Trace-driven simulation of the scheduling policy (see docs/results.md). Also "
                    "`steward sim generate --help` (generated scenarios) and `steward sim suite --help` "
                    "(the scenario suite).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", metavar="FILE", help="scenario YAML (with its trace CSV)")
    src.add_argument("--from-events", metavar="FILE",
                     help="recorded history to replay (scenario YAML today; event-log NDJSON later)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--policy", metavar="NAME",
                      help="steward, ai2, fair-tree, fifo-priority, tiresias, random-cluster or least-loaded")
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


def generate_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="steward sim generate",
                description="Write a generated scenario (YAML + trace CSV) of a named, seeded family "
                            "(docs/results.md, 'The scenario suite').")
    p.add_argument("--list", action="store_true", help="list the families and their parameters")
    p.add_argument("--family", metavar="NAME")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="same family, seed and parameters: same files")
    p.add_argument("--out", metavar="DIR", help="folder for NAME.yaml and NAME.csv")
    p.add_argument("--nodes", type=int, metavar="N", help="nodes of 8 GPUs (4-64 in the suite)")
    p.add_argument("--load", type=float, metavar="X", help="requested GPU-seconds / (capacity x arrival span)")
    p.add_argument("--jobs", type=int, metavar="N", help="exactly N jobs (default: by cluster size and --days)")
    p.add_argument("--days", type=float, metavar="D", help="arrival span to aim for (default 10)")
    p.add_argument("--param", metavar="KEY=VALUE", action="append", default=[], dest="params",
                   help="any other parameter of the family (see --list); repeatable")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    return p


def suite_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="steward sim suite",
                description="Philly plus generated scenarios, every policy, several seeds: one table of "
                            "each figure's mean [min, max] and the issue-18 checks for steward.")
    p.add_argument("--json", action="store_true", help="print the table and checks as JSON")
    p.add_argument("--quick", action="store_true",
                   help="a fast pass: 1 seed unless --seeds, small generated scenarios, Philly's first jobs")
    p.add_argument("--policies", metavar="A,B", help="default: every policy of the simulator")
    p.add_argument("--seeds", type=int, metavar="N", help="seeds per scenario (default 3; --quick 1)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="simulations at once, in processes")
    p.add_argument("--out", metavar="DIR", help="write suite.csv, suite.md, checks.csv, suite.json and the scenarios")
    p.add_argument("--no-philly", action="store_true", help="generated scenarios only")
    p.add_argument("--scenarios", metavar="A,B", help="only these scenarios of the suite (names as in the table)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    sub = args_list[0] if args_list and args_list[0] in ("generate", "suite") else None
    try:
        if sub == "generate":
            args = generate_parser().parse_args(args_list[1:])
        elif sub == "suite":
            args = suite_parser().parse_args(args_list[1:])
        else:
            args = build_parser().parse_args(args_list)
    except _Usage as exc:
        _say(f"steward sim{' ' + sub if sub else ''}: {exc}")
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        if sub == "generate":
            return _generate(args)
        if sub == "suite":
            return _suite(args)
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
                          workers=args.workers)
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
    if result.recorder.cut_off_at_cycle is not None:
        _say(f"steward sim: warning: {result.policy} stopped at cycle {result.recorder.cut_off_at_cycle}, the storm "
             f"cut-off (sim.max_cycles_per_job={result.scenario.sim.max_cycles_per_job:g} per job; "
             "--set sim.max_cycles_per_job=null runs to the end): its figures stop there")
    if result.recorder.unfinished:
        _say(f"steward sim: warning: {result.recorder.unfinished} job(s) never finished")
    return EXIT_OK


def _generate(args: argparse.Namespace) -> int:
    from steward.sim.generate import FAMILIES, generate
    from steward.sim.scenario import parse_set_args

    if args.list:
        fams: list[dict[str, Any]] = [
            {"family": f.name, "what": f.doc, "parameters": dataclasses.asdict(f.params())}
            for f in FAMILIES.values()]
        if args.json:
            print(json.dumps(fams, indent=2))
        else:
            for f in fams:
                print(f"{f['family']}: {f['what']}")
                print("    " + " ".join(f"{k}={v}" for k, v in f["parameters"].items()))
        return EXIT_OK
    if not args.family:
        raise SimError("generate needs --family NAME (or --list)")
    if not args.out:
        raise SimError("generate needs --out DIR")
    values: dict[str, Any] = dict(parse_set_args(args.params))
    for key in ("nodes", "load", "jobs", "days"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    g = generate(args.family, args.seed, values)
    path = g.write(args.out)
    if args.json:
        print(json.dumps({**g.summary(), "yaml": str(path.resolve())}, indent=2))
    else:
        s = g.summary()
        print(f"wrote {path} and {g.name}.csv: {s['jobs']} jobs over {s['span_days']} days on "
              f"{s['gpus']} GPUs, offered load {s['load']}")
    return EXIT_OK


def _suite(args: argparse.Namespace) -> int:
    from steward.sim.suite import PHILLY, markdown, resolve_policies, run_suite, select

    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)

    def progress(task: Any, done: int, total: int) -> None:
        if not args.json:
            _say(f"[{done}/{total}] {task.scenario} seed {task.seed} {task.policy}")

    result = run_suite(resolve_policies(args.policies), seeds=seeds, quick=args.quick, workers=args.workers,
                       out_dir=args.out, scenarios=select(args.scenarios),
                       philly=None if args.no_philly else PHILLY, progress=progress)
    for note in result.meta["notes"]:
        _say(f"steward sim suite: {note}")
    for err in result.errors:
        _say(f"steward sim suite: {err['scenario']} seed {err['seed']} {err['policy']}: {err['error']}")
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(markdown(result), end="")
        print(f"{result.meta['runs']} runs in {result.meta['wall_s']} s")
    return EXIT_FAILED if result.errors else EXIT_OK


def _say(line: str) -> None:
    print(line.replace("\n", " "), file=sys.stderr)
