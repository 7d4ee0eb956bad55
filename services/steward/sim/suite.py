"""The scenario suite (issue 18): Philly plus generated scenarios, every policy, several seeds; one
table of each figure's mean and spread, and per scenario the issue's criteria for `steward`.

- Generated scenarios (generate.py): the seed varies the workload (the jobs, their arrivals, the
  tree's shares); seed k of a suite scenario is `steward sim generate --family F --seed k ...`.
- Philly (../shared/data/scenarios/philly.yaml): the trace is fixed, so the seed varies only the
  timing: seed 0 is the trace as written, seed k > 0 adds to every submit time a jitter drawn
  uniformly from [0, PHILLY_JITTER_S) by `random.Random(f"philly/{k}")` in trace order. That is the
  chaos issue 4 measured (equivalent runs differing by ~0.02 of owed_min), not a different workload.

The table: per scenario × policy, every numeric figure of `SimResult.to_json()` (nested ones as
`wait_p90_s.debug`), with its mean, min and max over the seeds; figures added to the simulator later
appear by themselves. The checks report, never assert (`check_scenario` has the rules).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steward.sim.errors import SimError, out_folder
from steward.sim.generate import DAY_S, MULTI_CLUSTER_FAMILIES, generate, offered_load
from steward.sim.policies import ROUTING
from steward.sim.scenario import Scenario, load_scenario
from steward.sim.workers import process_pool, worker_count

PHILLY = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "scenarios" / "philly.yaml"
PHILLY_JITTER_S = 5.0
PHILLY_QUICK_JOBS = 8000  # --quick: the first 8,000 jobs of Philly (about 12 days)
QUICK_JOBS = 500  # --quick: generated scenarios get this many jobs
DEBUG_SLO_S = 30.0
FULL_LOAD = 1.0  # "where the cluster is full": offered load at least the cluster's supply
SUBJECT = "steward"
REFERENCE = "ai2"

PASS, FAIL, NA = "pass", "fail", "n/a"
CUT_OFF = "cut_off.at_cycle"  # present in a run's figures only when the engine stopped it (a storm)
WITHIN_SPREAD = "within the seeds' spread of "  # the detail of an owed_min pass below a baseline's mean


@dataclass(frozen=True)
class SuiteScenario:
    """One scenario of the suite: a family with its size and load (or Philly when family is None)."""

    name: str
    family: str | None
    nodes: int = 0
    load: float = 0.0
    jobs: int | None = None  # None: the family's default for the size (QUICK_JOBS with --quick)
    params: tuple[tuple[str, Any], ...] = ()  # the family's own parameters (`generate --param`)

    def values(self, quick: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": self.nodes, "load": self.load, **dict(self.params)}
        if self.jobs is not None or quick:
            out["jobs"] = self.jobs if self.jobs is not None else QUICK_JOBS
        return out


def _g(family: str, nodes: int, load: float) -> SuiteScenario:
    return SuiteScenario(f"{family}-n{nodes}-l{load:g}", family, nodes, load)


# families × sizes (4-64 nodes) × loads (0.8-3x): each family on a small and a larger cluster, at
# light, full and heavy load, so no family is seen at one shape only
GENERATED: tuple[SuiteScenario, ...] = (
    _g("short-1gpu", 4, 1.5),
    _g("short-1gpu", 8, 3.0),
    _g("short-1gpu", 32, 0.8),
    _g("gang-heavy", 8, 1.2),
    _g("gang-heavy", 32, 2.0),
    _g("gang-heavy", 64, 1.5),
    _g("debug-heavy", 4, 2.0),
    _g("debug-heavy", 64, 1.2),
    _g("bursty", 8, 0.8),
    _g("bursty", 16, 2.0),
    _g("dominant-tenant", 8, 1.5),
    _g("dominant-tenant", 32, 3.0),
    _g("unfunded-many", 4, 3.0),
    _g("unfunded-many", 16, 1.2),
    _g("heavy-tail", 8, 2.5),
    _g("heavy-tail", 16, 1.5),
    _g("unfunded-debug", 6, 2.0),  # the held-out loop's shape (ADR 0028): debug work of tenants with no allocation
    # its heavy variant (ADR 0034): more guests' work and a long drain, where large unfunded jobs wait
    # behind idle GPUs scattered over nodes (steward's occupancy 0.85 against fifo-priority's 0.93)
    SuiteScenario("unfunded-debug-n6-l2-heavy", "unfunded-debug", 6, 2.0, 2400, (("guest_weight", 0.3),)),
    # two clusters, three weighted GPU models (issue 25, ADR 0057, 0066): the routing baselines run here only
    _g("two-clusters", 8, 1.5),
    _g("two-clusters", 16, 2.0),
)
PHILLY_ENTRY = SuiteScenario("philly", None)


@dataclass(frozen=True)
class Task:
    """One simulation: a scenario file, the seed (Philly: the jitter), a policy."""

    scenario: str
    seed: int
    policy: str
    path: str
    philly: bool
    max_jobs: int | None
    weight: float  # expected cost, to start the longest first


Outcome = tuple[Task, dict[str, Any] | None, str | None]  # the task, its figures or its error


@dataclass
class SuiteResult:
    meta: dict[str, Any]
    table: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"suite": self.meta, "table": self.table, "checks": self.checks,
                "summary": summarize(self.checks), "errors": self.errors}


# ---------------------------------------------------------------------------------------- the seeds


def jitter(scenario: Scenario, seed: int, spread_s: float = PHILLY_JITTER_S) -> Scenario:
    """Philly under seed `seed`: seed 0 unchanged; otherwise every submit time plus a uniform
    [0, spread_s) jitter drawn in trace order (deterministic), the jobs re-sorted by submit time."""
    if seed == 0:
        return scenario
    rng = random.Random(f"philly/{seed}")
    jobs = [dataclasses.replace(j, submit_s=round(j.submit_s + rng.random() * spread_s, 3))
            for j in scenario.jobs]
    jobs.sort(key=lambda j: (j.submit_s, j.line))
    return dataclasses.replace(scenario, jobs=tuple(jobs))


def _contents(*paths: str | Path) -> str:
    """A digest of the files' bytes (a missing file: its name only, the load then says what is wrong)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p).encode() + b"\0")
        try:
            h.update(Path(p).read_bytes())
        except OSError:
            h.update(b"\0missing")
    return h.hexdigest()


