"""Generated scenarios: named, seeded families of workloads unlike Philly (issue 18).

A family is a small function from its parameters (a frozen dataclass) to a `Mix`: who submits, how
big and how long the jobs are, which class they are, how they arrive. One sampler (`sample`) turns a
mix and a seed into jobs, with `random.Random(seed)` only, so the same family, seed and parameters
give byte-identical files. The output is the format of ../shared/data/scenarios/README.md: a scenario
YAML (cluster, policy, tree, metrics) and its trace CSV.

Rules every family shares (those of make_philly.py, so a generated trace reads like Philly's):
- debug jobs use at most 2 GPUs and run at most 15 min; they ask their whole duration as protection
  and are not resumable;
- batch jobs ask min(duration, 1 h) as protection, except a family-set fraction that asks 0 (runs
  unfunded by choice); they are resumable;
- interactive sessions (1-4 GPUs, at most the session cap of 8 h) ask their duration; resumable
  (a session is checkpointed when stopped);
- tenants absent from the tree have no allocation: their jobs run unfunded whatever they ask.

Load is computed honestly: the jobs are drawn first, then the arrival window is set so that the
total requested GPU-seconds ÷ (capacity × window) equals the family's `load`, and the last arrival
falls at the window's end (`offered_load` recomputes it from any scenario). Jobs are drawn until the
window reaches `days` of arrivals, within a job count that grows with the cluster (`job_bounds`), or
exactly `jobs` when given; a family of small jobs on a large cluster therefore gets a shorter window.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from steward.domain.clusters import largest_gang
from steward.sim.errors import SimError, out_folder
from steward.sim.scenario import Scenario

DAY_S = 86400.0
GPUS_PER_NODE = 8
NODES_PER_BLOCK = 8  # philly.yaml's topology: blocks of 8 nodes (64 GPUs)
DEBUG_MAX_S = 900.0  # make_philly.py: debug is <= 2 GPUs and <= 15 min
DEBUG_MAX_GPUS = 2
BATCH_PROTECTION_S = 3600.0  # make_philly.py: batch asks min(duration, 1 h)
SESSION_CAP_S = 8 * 3600.0
MIN_DURATION_S = 30.0
DOMINANT_GROUP_SHARE = 0.5  # dominant-tenant: the dominant tenant's group holds half the cluster
BURST_WINDOW_S = 120.0  # the jobs of one burst arrive within two minutes
CLI_FLAGS = frozenset({"nodes", "load", "jobs", "days"})  # parameters with their own flag in the CLI
HEADER = ("job_id", "submit_s", "duration_s", "gpus", "tenant", "class", "min_runtime_s", "resumable")

# the scenario's policy section: philly.yaml's
POLICY_SECTION: dict[str, float] = {
    "window_days": 7,
    "max_min_runtime_s": 28800,
    "session_cap_s": 28800,
    "checkpoint_interval_s": 1800,
    "restart_overhead_s": 60,
    "preemption_grace_s": 120,
}


class GenerateError(SimError):
    """A family name or a parameter the generator cannot use; the message names it."""


# ------------------------------------------------------------------------------------------ the mix


@dataclass(frozen=True)
class LogNormal:
    """Durations: a log-normal with this median (s) and shape, clipped to [lo, hi]."""

    median_s: float
    sigma: float
    lo: float = MIN_DURATION_S
    hi: float = 3 * DAY_S

    def draw(self, rng: random.Random) -> float:
        return min(self.hi, max(self.lo, self.median_s * math.exp(rng.gauss(0.0, self.sigma))))


@dataclass(frozen=True)
class Pareto:
    """Durations: a Pareto with scale `xm_s` and tail index `alpha` (alpha near 1: a few jobs hold
    most of the GPU-time), clipped to `hi`."""

    xm_s: float
    alpha: float
    hi: float = 7 * DAY_S

    def draw(self, rng: random.Random) -> float:
        return min(self.hi, self.xm_s * rng.paretovariate(self.alpha))


Durations = LogNormal | Pareto


@dataclass(frozen=True)
class Tenant:
    """A submitter: its weight among submissions and its group in the tree (None: not in the tree);
    `debug`, when set, is its own fraction of debug units (else the mix's)."""

    name: str
    weight: float
    group: str | None
    debug: float | None = None


@dataclass(frozen=True)
class Mix:
    """What a family means, in distributions. Fractions are of arrival units (a job or a burst)."""

    tenants: tuple[Tenant, ...]
    debug: float  # fraction of units that are debug jobs
    interactive: float  # fraction of units that are sessions
    batch_gpus: tuple[tuple[int, float], ...]  # (GPUs, weight); gangs larger than the cluster are dropped
    batch_durations: Durations
    unfunded: float  # fraction of batch jobs that ask min_runtime 0
    burst: float = 0.0  # fraction of units that are bursts (a sweep or a debug storm from one tenant)
    burst_size: tuple[int, int] = (20, 60)
    diurnal: float = 0.5  # amplitude of the daily cycle (0: flat); weekends carry 60 % of a weekday
    debug_gpus: tuple[tuple[int, float], ...] = ((1, 0.8), (2, 0.2))
    debug_durations: Durations = LogNormal(180.0, 0.8, hi=DEBUG_MAX_S)
    session_gpus: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.3), (4, 0.1))
    session_durations: Durations = LogNormal(5400.0, 0.7, lo=600.0, hi=SESSION_CAP_S)
    group_shares: Mapping[str, float] = field(default_factory=dict)  # fixed shares of groups (else drawn)
    tenant_shares: Mapping[str, float] = field(default_factory=dict)  # fixed shares of tenants in a group
    max_gpus: int | None = None  # the largest job (None: the whole cluster; several clusters: one of them)


