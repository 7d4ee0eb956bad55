"""Benchmark of one scheduling cycle (`steward.policy.cycle.schedule`) on a synthetic cluster.

The cluster: `nodes` hosts of 8 GPUs in 3 topology levels (zone / spine / block; 8 nodes a block,
8 blocks a spine, 8 spines a zone), a 4-level org tree (division / department / team / project)
with `projects` leaves and random shares, usage in the window around each allocation's entitlement,
`running` jobs packed onto the nodes (mostly small, some whole-node), and `pending` waiting jobs of
every size up to 64-GPU gangs, some unfunded, some from unknown projects, some sessions. Generation is
seeded and not timed. The cycle runs `repeat` times on the same snapshot; the figures are wall-clock
milliseconds per cycle (and the process's CPU milliseconds, less sensitive to a busy machine; the
1-minute load average is reported so a reader can tell), and the process's peak RSS. After the timed
cycles: `explain_all_ms`, building every waiting job's explanation, and `explain_keys_ms`, what the
scheduler reads instead to find the ones that changed (ADR 0031: summaries, one per class of jobs).

    python -m steward.bench.cycle --nodes 1000 --pending 15000 --running 5000 --projects 200 --json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import resource
import statistics
import sys
import time
from typing import Any

from steward.bench import at_least
from steward.domain.policy_settings import InvalidSettings, PolicySettings
from steward.policy.cycle import schedule
from steward.policy.explain import Explanations
from steward.policy.model import AllocationTree, JobClass, Node, PendingJob, RunningJob, Snapshot

GPUS_PER_NODE = 8
NODES_PER_BLOCK = 8
BLOCKS_PER_SPINE = 8
SPINES_PER_ZONE = 8
NOW = 30 * 86400.0
LEVELS = ("zone", "spine", "block")


def build_nodes(n: int) -> tuple[Node, ...]:
    nodes = []
    for i in range(n):
        block = i // NODES_PER_BLOCK
        spine = block // BLOCKS_PER_SPINE
        zone = spine // SPINES_PER_ZONE
        nodes.append(Node(f"node{i:05d}", GPUS_PER_NODE, "H100", (f"z{zone}", f"s{spine}", f"b{block}")))
    return tuple(nodes)


def build_tree(projects: int, rng: random.Random) -> tuple[AllocationTree, list[str]]:
    """Four levels, about the same fan-out at each, exactly `projects` leaves."""
    fan = max(2, math.ceil(projects ** (1 / 4)))
    triples: list[tuple[str, str | None, float]] = []
    leaves: list[str] = []

    def shares(k: int) -> list[float]:
        w = [rng.uniform(0.5, 1.5) for _ in range(k)]
        total = sum(w) * rng.uniform(1.0, 1.05)
        return [x / total for x in w]

    # Split `projects` leaves as evenly as possible over fan^3 teams.
    teams = [f"d{a}.e{b}.t{c}" for a in range(fan) for b in range(fan) for c in range(fan)]
    per_team = [0] * len(teams)
    for k in range(projects):
        per_team[k % len(teams)] += 1
    used_teams = [t for t, c in zip(teams, per_team, strict=True) if c]
    divisions = sorted({t.split(".")[0] for t in used_teams})
    for d, sh in zip(divisions, shares(len(divisions)), strict=True):
        triples.append((d, None, sh))
        depts = sorted({".".join(t.split(".")[:2]) for t in used_teams if t.startswith(d + ".")})
        for e, sh2 in zip(depts, shares(len(depts)), strict=True):
            triples.append((e, d, sh2))
            tms = [t for t in used_teams if t.startswith(e + ".")]
            for t, sh3 in zip(tms, shares(len(tms)), strict=True):
                triples.append((t, e, sh3))
                count = per_team[teams.index(t)]
                for p, sh4 in zip(range(count), shares(count), strict=True):
                    name = f"{t}.p{p}"
                    triples.append((name, t, sh4))
                    leaves.append(name)
    return AllocationTree.build(triples), leaves


def _pick(rng: random.Random, table: tuple[tuple[int, float], ...]) -> int:
    x = rng.random()
    for value, p in table:
        x -= p
        if x < 0:
            return value
    return table[-1][0]


RUNNING_SIZES = ((1, 0.70), (2, 0.20), (4, 0.07), (8, 0.03))
PENDING_SIZES = ((1, 0.50), (2, 0.20), (4, 0.15), (8, 0.10), (16, 0.03), (32, 0.015), (64, 0.005))
MIN_RUNTIMES = ((0, 0.2), (1800, 0.2), (3600, 0.2), (4 * 3600, 0.2), (8 * 3600, 0.2))


def _klass(rng: random.Random) -> JobClass:
    x = rng.random()
    return "interactive" if x < 0.03 else ("debug" if x < 0.10 else "batch")


def build_running(nodes: tuple[Node, ...], count: int, leaves: list[str], rng: random.Random) -> tuple[RunningJob, ...]:
    """Pack `count` jobs onto the nodes in order (a job larger than the room left moves to the next
    node; jobs that do not fit anywhere are dropped)."""
    free = [n.gpus for n in nodes]
    out: list[RunningJob] = []
    i = 0
    n = len(nodes)
    for k in range(count):
        g = _pick(rng, RUNNING_SIZES)
        while i < n and free[i] < g:
            if free[i] == 0 or rng.random() < 0.5:
                i += 1
            else:
                g = free[i]
        if i >= n:
            break
        free[i] -= g
        project = rng.choice(leaves)
        mr = float(_pick(rng, MIN_RUNTIMES))
        klass = _klass(rng)
        start = NOW - rng.uniform(0, 24 * 3600)
        funded = mr > 0 or klass == "interactive"
        protection = 8 * 3600 if klass == "interactive" else mr
        ckpt = start + 1800 * math.floor((NOW - start) / 1800) if rng.random() < 0.8 else None
        out.append(
            RunningJob(
                id=f"r{k:06d}",
                project=project,
                gpus=g,
                placement=((nodes[i].id, g),),
                started_at=start,
                protected_until=start + protection if funded else start,
                funded=funded,
                last_checkpoint_at=ckpt,
                resumable=ckpt is not None,
                klass=klass,
                submitted_at=start - rng.uniform(0, 3600),
                min_runtime_s=mr,
            )
        )
    return tuple(out)


def build_pending(count: int, leaves: list[str], rng: random.Random) -> tuple[PendingJob, ...]:
    out = []
    # A skewed popularity: a few projects submit most of the work.
    weights = [1.0 / (1 + (k % 50)) for k in range(len(leaves))]
    chosen = rng.choices(leaves, weights=weights, k=count)
    for k in range(count):
        g = _pick(rng, PENDING_SIZES)
        project = chosen[k] if rng.random() > 0.02 else f"orphan{k % 7}"
        klass = _klass(rng) if g <= 8 else "batch"
        out.append(
            PendingJob(
                id=f"p{k:07d}",
                project=project,
                gpus=g,
                submitted_at=NOW - rng.uniform(0, 48 * 3600),
                min_runtime_s=float(_pick(rng, MIN_RUNTIMES)),
                resumable=rng.random() < 0.8,
                klass=klass,
                priority=1 if rng.random() < 0.05 else 0,
                topology_depth=3 if g >= 16 and rng.random() < 0.5 else None,
            )
        )
    return tuple(out)


def build_snapshot(
    nodes: int, pending: int, running: int, projects: int, seed: int = 7, settings: PolicySettings | None = None
) -> Snapshot:
    rng = random.Random(seed)
    node_list = build_nodes(nodes)
    tree, leaves = build_tree(projects, rng)
    capacity = nodes * GPUS_PER_NODE
    window = 7 * 86400.0
    usage = {p: tree.entitlement(p) * capacity * window * rng.uniform(0.2, 1.8) for p in leaves}
    return Snapshot(
        now=NOW,
        nodes=node_list,
        tree=tree,
        usage=usage,
        running=build_running(node_list, running, leaves, rng),
        pending=build_pending(pending, leaves, rng),
        settings=settings or PolicySettings.steward(),
        topology_levels=LEVELS,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[k]


def run(
    nodes: int = 1000,
    pending: int = 15000,
    running: int = 5000,
    projects: int = 200,
    repeat: int = 7,
    seed: int = 7,
    policy: str = "steward",
) -> dict[str, Any]:
    """Build the synthetic snapshot, run the cycle `repeat` times, return the figures."""
    t0 = time.perf_counter()
    snap = build_snapshot(nodes, pending, running, projects, seed, PolicySettings.preset(policy))
    build_s = time.perf_counter() - t0
    times: list[float] = []
    cpu: list[float] = []
    result = None
    gc.collect()
    for _ in range(max(1, repeat)):
        t, c = time.perf_counter(), time.process_time()
        result = schedule(snap)
        times.append((time.perf_counter() - t) * 1000.0)
        cpu.append((time.process_time() - c) * 1000.0)
    assert result is not None
    t = time.perf_counter()
    explained = sum(1 for _ in result.explanations.values())
    explain_all_ms = (time.perf_counter() - t) * 1000.0
    # ADR 0031: what the scheduler reads every `EXPLAIN_EVERY_S` to find the explanations that changed
    fresh = schedule(snap).explanations  # nothing read from it yet, as in the scheduler
    assert isinstance(fresh, Explanations)
    t = time.perf_counter()
    summarised = sum(1 for _ in fresh.summaries())
    explain_keys_ms = (time.perf_counter() - t) * 1000.0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "bench": "cycle",
        "policy": policy,
        "nodes": nodes,
        "gpus": nodes * GPUS_PER_NODE,
        "pending": len(snap.pending),
        "running": len(snap.running),
        "projects": projects,
        "repeat": len(times),
        "cycle_ms_p50": round(statistics.median(times), 2),
        "cycle_ms_p95": round(_pct(times, 0.95), 2),
        "cycle_ms_min": round(min(times), 2),
        "cpu_ms_p50": round(statistics.median(cpu), 2),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "peak_rss_mb": round(peak_kb / 1024.0, 1),
        "build_s": round(build_s, 2),
        "placements": len(result.placements),
        "preemptions": len(result.preemptions),
        "stops": len(result.stops),
        "waiting": len(result.explanations),
        "reservation": result.reservation is not None,
        "fragmentation": round(result.fragmentation, 4),
        "explain_all_ms": round(explain_all_ms, 1),
        "explained": explained,
        "explain_keys_ms": round(explain_keys_ms, 1),
        "summarised": summarised,
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="steward bench cycle", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=at_least(1), default=1000)
    parser.add_argument("--pending", type=at_least(0), default=15000)
    parser.add_argument("--running", type=at_least(0), default=5000)
    parser.add_argument("--projects", type=at_least(1), default=200)
    parser.add_argument("--repeat", type=at_least(1), default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policy", default="steward", help="steward, ai2, fair-tree, fifo-priority")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        PolicySettings.preset(args.policy)
    except InvalidSettings as err:
        parser.error(f"--policy: {err}")
    figures = run(args.nodes, args.pending, args.running, args.projects, args.repeat, args.seed, args.policy)
    if args.json:
        print(json.dumps(figures))
    else:
        for k, v in figures.items():
            print(f"{k:>16}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