_LOADED: dict[tuple[str, int | None], tuple[str, Scenario]] = {}
_LOADED_MAX = 4


def _load(path: str, max_jobs: int | None) -> Scenario:
    """The scenario at `path`, loaded once per process for every policy run on it while its YAML and trace
    keep their contents: a file rewritten since (the same name, another scenario) is read again. Keyed by path
    alone, a process that ran the suite or a task on a path before ran every later one on the earlier file."""
    key = (path, max_jobs)
    hit = _LOADED.get(key)
    if hit is not None and hit[0] == _contents(path, hit[1].trace_path):
        return hit[1]
    scenario = load_scenario(path, {"max_jobs": str(max_jobs)} if max_jobs else {})
    _LOADED.pop(key, None)
    while len(_LOADED) >= _LOADED_MAX:
        del _LOADED[next(iter(_LOADED))]
    _LOADED[key] = (_contents(path, scenario.trace_path), scenario)
    return scenario


def run_task(task: Task) -> Outcome:
    """Process-pool entry point: (task, figures, None) or (task, None, the error's one line)."""
    from steward.sim.run import simulate

    try:
        scenario = _load(task.path, task.max_jobs)
        if task.philly:
            scenario = jitter(scenario, task.seed)
        return task, simulate(scenario, task.policy).to_json(), None
    except SimError as exc:
        return task, None, exc.message


# ------------------------------------------------------------------------------------------ the plan


def resolve_policies(names: str | None) -> tuple[str, ...]:
    """`a,b` -> canonical names; None -> every policy the simulator has (read at call time)."""
    from steward.sim import policies

    if not names:
        return tuple(policies.POLICIES)
    out = tuple(dict.fromkeys(policies.canonical(n) for n in names.split(",") if n.strip()))
    if not out:
        raise SimError("--policies: name at least one policy")
    return out


