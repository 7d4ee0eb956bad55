"""`python -m steward.demo [summary|driver|sim-executor]`; see the package docstring."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from steward.config import Settings, get_settings
from steward.demo.driver import demo_dir, read_config, read_status
from steward.demo.plan import (
    DemoOptions,
    PlanError,
    default_scenario,
    plan_slice,
    policy_settings,
    sim_checkpoint_s,
    slice_figures,
)
from steward.demo.summary import SummaryError, figures, table
from steward.sim.errors import ScenarioError

SIM_EXECUTOR = "sim"
LOCAL_NODE = "local-0"
# The demo's second cluster (issue 25, ADR 0068): the local node, on the stack's node agent, with another GPU
# model than the simulated cluster's (the scenario's `cluster:`, the default cluster), so every placement is
# routed between the two and the allocations' figures split by cluster and model.
LOCAL_CLUSTER = "local"
LOCAL_MODEL = "A100"
# What an hour of each model costs in budget units (ADR 0057; DESIGN.md's example), so the tree's figures are
# weighted GPU-hours and the split by model shows what each cluster's hours cost: the scenario's V100s and the
# local A100.
DEMO_WEIGHTS = {"V100": 0.25, LOCAL_MODEL: 0.55}
ROLES = (("admin", ()), ("manager", ("research",)), ("researcher", ("ee9e8c",)), ("auditor", ()))


class DemoError(RuntimeError):
    """A step of the demo failed; the message says which and where to look."""


def steward(*args: str) -> str:
    """Run a `steward` command in this process (a new Python per command costs seconds on a loaded
    machine) and return what it printed; a failure becomes a DemoError with the CLI's own message."""
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    import click
    import typer

    from steward.cli.main import app
    from steward.cli.output import CliError

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            app(list(args), standalone_mode=False)
    except CliError as err:
        raise DemoError(f"`steward {' '.join(args)}` failed: {err.message}") from None
    except typer.Exit as done:
        if done.exit_code:
            raise DemoError(f"`steward {' '.join(args)}` exited {done.exit_code}") from None
    except click.ClickException as err:
        raise DemoError(f"`steward {' '.join(args)}`: {err.format_message()}") from None
    return out.getvalue()


def _stack_env(settings: Settings) -> dict[str, str]:
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.infra.processes import Paths

    path = Paths(settings.run_dir).stack_env
    values = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return os.environ | values | {"STEWARD_RUN_DIR": str(settings.run_dir)}


def _options(ns: argparse.Namespace) -> DemoOptions:
    o = DemoOptions(speed=ns.speed, start_day=ns.start_day, hours=ns.hours, warm_factor=ns.warm,
                    sessions=ns.sessions, session_cap_h=ns.session_cap_hours,
                    restore_after_min=ns.restore_after_minutes)
    o.check()
    return o


def ready_local_node(log: Callable[[str], None]) -> None:
    """The demo's local node takes work again. The last demo's stop drained it to cancel its jobs
    (`Driver.release_local_nodes`), and registering a node again keeps a drain (ADR 0082: only a resume ends
    it), so the demo resumes its own node when it finds it draining."""
    nodes = json.loads(steward("node", "list", "-o", "json"))
    if any(n["id"] == LOCAL_NODE and n["state"] == "draining" for n in nodes):
        steward("node", "resume", LOCAL_NODE, "--reason", "demo start: the last demo's stop drained it")
        log(f"{LOCAL_NODE} resumed (the last demo's stop drained it)")