# ------------------------------------------------------------------------------ family parameters


@dataclass(frozen=True)
class Size:
    """What every family takes: the cluster (8 GPUs a node), the offered load, the job count."""

    nodes: int = 16
    load: float = 1.5
    jobs: int | None = None  # None: as many as `days` of arrivals need, within job_bounds(nodes)
    days: float = 10.0
    tenants: int = 8


@dataclass(frozen=True)
class ShortJobs(Size):
    one_gpu: float = 0.85
    median_s: float = 1200.0
    sigma: float = 2.0
    debug: float = 0.30
    interactive: float = 0.05
    unfunded: float = 0.15


@dataclass(frozen=True)
class GangHeavy(Size):
    gang: float = 0.6  # fraction of batch jobs that are gangs of 8 GPUs or more
    median_s: float = 4 * 3600.0
    sigma: float = 1.2
    debug: float = 0.05
    unfunded: float = 0.10


@dataclass(frozen=True)
class DebugHeavy(Size):
    debug: float = 0.55
    interactive: float = 0.10
    median_s: float = 4 * 3600.0
    sigma: float = 1.4
    unfunded: float = 0.15


@dataclass(frozen=True)
class Bursty(Size):
    burst: float = 0.04  # 4 % of arrival units are bursts of 20-80 jobs from one tenant
    burst_min: int = 20
    burst_max: int = 80
    diurnal: float = 0.9
    debug: float = 0.25
    median_s: float = 3600.0
    sigma: float = 1.8
    unfunded: float = 0.15


@dataclass(frozen=True)
class DominantTenant(Size):
    dominant: float = 0.70  # the dominant tenant's fraction of submissions
    dominant_share: float = 0.25  # its share of the cluster (at most DOMINANT_GROUP_SHARE)
    debug: float = 0.20
    median_s: float = 2 * 3600.0
    sigma: float = 1.6
    unfunded: float = 0.15


@dataclass(frozen=True)
class UnfundedMany(Size):
    guests: int = 6  # tenants absent from the tree
    guest_weight: float = 0.35  # their fraction of submissions
    unfunded: float = 0.30  # fraction of funded tenants' batch jobs that ask min_runtime 0
    debug: float = 0.20
    median_s: float = 2 * 3600.0
    sigma: float = 1.6


@dataclass(frozen=True)
class UnfundedDebug(Size):
    nodes: int = 6
    guests: int = 2  # tenants absent from the tree
    guest_weight: float = 0.15  # their fraction of submissions
    guest_debug: float = 0.6  # the fraction of their submissions that is debug work
    one_gpu: float = 0.85
    median_s: float = 1200.0
    sigma: float = 2.0
    debug: float = 0.30  # the funded tenants' debug fraction
    interactive: float = 0.05
    unfunded: float = 0.15


@dataclass(frozen=True)
class TwoClusters(Size):
    """Two clusters and three GPU models under one tree (issue 25, ADR 0057): `ceres` holds half the
    nodes (H100), `jupiter` the other half (A100, then V100)."""

    models_asked: float = 0.35  # fraction of batch jobs that name the GPU models they accept
    cluster_asked: float = 0.10  # fraction of batch jobs pinned to one cluster
    median_s: float = 2 * 3600.0
    sigma: float = 1.5
    debug: float = 0.20
    interactive: float = 0.03
    unfunded: float = 0.15


@dataclass(frozen=True)
class HeavyTail(Size):
    xm_s: float = 1500.0  # median 2^(1/alpha) x xm = 1 h
    alpha: float = 0.8
    max_days: float = 7.0
    debug: float = 0.20
    unfunded: float = 0.15


# ---------------------------------------------------------------------------------------- families