def select(names: str | None) -> tuple[SuiteScenario, ...] | None:
    """`--scenarios a,b`: those entries of the suite (`philly` included); None: the whole suite."""
    if not names:
        return None
    known = {e.name: e for e in (PHILLY_ENTRY, *GENERATED)}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise SimError(f"--scenarios: unknown scenario {unknown[0] if unknown else names!r} "
                       f"(one of {', '.join(known)})")
    return tuple(known[n] for n in dict.fromkeys(wanted))


def plan(
    work_dir: Path,
    policies: Sequence[str],
    seeds: int,
    quick: bool,
    scenarios: Sequence[SuiteScenario] | None = None,
    philly: Path | None = PHILLY,
) -> tuple[list[Task], list[dict[str, Any]], list[str]]:
    """Write the generated scenarios into `work_dir` and list the simulations; returns the tasks,
    what each scenario is, and notes (Philly missing)."""
    if seeds < 1:
        raise SimError(f"--seeds must be >= 1, got {seeds}")
    entries = list(GENERATED if scenarios is None else scenarios)
    tasks: list[Task] = []
    info: list[dict[str, Any]] = []
    notes: list[str] = []
    routing = [p for p in policies if p in ROUTING]
    one_cluster = [p for p in policies if p not in ROUTING]  # the routing baselines are steward on one cluster
    if routing and any(e.family not in MULTI_CLUSTER_FAMILIES for e in entries):
        notes.append(f"{', '.join(routing)}: on the scenarios of several clusters only (on one cluster each "
                     "is steward exactly, ADR 0066)")
    if philly is not None and (scenarios is None or PHILLY_ENTRY in entries):
        entries = [e for e in entries if e.family is not None]
        if philly.is_file():
            max_jobs = PHILLY_QUICK_JOBS if quick else None
            sc = _load(str(philly), max_jobs)
            info.append({"scenario": PHILLY_ENTRY.name, "family": "philly", "source": str(philly),
                         "nodes": len(sc.nodes), "gpus": sc.capacity, "jobs": len(sc.jobs),
                         "span_days": round(max(j.submit_s for j in sc.jobs) / DAY_S, 3),
                         "load": round(offered_load(sc), 4),
                         "seed_varies": f"submit-time jitter in [0, {PHILLY_JITTER_S:g}) s (seed 0: none)"})
            for seed in range(seeds):
                tasks += [Task(PHILLY_ENTRY.name, seed, p, str(philly), True, max_jobs, float(len(sc.jobs)) * 4)
                          for p in one_cluster]
        else:
            notes.append(f"philly: {philly} not found; the suite runs without it")
    for entry in entries:
        if entry.family is None:
            continue
        summaries = []
        mine = policies if entry.family in MULTI_CLUSTER_FAMILIES else one_cluster
        for seed in range(seeds):
            g = generate(entry.family, seed, entry.values(quick))
            # a folder per suite entry: two entries of one family, size and load (the heavy
            # variant) generate the same file names, and the later one overwrote the earlier
            path = g.write(work_dir / "scenarios" / entry.name)
            summaries.append(g.summary())
            tasks += [Task(entry.name, seed, p, str(path), False, None, float(g.jobs)) for p in mine]
        info.append({
            "scenario": entry.name, "family": entry.family, "nodes": entry.nodes, "gpus": entry.nodes * 8,
            "jobs": round(statistics.fmean(s["jobs"] for s in summaries), 1),
            "span_days": round(statistics.fmean(s["span_days"] for s in summaries), 3),
            "load": round(statistics.fmean(s["load"] for s in summaries), 4),
            "seed_varies": "the workload (jobs, arrivals, shares)",
        })
    return tasks, info, notes