def set_up(settings: Settings, options: DemoOptions, scenario: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Bring the stack up for the demo and start its two background processes; returns the config the
    driver runs from. Idempotent: a running demo is left alone."""
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.cli.stack import bring_up
    from steward.infra.processes import InfraError, Paths, read_pid, start_own
    from steward.sim.scenario import load_scenario

    paths = Paths(settings.run_dir)
    if read_pid(paths, "demo-driver") is not None:
        log("the demo already runs; its figures follow (`make down` stops it)")
        return read_config(settings)
    sc = load_scenario(scenario)
    # the contract timings (grace, session warnings) come with `steward policy set` below: the worker's
    # dispatcher freezes the recorded policy into every new run, so a running worker needs no restart
    t = time.monotonic()
    try:
        bring_up(settings, postgres=True)
    except InfraError as err:
        raise DemoError(str(err)) from None
    log(f"stack up in {time.monotonic() - t:.0f} s; applying {scenario.name}")
    steward("tree", "apply", str(scenario), "--reason", "demo setup")
    # the local node first: a cluster has one executor (ADR 0091), so on a store where it was in the default cluster
    # (with the simulated executor's nodes) it moves to its own before the simulated nodes are registered again
    steward("node", "register", LOCAL_NODE, "--gpus", str(settings.executor_gpus), "--path",
            f"{LOCAL_CLUSTER}/{LOCAL_NODE}", "--executor", settings.executor_id, "--cluster", LOCAL_CLUSTER,
            "--gpu-model", LOCAL_MODEL)
    ready_local_node(log)
    try:  # --prune: a store registered before the one scenario parser (node-19 beside node019) sheds the old names
        steward("cluster", "apply", str(scenario), "--executor", SIM_EXECUTOR, "--prune", "--yes")
    except DemoError as err:  # registered and weighted; only busy old nodes were kept (ADR 0078)
        if "not retired" not in str(err):
            raise
        log(f"{err}; drain them (`steward node drain`), then `steward cluster apply {scenario.name} --prune`")
    steward("gpu-models", "set", *(f"{m}={w:g}" for m, w in DEMO_WEIGHTS.items()), "--reason",
            "demo: an A100 hour costs 2.2 V100 hours")
    local_agent_serves(paths, LOCAL_NODE)
    folder = demo_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    policy_file = folder / "policy.json"
    policy_file.write_text(json.dumps(policy_settings(sc.policy, options), indent=1))
    steward("policy", "set", str(policy_file), "--reason", f"demo: {sc.name} policy at {options.speed:g}x")
    env = _stack_env(settings)
    start_own("sim-executor", paths, env | {"STEWARD_EXECUTOR_ID": SIM_EXECUTOR},
              ("steward.demo", "sim-executor", "--checkpoint-s", f"{sim_checkpoint_s(options):g}"))
    epoch = time.time()
    tag = "d" + format(int(epoch), "x")[-6:]
    config: dict[str, Any] = {"tag": tag, "epoch": epoch, "scenario": str(scenario),
                              "options": {k: getattr(options, k) for k in options.__dataclass_fields__}}
    subs, skipped = plan_slice(sc, options, tag)
    config["plan"] = slice_figures(subs, skipped)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "status.json").unlink(missing_ok=True)
    start_own("demo-driver", paths, env, ("steward.demo", "driver"))
    time.sleep(1.0)
    dead = [n for n in ("sim-executor", "demo-driver") if read_pid(paths, n) is None]
    if dead:
        raise DemoError(f"{', '.join(dead)} exited at once; see {', '.join(str(paths.log_file(n)) for n in dead)}")
    return config


def local_agent_serves(paths: Any, nodes: str) -> bool:
    """The stack's node agent serves `nodes` only (STEWARD_EXECUTOR_NODES; "": every node placed with it): in
    the demo, the local node. Without it the agent would start, as real processes here, any placement that
    reached it for a node of the simulated cluster (ADR 0058). The agent is restarted with the setting when
    it runs without it (it re-attaches to its jobs); True when it was."""
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.infra.processes import start_own, stop_own

    env: dict[str, str] = json.loads(paths.spec_file("executor").read_text())["env"]
    if env.get("STEWARD_EXECUTOR_NODES", "") == nodes:
        return False
    stop_own("executor", paths)
    start_own("executor", paths, env | {"STEWARD_EXECUTOR_NODES": nodes})
    return True


def tokens(settings: Settings) -> dict[str, str]:
    """A token per role (kept in <run>/demo/tokens.json, readable by its owner only)."""
    path = demo_dir(settings) / "tokens.json"
    try:
        saved: dict[str, str] = json.loads(path.read_text())
        if set(saved) == {r for r, _ in ROLES} and all(_token_role(settings, t) == r for r, t in saved.items()):
            return saved
    except (OSError, ValueError):
        pass  # none yet, or minted for a store that has since been wiped: mint new ones
    out = {}
    for role, scopes in ROLES:
        args = ["token", "create", "--role", role, "--subject", f"demo-{role}", "--output", "json"]
        for s in scopes:
            args += ["--scope", s]
        out[role] = json.loads(steward(*args))["token"]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(out, fh, indent=1)
    return out


def _token_role(settings: Settings, token: str) -> str | None:
    """The role the API takes `token` for (None: it does not accept it)."""
    import httpx

    try:
        resp = httpx.post(settings.resolved_api_url, json={"query": "{ me { role } }"},
                          headers={"Authorization": f"Bearer {token}"}, timeout=30)
        role = (resp.json().get("data") or {}).get("me", {}).get("role")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return str(role) if role else None


def useful(f: dict[str, Any]) -> bool:
    """The first useful screen: both executors run work, and the cluster is contended (at least half its
    GPUs busy and jobs waiting)."""
    ex = f["executors"]
    return bool(ex.get(SIM_EXECUTOR, {}).get("jobs", 0) > 0 and ex.get("local", {}).get("jobs", 0) > 0
                and f["occupancy"] >= 0.5 and f["jobs_waiting"] > 0)


def window_s(config: dict[str, Any]) -> float:
    """Owed vs delivered over the whole demo (the API's default window, 7 real days)."""
    return 7 * 86400.0


def _admin_token(settings: Settings) -> str:
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.cli.client import default_token

    token = default_token()
    if not token:
        raise DemoError(f"no admin token in {settings.run_dir / 'token'}; run `make up` first")
    return token


def print_screen(settings: Settings, config: dict[str, Any], role_tokens: dict[str, str], f: dict[str, Any]) -> None:
    speed = float(config["options"]["speed"])
    status = read_status(settings) or {}
    plan = config.get("plan", {})
    print()
    print(f"UI:               http://{settings.api_host}:{settings.api_port}/  (sign in with a token below)")
    print(f"API (GraphQL):    {settings.resolved_api_url}")
    for role, token in role_tokens.items():
        print(f"{role + ' token:':18}{token}")
    print(f"(tokens also in {demo_dir(settings) / 'tokens.json'})")
    print()
    print(f"replay: {config['scenario']} from day {config['options']['start_day']:g} for "
          f"{config['options']['hours']:g} trace hours at {speed:g}x ({speed:g} trace seconds per real second): "
          f"{plan.get('warm_jobs', '?')} jobs running at the slice's start, {plan.get('arrivals', '?')} arrivals "
          f"over {plan.get('last_arrival_s', 0) / 60:.1f} real minutes; {config['options']['sessions']} sessions "
          f"capped at {config['options']['session_cap_h']:g} trace hours")
    print(f"driver: {status.get('submitted', 0)}/{status.get('planned', '?')} submitted, "
          f"lag {status.get('lag_s', 0):.1f} s, job ids {config['tag']}-<trace id>")
    print()
    print(table(f, speed))
    print()
    print("refresh:  .venv/bin/python -m steward.demo summary    |    why:  .venv/bin/steward why <job>")
    print(f"logs:     {settings.run_dir}/logs/demo-driver.log, sim-executor.log    |    stop:  make down")


def cmd_start(ns: argparse.Namespace) -> int:
    t0 = float(os.environ.get("STEWARD_DEMO_T0") or time.time())
    settings = get_settings()
    options = _options(ns)

    def log(msg: str) -> None:
        print(f"[{time.time() - t0:6.1f} s] {msg}", flush=True)

    config = set_up(settings, options, Path(ns.scenario), log)
    role_tokens = tokens(settings)
    token = _admin_token(settings)
    log(f"replaying (job ids {config['tag']}-*); waiting for the first useful screen")
    deadline = time.monotonic() + ns.wait
    f = figures(settings, token, float(config["epoch"]), window_s(config))
    while not useful(f) and time.monotonic() < deadline:
        time.sleep(3)
        f = figures(settings, token, float(config["epoch"]), window_s(config))
    if useful(f):
        log(f"first useful screen: {f['gpus_used']}/{f['gpus_total']} GPUs busy, {f['jobs_waiting']} jobs waiting, "
            f"work on the simulated and the local nodes")
    else:
        log(f"not contended yet after {ns.wait:g} s; the replay goes on in the background")
    print_screen(settings, config, role_tokens, f)
    return 0


def cmd_summary(ns: argparse.Namespace) -> int:
    settings = get_settings()
    config = read_config(settings)
    f = figures(settings, _admin_token(settings), float(config["epoch"]), window_s(config))
    if ns.json:
        print(json.dumps(f | {"driver": read_status(settings)}, indent=1))
    else:
        print_screen(settings, config, tokens(settings), f)
    return 0


def _run_async(name: str, body: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> int:
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.logs import configure

    configure(name)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await body(stop)

    asyncio.run(main())
    return 0


def cmd_driver(ns: argparse.Namespace) -> int:
    from steward.demo.driver import run_driver

    settings = get_settings()
    return _run_async("demo-driver", lambda stop: run_driver(settings, stop))


def cmd_sim_executor(ns: argparse.Namespace) -> int:
    # lazy: start-up: each demo process (driver, executor, the stack) loads only what it runs
    from steward.executor.sim import run_sim_executor

    settings = get_settings()
    # speed 1: the replay already compressed every duration, so the simulated and the local nodes agree
    return _run_async("sim-executor", lambda stop: run_sim_executor(settings, stop, speed=1.0,
                                                                    checkpoint_s=ns.checkpoint_s))


def parser() -> argparse.ArgumentParser:
    d = DemoOptions()
    ap = argparse.ArgumentParser(prog="python -m steward.demo", description=__doc__)
    ap.set_defaults(func=cmd_start)
    ap.add_argument("--scenario", default=str(default_scenario()))
    ap.add_argument("--speed", type=float, default=d.speed, help="S: trace seconds per real second")
    ap.add_argument("--start-day", type=float, default=d.start_day, help="where the slice starts in the trace")
    ap.add_argument("--hours", type=float, default=d.hours, help="the slice's length in trace hours")
    ap.add_argument("--warm", type=float, default=d.warm_factor,
                    help="jobs running at the slice's start, up to this many times the cluster's GPUs")
    ap.add_argument("--sessions", type=int, default=d.sessions)
    ap.add_argument("--session-cap-hours", type=float, default=d.session_cap_h)
    ap.add_argument("--restore-after-minutes", type=float, default=d.restore_after_min)
    ap.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the first useful screen")
    sub = ap.add_subparsers()
    s = sub.add_parser("summary", help="print the addresses, tokens and summary table again")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_summary)
    sub.add_parser("driver", help="the replay driver (a background process)").set_defaults(func=cmd_driver)
    x = sub.add_parser("sim-executor", help="the simulated executor (a background process)")
    x.add_argument("--checkpoint-s", type=float, default=30.0)
    x.set_defaults(func=cmd_sim_executor)
    return ap


def main(argv: list[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    try:
        code: int = ns.func(ns)
    except (DemoError, PlanError, SummaryError, ScenarioError) as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    except FileNotFoundError as err:
        print(f"demo: {err.filename} is missing; start the demo with `make demo`", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