def _zipf_tenants(count: int, groups: int, rng: random.Random, prefix: str = "t") -> tuple[Tenant, ...]:
    """`count` tenants in `groups` groups with log-normal submission weights (a few busy projects,
    many quiet ones, as in every shared cluster's trace)."""
    names = [f"{prefix}{i + 1:02d}" for i in range(count)]
    return tuple(
        Tenant(name=n, weight=round(math.exp(rng.gauss(0.0, 1.0)), 4), group=f"g{i % groups + 1}")
        for i, n in enumerate(names)
    )


def _gpu_table(one: float, rest: Sequence[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    """1 GPU with weight `one`, the others splitting `1 - one` by their weights."""
    total = sum(w for _, w in rest) or 1.0
    return ((1, one), *((g, (1.0 - one) * w / total) for g, w in rest))


def short_jobs(p: ShortJobs, rng: random.Random) -> Mix:
    """Mostly 1-GPU short jobs: a production cluster of many small training and inference-tuning
    pods (Alibaba PAI, Helios' Earth/Venus): half the jobs under ~10 min, a long tail; ~30 % debug."""
    return Mix(
        tenants=_zipf_tenants(p.tenants, 2, rng),
        debug=p.debug, interactive=p.interactive,
        batch_gpus=_gpu_table(p.one_gpu, ((2, 0.5), (4, 0.3), (8, 0.2))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
    )


def gang_heavy(p: GangHeavy, rng: random.Random) -> Mix:
    """Gang-heavy: distributed training (Philly's multi-node jobs, the workloads of Pollux and Sia):
    most GPU-time in gangs of 8-64 GPUs that must start all at once, hours long."""
    gangs = ((8, 0.40), (16, 0.30), (32, 0.20), (64, 0.10))
    small = ((1, 0.5), (2, 0.25), (4, 0.25))
    table = tuple((g, (1.0 - p.gang) * w) for g, w in small) + tuple((g, p.gang * w) for g, w in gangs)
    return Mix(
        tenants=_zipf_tenants(p.tenants, 3, rng),
        debug=p.debug, interactive=0.0,
        batch_gpus=table,
        batch_durations=LogNormal(p.median_s, p.sigma, lo=600.0),
        unfunded=p.unfunded,
    )


def debug_heavy(p: DebugHeavy, rng: random.Random) -> Mix:
    """A high debug share: a research lab before a deadline, where most submissions are short
    debug runs and notebooks (sessions) beside fewer, longer training jobs."""
    return Mix(
        tenants=_zipf_tenants(p.tenants, 2, rng),
        debug=p.debug, interactive=p.interactive,
        batch_gpus=_gpu_table(0.55, ((2, 0.3), (4, 0.3), (8, 0.3), (16, 0.1))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
    )


def bursty(p: Bursty, rng: random.Random) -> Mix:
    """Bursty arrivals: hyper-parameter sweeps and debug storms (issue 4: Philly's slow debug waits
    are bursts of ~50 jobs from one project) on a strong day/night cycle."""
    return Mix(
        tenants=_zipf_tenants(p.tenants, 2, rng),
        debug=p.debug, interactive=0.03,
        batch_gpus=_gpu_table(0.75, ((2, 0.4), (4, 0.4), (8, 0.2))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
        burst=p.burst, burst_size=(p.burst_min, p.burst_max), diurnal=p.diurnal,
    )


def dominant_tenant(p: DominantTenant, rng: random.Random) -> Mix:
    """One dominant tenant: one project submits most of the work on a minority share (Philly's
    6214e9 submits half the jobs), so every other project's owed share depends on taking it back."""
    others = _zipf_tenants(max(1, p.tenants - 1), 2, rng)
    rest = sum(t.weight for t in others)
    scale = (1.0 - p.dominant) / rest if rest > 0 else 0.0
    tenants = (Tenant("t00", p.dominant, "g1"),
               *(Tenant(t.name, round(t.weight * scale, 6), t.group) for t in others))
    return Mix(
        tenants=tenants,
        debug=p.debug, interactive=0.03,
        batch_gpus=_gpu_table(0.7, ((2, 0.3), (4, 0.3), (8, 0.3), (16, 0.1))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
        group_shares={"g1": DOMINANT_GROUP_SHARE}, tenant_shares={"t00": p.dominant_share},
    )


def _funded_and_guests(tenants: int, guests: int, guest_weight: float, guest_debug: float | None,
                       rng: random.Random) -> tuple[Tenant, ...]:
    """`tenants` funded tenants in two groups (Zipf weights) and `guests` tenants absent from the tree,
    the guests together `guest_weight` of submissions, each with `guest_debug` as its debug fraction."""
    funded = _zipf_tenants(tenants, 2, rng)
    fw = sum(t.weight for t in funded)
    f_scale = (1.0 - guest_weight) / fw if fw > 0 else 0.0
    g_weight = round(guest_weight / max(1, guests), 6)
    return (*(Tenant(t.name, round(t.weight * f_scale, 6), t.group) for t in funded),
            *(Tenant(f"guest{i + 1:02d}", g_weight, None, guest_debug) for i in range(guests)))


def unfunded_many(p: UnfundedMany, rng: random.Random) -> Mix:
    """Many unfunded tenants: a university or consortium cluster where guests without an allocation
    scavenge idle GPUs and funded projects also run opportunistic (min_runtime 0) jobs."""
    return Mix(
        tenants=_funded_and_guests(p.tenants, p.guests, p.guest_weight, None, rng),
        debug=p.debug, interactive=0.02,
        batch_gpus=_gpu_table(0.7, ((2, 0.3), (4, 0.4), (8, 0.3))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
    )


def unfunded_debug(p: UnfundedDebug, rng: random.Random) -> Mix:
    """Unfunded debug on a full cluster of 1-GPU short jobs: the held-out production trace of issue
    18 (mostly 1-GPU pods, short jobs, ~30 % debug, a small cluster at heavy load), where tenants
    with no allocation submit debug work. Such a job is small, short and asks protection, but runs
    unfunded: the loop of ADR 0028 (started ahead of the order, preempted at once, started again)."""
    return Mix(
        tenants=_funded_and_guests(p.tenants, p.guests, p.guest_weight, p.guest_debug, rng),
        debug=p.debug, interactive=p.interactive,
        batch_gpus=_gpu_table(p.one_gpu, ((2, 0.5), (4, 0.3), (8, 0.2))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
    )


def heavy_tail(p: HeavyTail, rng: random.Random) -> Mix:
    """Heavy-tailed durations: Pareto run times (Philly, Helios: a few very long jobs hold much of the
    GPU-time; here the longest 1 % hold ~45 %), so a few jobs hold GPUs for days while half finish
    within the hour."""
    return Mix(
        tenants=_zipf_tenants(p.tenants, 3, rng),
        debug=p.debug, interactive=0.02,
        batch_gpus=_gpu_table(0.7, ((2, 0.3), (4, 0.3), (8, 0.3), (16, 0.1))),
        batch_durations=Pareto(p.xm_s, p.alpha, hi=p.max_days * DAY_S),
        unfunded=p.unfunded,
    )


# two-clusters: the clusters, their models and the weights (budget units per GPU-hour; ADR 0057)
TWO_CLUSTER_WEIGHTS: dict[str, float] = {"H100": 1.0, "A100": 0.55, "V100": 0.25}
MODEL_REQUESTS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H100",), 0.3), (("H100", "A100"), 0.4), (("A100", "V100"), 0.3))


def two_cluster_nodes(nodes: int) -> dict[str, dict[str, Any]]:
    """The `clusters:` section: ceres gets half the nodes (H100, blocks of 8), jupiter the rest, its first
    half A100 and the rest V100 (one block per model)."""
    ceres = nodes // 2
    jupiter = nodes - ceres
    a100 = jupiter // 2
    return {
        "ceres": {"nodes": ceres, "gpus_per_node": GPUS_PER_NODE, "gpu_model": "H100",
                  "topology": {"levels": ["block", "node"], "nodes_per_block": min(NODES_PER_BLOCK, ceres)}},
        "jupiter": {"nodes": [
            {"name": f"node{i:03d}", "gpus": GPUS_PER_NODE, "gpu_model": "A100" if i < a100 else "V100",
             "path": ["a100" if i < a100 else "v100", f"node{i:03d}"]} for i in range(jupiter)]},
    }


def two_clusters(p: TwoClusters, rng: random.Random) -> Mix:
    """Two clusters, three GPU models under one budget tree (issue 25): ceres (H100) and jupiter (A100 and
    V100), weighted 1.0, 0.55 and 0.25 per GPU-hour; a third of the batch jobs name the models they accept
    and a tenth are pinned to one cluster; no job is larger than the smallest model pool it may use."""
    return Mix(
        tenants=_zipf_tenants(p.tenants, 2, rng),
        debug=p.debug, interactive=p.interactive,
        batch_gpus=_gpu_table(0.6, ((2, 0.3), (4, 0.3), (8, 0.25), (16, 0.15))),
        batch_durations=LogNormal(p.median_s, p.sigma),
        unfunded=p.unfunded,
        max_gpus=max(1, (p.nodes - p.nodes // 2) // 2) * GPUS_PER_NODE,  # jupiter's smaller pool (A100)
    )


def _requests(rows: list[Row], p: TwoClusters, rng: random.Random, nodes: dict[str, dict[str, Any]]) -> list[Row]:
    """The two-clusters family's requests (a stream of its own, so the jobs are those of the mix): a batch
    job names models (`models_asked`) or one cluster (`cluster_asked`) only where a placement could hold it."""
    pools: list[tuple[int, str, str]] = []
    ceres = nodes["ceres"]
    pools += [(GPUS_PER_NODE, "H100", "ceres")] * int(ceres["nodes"])
    pools += [(int(n["gpus"]), str(n["gpu_model"]), "jupiter") for n in nodes["jupiter"]["nodes"]]
    out = []
    for r in rows:
        models: tuple[str, ...] = ()
        clusters: tuple[str, ...] = ()
        if r.job_class == "batch":
            u = rng.random()
            if u < p.models_asked:
                models = _pick(rng, MODEL_REQUESTS)
            elif u < p.models_asked + p.cluster_asked:
                clusters = (rng.choice(("ceres", "jupiter")),)
            if largest_gang(pools, models, clusters)[0] < r.gpus:
                models, clusters = (), ()
        out.append(dataclasses.replace(r, gpu_models="|".join(models), clusters="|".join(clusters)))
    return out


@dataclass(frozen=True)
class Family:
    name: str
    build: Callable[[Any, random.Random], Mix]
    params: type[Size]

    @property
    def doc(self) -> str:
        return " ".join((self.build.__doc__ or "").split())


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("short-1gpu", short_jobs, ShortJobs),
    Family("gang-heavy", gang_heavy, GangHeavy),
    Family("debug-heavy", debug_heavy, DebugHeavy),
    Family("bursty", bursty, Bursty),
    Family("dominant-tenant", dominant_tenant, DominantTenant),
    Family("unfunded-many", unfunded_many, UnfundedMany),
    Family("heavy-tail", heavy_tail, HeavyTail),
    Family("unfunded-debug", unfunded_debug, UnfundedDebug),
    Family("two-clusters", two_clusters, TwoClusters),
)}
MULTI_CLUSTER_FAMILIES = frozenset({"two-clusters"})
"""Families of several clusters: in the suite, the only ones the routing baselines run on (ADR 0066)."""


def family(name: str) -> Family:
    f = FAMILIES.get(name.strip().lower())
    if f is None:
        raise GenerateError(f"unknown family {name!r}; one of {', '.join(FAMILIES)}")
    return f


def params_for(name: str, values: Mapping[str, Any] | None = None) -> Size:
    """The family's parameters with `values` applied (typed like the field; bad names and values
    refused with one line)."""
    fam = family(name)
    fields = {f.name: f for f in dataclasses.fields(fam.params)}
    typed: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if key not in fields:
            raise GenerateError(
                f"family {fam.name}: no parameter {key!r} (parameters: {', '.join(sorted(fields))})")
        if value is None:
            continue
        typed[key] = _typed(fam.name, key, fields[key].type, value)
    p = fam.params(**typed)
    _validate(fam.name, p)
    return p


def _typed(fam: str, key: str, declared: Any, value: Any) -> Any:
    kind = str(declared)
    try:
        if "int" in kind and "float" not in kind:
            x = float(value)
            if x != int(x):
                raise ValueError
            return int(x)
        x = float(value)
        if not math.isfinite(x):
            raise ValueError
        return x
    except (TypeError, ValueError):
        raise GenerateError(f"family {fam}: parameter {key} expects a {kind.replace(' | None', '')}, "
                            f"got {value!r}") from None


def _validate(fam: str, p: Size) -> None:
    if not 1 <= p.nodes <= 4096:
        raise GenerateError(f"family {fam}: nodes must be between 1 and 4096, got {p.nodes}")
    if not 0.05 <= p.load <= 20:
        raise GenerateError(f"family {fam}: load must be between 0.05 and 20, got {p.load:g}")
    if p.jobs is not None and not 1 <= p.jobs <= 1_000_000:
        raise GenerateError(f"family {fam}: jobs must be between 1 and 1000000, got {p.jobs}")
    if not 0 < p.days <= 365:
        raise GenerateError(f"family {fam}: days must be in (0, 365], got {p.days:g}")
    if p.tenants < 1:
        raise GenerateError(f"family {fam}: tenants must be >= 1, got {p.tenants}")
    for f in dataclasses.fields(p):
        v = getattr(p, f.name)
        if isinstance(v, int | float) and v < 0:
            raise GenerateError(f"family {fam}: {f.name} must be >= 0, got {v:g}")
    for name in ("debug", "interactive", "unfunded", "one_gpu", "gang", "burst", "dominant", "dominant_share",
                 "guest_weight", "guest_debug", "diurnal"):
        v = getattr(p, name, None)
        if isinstance(v, float) and v > 1:
            raise GenerateError(f"family {fam}: {name} is a fraction in [0, 1], got {v:g}")
    frac = getattr(p, "debug", 0.0) + getattr(p, "interactive", 0.0)
    if frac > 1:
        raise GenerateError(f"family {fam}: debug + interactive is {frac:g} > 1")
    if isinstance(p, DominantTenant) and p.dominant_share > DOMINANT_GROUP_SHARE:
        raise GenerateError(f"family {fam}: dominant_share must be <= {DOMINANT_GROUP_SHARE:g} (its group's share)")
    if isinstance(p, Bursty) and not 1 <= p.burst_min <= p.burst_max:
        raise GenerateError(f"family {fam}: need 1 <= burst_min <= burst_max, got {p.burst_min}..{p.burst_max}")
    if isinstance(p, TwoClusters) and p.nodes < 4:
        raise GenerateError(f"family {fam}: nodes must be >= 4 (H100 on ceres, A100 and V100 on jupiter), "
                            f"got {p.nodes}")
    if isinstance(p, TwoClusters) and (p.models_asked > 1 or p.models_asked + p.cluster_asked > 1):
        raise GenerateError(f"family {fam}: models_asked + cluster_asked is a fraction of batch jobs, at most 1")
    if isinstance(p, HeavyTail) and (p.alpha <= 0 or p.xm_s <= 0 or p.max_days <= 0):
        raise GenerateError(f"family {fam}: alpha, xm_s and max_days must be > 0")
    if isinstance(p, UnfundedDebug) and p.guest_debug + p.interactive > 1:
        raise GenerateError(f"family {fam}: guest_debug + interactive is {p.guest_debug + p.interactive:g} > 1")
    if isinstance(p, UnfundedMany | UnfundedDebug) and p.guests < 1 and p.guest_weight > 0:
        raise GenerateError(f"family {fam}: guest_weight > 0 needs guests >= 1")


def job_bounds(nodes: int) -> tuple[int, int]:
    """How many jobs a scenario of `nodes` nodes gets when `jobs` is not given: enough to be more
    than noise, few enough that a policy runs it in seconds (small clusters get fewer)."""
    hi = min(4000, 300 + 100 * nodes)
    return max(1, hi // 5), hi


# ------------------------------------------------------------------------------------------ sample


@dataclass(frozen=True)
class Row:
    job_id: str
    submit_s: int
    duration_s: int
    gpus: int
    tenant: str
    job_class: str
    min_runtime_s: int
    resumable: int
    gpu_models: str = ""  # "|"-separated (the two-clusters family only)
    clusters: str = ""


@dataclass(frozen=True)
class Generated:
    """A generated scenario: its name, the YAML and CSV texts, and what it is."""

    name: str
    family: str
    seed: int
    params: Size
    yaml_text: str
    csv_text: str
    jobs: int
    span_s: float
    gpu_s: float

    @property
    def capacity(self) -> int:
        return self.params.nodes * GPUS_PER_NODE

    @property
    def load(self) -> float:
        return self.gpu_s / (self.capacity * self.span_s) if self.span_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name, "family": self.family, "seed": self.seed, "nodes": self.params.nodes,
            "gpus": self.capacity, "jobs": self.jobs, "span_days": round(self.span_s / DAY_S, 3),
            "load": round(self.load, 4), "params": dataclasses.asdict(self.params),
        }

    def write(self, out_dir: str | Path) -> Path:
        """Write `<name>.yaml` and `<name>.csv` into `out_dir`; returns the YAML's path."""
        out = out_folder(out_dir)
        (out / f"{self.name}.csv").write_text(self.csv_text, encoding="utf-8")
        path = out / f"{self.name}.yaml"
        path.write_text(self.yaml_text, encoding="utf-8")
        return path


def _pick(rng: random.Random, table: Sequence[tuple[Any, float]]) -> Any:
    total = sum(w for _, w in table)
    x = rng.random() * total
    for value, w in table:
        x -= w
        if x < 0:
            return value
    return table[-1][0]


def _protection(job_class: str, duration: int, rng: random.Random, unfunded: float) -> tuple[int, int]:
    """(min_runtime_s, resumable) by make_philly.py's rules."""
    if job_class == "debug":
        return duration, 0
    if job_class == "interactive":
        return duration, 1
    return (0 if rng.random() < unfunded else int(min(duration, BATCH_PROTECTION_S))), 1


def _body(mix: Mix, job_class: str, rng: random.Random, max_gpus: int) -> tuple[int, int]:
    """(gpus, duration_s) of one job of `job_class`; no gang larger than the cluster."""
    if job_class == "debug":
        return _pick(rng, mix.debug_gpus), max(1, round(mix.debug_durations.draw(rng)))
    if job_class == "interactive":
        return _pick(rng, mix.session_gpus), max(1, round(mix.session_durations.draw(rng)))
    table = tuple((g, w) for g, w in mix.batch_gpus if g <= max_gpus) or ((1, 1.0),)
    return _pick(rng, table), max(1, round(mix.batch_durations.draw(rng)))


def _arrival_density(t: float, diurnal: float) -> float:
    """Relative arrival rate at `t` s after a Monday midnight: a daily cycle peaking at 14:00, and
    weekends at 60 % of a weekday."""
    day = int(t // DAY_S) % 7
    hour = (t % DAY_S) / 3600.0
    daily = 1.0 + diurnal * math.cos(2 * math.pi * (hour - 14.0) / 24.0)
    return daily * (0.6 if day >= 5 else 1.0)


def sample(mix: Mix, p: Size, rng: random.Random) -> tuple[list[Row], float]:
    """Draw the jobs of `mix` (bodies first, then arrival times over a window sized for `p.load`);
    returns the rows sorted by submit time and the window's length in seconds."""
    capacity = p.nodes * GPUS_PER_NODE
    lo, hi = job_bounds(p.nodes) if p.jobs is None else (p.jobs, p.jobs)
    target = p.load * capacity * p.days * DAY_S
    weights = tuple((t, t.weight) for t in mix.tenants if t.weight > 0) or ((mix.tenants[0], 1.0),)
    units: list[list[tuple[str, str, int, int, int, int]]] = []  # per unit: (tenant, class, gpus, dur, min, res)
    n = 0
    gpu_s = 0.0
    while n < hi and (n < lo or gpu_s < target):
        tenant: Tenant = _pick(rng, weights)
        u = rng.random()
        debug = mix.debug if tenant.debug is None else tenant.debug
        job_class = "debug" if u < debug else ("interactive" if u < debug + mix.interactive else "batch")
        size = 1
        if mix.burst > 0 and job_class != "interactive" and rng.random() < mix.burst:
            size = rng.randint(*mix.burst_size)
        size = min(size, hi - n)
        gpus, base = _body(mix, job_class, rng, capacity if mix.max_gpus is None else min(capacity, mix.max_gpus))
        unit = []
        for k in range(size):
            dur = base if k == 0 else max(1, round(base * math.exp(rng.gauss(0.0, 0.3))))
            if job_class == "debug":
                dur = min(dur, int(DEBUG_MAX_S))
            if job_class == "interactive":
                dur = min(dur, int(SESSION_CAP_S))
            min_rt, res = _protection(job_class, dur, rng, mix.unfunded)
            unit.append((tenant.name, job_class, gpus, dur, min_rt, res))
            gpu_s += gpus * dur
        units.append(unit)
        n += size
    span = gpu_s / (capacity * p.load)
    # arrival times: thinning against the daily/weekly density, then scaled so the last one is the end
    top = 1.0 + mix.diurnal
    starts: list[float] = []
    while len(starts) < len(units):
        t = rng.random() * span
        if rng.random() * top <= _arrival_density(t, mix.diurnal):
            starts.append(t)
    starts.sort()
    raw: list[tuple[float, int, tuple[str, str, int, int, int, int]]] = []
    order = 0
    for t0, unit in zip(starts, units, strict=True):
        for k, body in enumerate(unit):
            t = t0 if k == 0 else t0 + rng.random() * BURST_WINDOW_S
            raw.append((t, order, body))
            order += 1
    last = max(t for t, _, _ in raw)
    span = max(1.0, span)  # whole seconds: the last arrival is never at 0
    scale = span / last if last > 0 else 1.0
    raw.sort(key=lambda r: (r[0], r[1]))
    rows = [
        Row(job_id=f"g{i:05d}", submit_s=round(t * scale), duration_s=dur, gpus=gpus, tenant=tenant,
            job_class=cls, min_runtime_s=min_rt, resumable=res)
        for i, (t, _, (tenant, cls, gpus, dur, min_rt, res)) in enumerate(raw)
    ]
    return rows, float(max(r.submit_s for r in rows))


def _shares(rng: random.Random, n: int, fixed: Mapping[int, float] | None = None) -> list[float]:
    """`n` shares in thousandths summing to exactly 1 (drawn, except the `fixed` ones)."""
    fixed = dict(fixed or {})
    rest = max(0, 1000 - sum(round(v * 1000) for v in fixed.values()))
    free = [i for i in range(n) if i not in fixed]
    draws = [0.5 + rng.random() for _ in free]
    total = sum(draws) or 1.0
    parts = [int(rest * d / total) for d in draws]
    if parts:
        parts[0] += rest - sum(parts)
    out = [0] * n
    for i, v in fixed.items():
        out[i] = round(v * 1000)
    for i, part in zip(free, parts, strict=True):
        out[i] = part
    return [x / 1000 for x in out]


def _tree(mix: Mix, rng: random.Random) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for t in mix.tenants:
        if t.group is not None:
            groups.setdefault(t.group, []).append(t.name)
    if not groups:
        raise GenerateError("the family put no tenant in the tree")
    names = sorted(groups)
    group_shares = _shares(rng, len(names), {i: mix.group_shares[g] for i, g in enumerate(names)
                                             if g in mix.group_shares})
    tree: dict[str, Any] = {}
    for g, gshare in zip(names, group_shares, strict=True):
        members = groups[g]
        fixed = {i: mix.tenant_shares[m] / gshare for i, m in enumerate(members)
                 if m in mix.tenant_shares and gshare > 0}
        fixed = {i: min(1.0, v) for i, v in fixed.items()}
        tree[g] = {"share": gshare, "children": dict(zip(members, _shares(rng, len(members), fixed), strict=True))}
    return tree


def large_job_gpus(capacity: int) -> int:
    """The "large" wait class: about a tenth of the cluster, a power of two between 8 and 32
    (philly.yaml: 32 of 320)."""
    x = 8
    while x * 2 <= min(32, capacity // 10):
        x *= 2
    return x


def generate(name: str, seed: int, values: Mapping[str, Any] | None = None) -> Generated:
    """The scenario of family `name` with `seed` and parameter `values` (see `params_for`)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise GenerateError(f"seed must be a whole number >= 0, got {seed!r}")
    fam = family(name)
    p = params_for(fam.name, values)
    rng = random.Random(f"{fam.name}/{seed}")
    mix = fam.build(p, rng)
    tree = _tree(mix, rng)
    rows, span = sample(mix, p, rng)
    gpu_s = float(sum(r.gpus * r.duration_s for r in rows))
    scenario_name = f"{fam.name}-n{p.nodes}-l{p.load:g}-s{seed}"
    capacity = p.nodes * GPUS_PER_NODE
    doc: dict[str, Any] = {
        "name": scenario_name,
        "trace": f"{scenario_name}.csv",
        "cluster": {"nodes": p.nodes, "gpus_per_node": GPUS_PER_NODE, "gpu_model": "V100",
                    "topology": {"levels": ["block", "node"], "nodes_per_block": min(NODES_PER_BLOCK, p.nodes)}},
        "policy": dict(POLICY_SECTION),
        "tree": tree,
        "metrics": {"large_job_gpus": large_job_gpus(capacity), "owed_period_days": 30},
    }
    header: tuple[str, ...] = HEADER
    if isinstance(p, TwoClusters):
        clusters = two_cluster_nodes(p.nodes)
        doc = {"name": doc["name"], "trace": doc["trace"], "clusters": clusters,
               "gpu_models": dict(TWO_CLUSTER_WEIGHTS), **{k: v for k, v in doc.items() if k not in (
                   "name", "trace", "cluster")}}
        rows = _requests(rows, p, random.Random(f"{fam.name}/{seed}/requests"), clusters)
        header = (*HEADER, "gpu_models", "clusters")
    load = gpu_s / (capacity * span) if span > 0 else 0.0
    changed = {k: v for k, v in dataclasses.asdict(p).items() if v != getattr(fam.params(), k)}
    head = (
        f"# Generated by `steward sim generate --family {fam.name} --seed {seed}"
        + "".join(f" --{k} {v:g}" if k in CLI_FLAGS and isinstance(v, int | float) else f" --param {k}={v}"
                  for k, v in changed.items()) + "`.\n"
        f"# {fam.doc}\n"
        f"# {len(rows)} jobs over {span / DAY_S:.2f} days of arrivals on {capacity} GPUs: offered load {load:.3f}\n"
        "# (requested GPU-seconds / (capacity x last arrival)). Tenants absent from the tree run unfunded.\n"
    )
    yaml_text = head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=200)
    lines = [",".join(header)]
    lines += [f"{r.job_id},{r.submit_s},{r.duration_s},{r.gpus},{r.tenant},{r.job_class},{r.min_runtime_s},"
              f"{r.resumable}" + (f",{r.gpu_models},{r.clusters}" if header is not HEADER else "") for r in rows]
    return Generated(name=scenario_name, family=fam.name, seed=seed, params=p, yaml_text=yaml_text,
                     csv_text="\n".join(lines) + "\n", jobs=len(rows), span_s=span, gpu_s=gpu_s)


def offered_load(scenario: Scenario) -> float:
    """Total requested GPU-seconds ÷ (capacity × the span from the first to the last arrival): the
    demand the trace puts on the cluster (1.0: exactly its supply)."""
    jobs = scenario.jobs
    if not jobs:
        return 0.0
    span = max(j.submit_s for j in jobs)
    gpu_s = sum(j.gpus * j.duration_s for j in jobs)
    return gpu_s / (scenario.capacity * span) if span > 0 else math.inf