def execute(tasks: Sequence[Task], workers: int,
            progress: Callable[[Outcome, int, int], None] | None = None) -> list[Outcome]:
    """Run every task in `workers` processes when > 1: seed by seed (so a run cut short still has
    every scenario under its first seeds), the most expensive first within a seed. `progress` sees
    each outcome as it completes."""
    order = sorted(tasks, key=lambda t: (t.seed, -t.weight))
    out: list[Outcome] = []
    if workers <= 1:
        for t in order:
            out.append(run_task(t))
            if progress:
                progress(out[-1], len(out), len(order))
        return out
    with process_pool(workers) as pool:
        futures = [pool.submit(run_task, t) for t in order]
        for fut in as_completed(futures):
            out.append(fut.result())
            if progress:
                progress(out[-1], len(out), len(order))
    rank = {t: i for i, t in enumerate(order)}  # tasks are frozen (hashable) and each is unique
    out.sort(key=lambda o: rank[o[0]])
    return out


# ----------------------------------------------------------------------------------------- the table


def flatten(figures: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric figures of one run, nested mappings as dotted keys (`wait_p90_s.debug`);
    None, strings and booleans are left out."""
    out: dict[str, float] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)
    return out


def aggregate(runs: Iterable[tuple[str, str, int, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """(scenario, policy, seed, figures) rows -> per scenario × policy: for every numeric figure its
    mean, min and max over the seeds that report it (`n`)."""
    groups: dict[tuple[str, str], list[tuple[int, dict[str, float]]]] = {}
    for scenario, policy, seed, figures in runs:
        groups.setdefault((scenario, policy), []).append((seed, flatten(figures)))
    table = []
    for (scenario, policy), rows in groups.items():
        rows.sort(key=lambda r: r[0])
        keys: dict[str, None] = {}
        for _, flat in rows:
            keys.update(dict.fromkeys(flat))
        figs: dict[str, dict[str, float | int]] = {}
        for k in keys:
            vals = [flat[k] for _, flat in rows if k in flat]
            figs[k] = {"mean": round(statistics.fmean(vals), 6), "min": min(vals), "max": max(vals), "n": len(vals)}
        table.append({"scenario": scenario, "policy": policy, "seeds": [s for s, _ in rows], "figures": figs})
    return table


# ---------------------------------------------------------------------------------------- the checks


def _fig(row: Mapping[str, Any] | None, key: str) -> Mapping[str, float] | None:
    if row is None:
        return None
    figs: Mapping[str, Mapping[str, float]] = row["figures"]
    return figs.get(key)


def _crit(name: str, status: str, subject: float | None, bound: float | None, detail: str) -> dict[str, Any]:
    return {"criterion": name, "status": status,
            "steward": None if subject is None else round(subject, 6),
            "bound": None if bound is None else round(bound, 6), "detail": detail}


def check_owed_min(me: Mapping[str, Any] | None, baselines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """owed_delivered_min ≥ every baseline's, outside the seeds' spread: it fails against a baseline
    only when steward's mean is below that baseline's mean *and* steward's best seed is below the
    baseline's worst seed (the ranges over the seeds do not overlap)."""
    name = "owed_delivered_min >= every baseline"
    mine = _fig(me, "owed_delivered_min")
    theirs = {b: f for b, row in baselines.items() if (f := _fig(row, "owed_delivered_min")) is not None}
    if mine is None or not theirs:
        return _crit(name, NA, None, None, "no owed figure (steward or every baseline)")
    best = max(theirs, key=lambda b: theirs[b]["mean"])
    below = [b for b, f in theirs.items() if mine["mean"] < f["mean"]]
    beaten = [b for b in below if mine["max"] < theirs[b]["min"]]
    if beaten:
        return _crit(name, FAIL, mine["mean"], theirs[beaten[0]]["mean"],
                     "below " + ", ".join(f"{b} ({theirs[b]['mean']:.4f}, min {theirs[b]['min']:.4f})" for b in beaten)
                     + f"; steward max {mine['max']:.4f}")
    if below:
        return _crit(name, PASS, mine["mean"], theirs[best]["mean"],
                     WITHIN_SPREAD + ", ".join(f"{b} ({theirs[b]['mean']:.4f})" for b in below))
    return _crit(name, PASS, mine["mean"], theirs[best]["mean"], f"best baseline {best}")


def check_occupancy(me: Mapping[str, Any] | None, baselines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """occupancy ≥ the best baseline's − 0.005 (means over the seeds)."""
    name = "occupancy >= best baseline - 0.005"
    mine = _fig(me, "occupancy")
    theirs = {b: f for b, row in baselines.items() if (f := _fig(row, "occupancy")) is not None}
    if mine is None or not theirs:
        return _crit(name, NA, None, None, "no occupancy (steward or every baseline)")
    best = max(theirs, key=lambda b: theirs[b]["mean"])
    bound = theirs[best]["mean"] - 0.005
    return _crit(name, PASS if mine["mean"] >= bound else FAIL, mine["mean"], bound, f"best baseline {best}")


def check_lost(me: Mapping[str, Any] | None, ref: Mapping[str, Any] | None) -> dict[str, Any]:
    """lost_gpu_hours_fraction ≤ max(1 %, 1.5 × ai2's) (means)."""
    name = f"lost_gpu_hours_fraction <= max(0.01, 1.5x {REFERENCE})"
    mine, theirs = _fig(me, "lost_gpu_hours_fraction"), _fig(ref, "lost_gpu_hours_fraction")
    if mine is None or theirs is None:
        return _crit(name, NA, None, None, f"needs steward and {REFERENCE} in the run")
    bound = max(0.01, 1.5 * theirs["mean"])
    return _crit(name, PASS if mine["mean"] <= bound else FAIL, mine["mean"], bound,
                 f"{REFERENCE} {theirs['mean']:.5f}")


def check_preemptions(me: Mapping[str, Any] | None, ref: Mapping[str, Any] | None) -> dict[str, Any]:
    """preemptions ≤ 2 × ai2's (means)."""
    name = f"preemptions <= 2x {REFERENCE}"
    mine, theirs = _fig(me, "preemptions"), _fig(ref, "preemptions")
    if mine is None or theirs is None:
        return _crit(name, NA, None, None, f"needs steward and {REFERENCE} in the run")
    bound = 2.0 * theirs["mean"]
    ratio = f"{mine['mean'] / theirs['mean']:.2f}x" if theirs["mean"] > 0 else "ai2 made none"
    return _crit(name, PASS if mine["mean"] <= bound else FAIL, mine["mean"], bound,
                 f"{REFERENCE} {theirs['mean']:.1f}; steward {ratio}")


def check_debug_slo(me: Mapping[str, Any] | None, load: float | None) -> dict[str, Any]:
    """Qualified debug time-to-first-GPU p90 ≤ 30 s where the cluster is full (offered load ≥ 1);
    the mean over the seeds of `wait_p90_s.debug_qualified`; n/a when the figure is not reported or
    the scenario's load is below its supply."""
    name = f"wait_p90_s.debug_qualified <= {DEBUG_SLO_S:g} s (full cluster)"
    mine = _fig(me, "wait_p90_s.debug_qualified")
    if mine is None:
        return _crit(name, NA, None, DEBUG_SLO_S, "figure wait_p90_s.debug_qualified not reported")
    if load is None or load < FULL_LOAD:
        return _crit(name, NA, mine["mean"], DEBUG_SLO_S, f"offered load {load or 0:.2f} < {FULL_LOAD:g}: not full")
    return _crit(name, PASS if mine["mean"] <= DEBUG_SLO_S else FAIL, mine["mean"], DEBUG_SLO_S,
                 f"max over seeds {mine['max']:.1f} s")


def check_protection(me: Mapping[str, Any] | None) -> dict[str, Any]:
    """protection_violations == 0 on every seed."""
    name = "protection_violations == 0"
    mine = _fig(me, "protection_violations")
    if mine is None:
        return _crit(name, NA, None, 0.0, "not reported")
    return _crit(name, PASS if mine["max"] == 0 else FAIL, mine["max"], 0.0, "max over seeds")


def check_completes(me: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every seed runs to the end: none stopped at the storm cut-off (`sim.max_cycles_per_job`)."""
    name = "runs to the end (no storm cut-off)"
    if me is None:
        return _crit(name, NA, None, None, "not in the run")
    cut = _fig(me, CUT_OFF)
    if cut is None:
        return _crit(name, PASS, None, None, "every seed ran to the end")
    return _crit(name, FAIL, cut["max"], None, f"{int(cut['n'])} seed(s) stopped at cycle {int(cut['min'])}"
                 + ("" if cut["min"] == cut["max"] else f"-{int(cut['max'])}"))


def cut_off_policies(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The policies of these rows of which a seed stopped at the storm cut-off."""
    return sorted(r["policy"] for r in rows if _fig(r, CUT_OFF) is not None)


def check_scenario(scenario: str, rows: Sequence[Mapping[str, Any]], load: float | None) -> dict[str, Any]:
    """The issue's criteria for steward against the baselines (every other policy in the run). A
    baseline of which a seed stopped at the storm cut-off is left out of the comparisons: its figures
    end mid-trace (docs/results.md "The tiresias baseline"); the block names it."""
    by_policy = {r["policy"]: r for r in rows if r["scenario"] == scenario}
    cut = cut_off_policies(by_policy.values())
    me = by_policy.get(SUBJECT)
    baselines = {p: r for p, r in by_policy.items() if p != SUBJECT and p not in cut}
    ref = baselines.get(REFERENCE)
    criteria = [
        check_owed_min(me, baselines),
        check_occupancy(me, baselines),
        check_lost(me, ref),
        check_preemptions(me, ref),
        check_debug_slo(me, load),
        check_protection(me),
        check_completes(me),
    ]
    if me is None:
        criteria = [{**c, "status": NA, "detail": f"{SUBJECT} not in the run"} for c in criteria]
    return {"scenario": scenario, "load": load, "criteria": criteria,
            "left_out": [p for p in cut if p != SUBJECT]}


def summarize(checks: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per criterion: how many scenarios pass, fail, n/a, and which fail."""
    out: dict[str, dict[str, Any]] = {}
    for block in checks:
        for c in block["criteria"]:
            s = out.setdefault(c["criterion"], {PASS: 0, FAIL: 0, NA: 0, "failing": []})
            s[c["status"]] += 1
            if c["status"] == FAIL:
                s["failing"].append(block["scenario"])
    return out


# ------------------------------------------------------------------------------------------- running


def run_suite(
    policies: Sequence[str] | None = None,
    seeds: int = 3,
    quick: bool = False,
    workers: int = 1,
    out_dir: str | Path | None = None,
    scenarios: Sequence[SuiteScenario] | None = None,
    philly: Path | None = PHILLY,
    progress: Callable[[Task, int, int], None] | None = None,
) -> SuiteResult:
    """Generate, simulate and tabulate the suite (see the module docstring). `scenarios` None: Philly
    and `GENERATED`; `philly` None: leave Philly out. Writes the tables into `out_dir` when given."""
    names = tuple(policies) if policies else resolve_policies(None)
    workers = worker_count(workers)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="steward-suite-") as tmp:
        work = out_folder(out_dir) if out_dir is not None else Path(tmp)
        tasks, info, notes = plan(work, names, seeds, quick, scenarios, philly)
        if not tasks:
            raise SimError("the suite has no scenario to run")
        meta = {"policies": list(names), "seeds": seeds, "quick": quick, "workers": workers,
                "runs": len(tasks), "scenarios": info, "notes": notes}
        done: list[Outcome] = []

        def step(outcome: Outcome, k: int, n: int) -> None:
            done.append(outcome)
            if out_dir is not None:  # the tables so far: a run cut short still leaves what it measured
                write_tables(tabulate(done, {**meta, "runs_done": k, "wall_s": round(time.perf_counter() - t0, 1)},
                                      names, info), Path(out_dir))
            if progress:
                progress(outcome[0], k, n)

        results = execute(tasks, workers, step)
    result = tabulate(results, {**meta, "runs_done": len(results), "wall_s": round(time.perf_counter() - t0, 1)},
                      names, info)
    if out_dir is not None:
        write_tables(result, Path(out_dir))
    return result


def tabulate(results: Sequence[Outcome], meta: dict[str, Any], names: Sequence[str],
             info: Sequence[Mapping[str, Any]]) -> SuiteResult:
    """The table and the checks of the outcomes so far."""
    runs = [(t.scenario, t.policy, t.seed, figs) for t, figs, _ in results if figs is not None]
    errors = [{"scenario": t.scenario, "policy": t.policy, "seed": t.seed, "error": err}
              for t, _, err in results if err is not None]
    order = {e["scenario"]: i for i, e in enumerate(info)}
    pol_order = {p: i for i, p in enumerate(names)}
    table = sorted(aggregate(runs), key=lambda r: (order.get(r["scenario"], 1 << 30), pol_order.get(r["policy"], 99)))
    loads = {e["scenario"]: e["load"] for e in info}
    checks = [check_scenario(e["scenario"], table, loads.get(e["scenario"])) for e in info]
    return SuiteResult(meta, table, checks, errors)


# ------------------------------------------------------------------------------------------- writing


def figure_keys(table: Sequence[Mapping[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for row in table:
        keys.update(dict.fromkeys(row["figures"]))
    return list(keys)


def _num(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e12:
        return str(int(x))
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 1 else f"{x:.4f}"


def cell(f: Mapping[str, float] | None) -> str:
    """`mean [min, max]` (just the mean when every seed agrees)."""
    if f is None:
        return ""
    if f["min"] == f["max"]:
        return _num(f["mean"])
    return f"{_num(f['mean'])} [{_num(f['min'])}, {_num(f['max'])}]"


def csv_text(table: Sequence[Mapping[str, Any]]) -> str:
    keys = figure_keys(table)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scenario", "policy", "seeds", *(f"{k}_{s}" for k in keys for s in ("mean", "min", "max"))])
    for row in table:
        figs = row["figures"]
        w.writerow([row["scenario"], row["policy"], len(row["seeds"]),
                    *(figs[k][s] if k in figs else "" for k in keys for s in ("mean", "min", "max"))])
    return buf.getvalue()


def markdown(result: SuiteResult) -> str:
    """The table (`mean [min, max]` over the seeds) and the checks, as markdown."""
    table, keys = result.table, figure_keys(result.table)
    lines = ["| scenario | policy | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for row in table:
        lines.append(f"| {row['scenario']} | {row['policy']} | "
                     + " | ".join(cell(row["figures"].get(k)) for k in keys) + " |")
    crit_names = [c["criterion"] for c in result.checks[0]["criteria"]] if result.checks else []
    lines += ["", "Checks for steward (pass / fail / n/a; steward's value vs the bound; \"in spread\": below a "
              "baseline's mean but within the seeds' spread):", "",
              "| scenario | load | " + " | ".join(crit_names) + " |", "|---|---|" + "---|" * len(crit_names)]
    for block in result.checks:
        cells = []
        for c in block["criteria"]:
            v = "" if c["steward"] is None else f" {_num(c['steward'])}"
            b = "" if c["bound"] is None or (c["status"] == NA and c["steward"] is None) else f" vs {_num(c['bound'])}"
            within = " (in spread)" if c["status"] == PASS and c["detail"].startswith(WITHIN_SPREAD) else ""
            cells.append(f"{c['status']}{within}{v}{b}")
        load = "" if block["load"] is None else f"{block['load']:.2f}"
        lines.append(f"| {block['scenario']} | {load} | " + " | ".join(cells) + " |")
    left = [f"{b['scenario']} ({', '.join(b['left_out'])})" for b in result.checks if b.get("left_out")]
    if left:
        lines += ["", "Baselines left out of a scenario's checks (a seed stopped at the storm cut-off, "
                  "`sim.max_cycles_per_job`): " + "; ".join(left) + "."]
    return "\n".join(lines) + "\n"


def write_tables(result: SuiteResult, out: Path) -> None:
    import json

    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.csv").write_text(csv_text(result.table), encoding="utf-8")
    (out / "suite.md").write_text(markdown(result), encoding="utf-8")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scenario", "load", "criterion", "status", "steward", "bound", "detail"])
    for block in result.checks:
        for c in block["criteria"]:
            w.writerow([block["scenario"], block["load"], c["criterion"], c["status"],
                        "" if c["steward"] is None else c["steward"], "" if c["bound"] is None else c["bound"],
                        c["detail"]])
    (out / "checks.csv").write_text(buf.getvalue(), encoding="utf-8")
    (out / "suite.json").write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
