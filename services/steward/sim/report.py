"""Outputs of a run or a comparison: one table, per-allocation and per-hour CSVs, and PNG plots.

Files written to DIR:
  summary.json / summary.csv / summary.md   the figures, one entry (row, column) per policy
  allocations.csv                           owed vs delivered per policy × allocation × period
  daily.csv                                 demand, funded and unfunded busy GPUs (daily means)
  diagnostics.json                          cycles run and skipped, time in the policy, queue peak
  owed_delivered.png, occupancy.png, wait_cdf.png   (matplotlib, imported only here)
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from steward.domain import budget
from steward.sim.errors import SimError, out_folder
from steward.sim.metrics import HOUR_S, WAIT_CLASSES, cdf_points

if TYPE_CHECKING:
    from steward.sim.result import SimResult

ROWS: tuple[tuple[str, str], ...] = (
    ("jobs", "jobs"),
    ("occupancy", "occupancy"),
    ("owed_delivered_mean", "owed/delivered mean"),
    ("owed_delivered_min", "owed/delivered min"),
    ("wait_p50_s.debug", "wait p50 debug (s)"),
    ("wait_p90_s.debug", "wait p90 debug (s)"),
    ("wait_p50_s.debug_qualified", "wait p50 debug qualified (s)"),
    ("wait_p90_s.debug_qualified", "wait p90 debug qualified (s)"),
    ("wait_p50_s.debug_over_quota", "wait p50 debug over quota (s)"),
    ("wait_p90_s.debug_over_quota", "wait p90 debug over quota (s)"),
    ("debug_qualified_fraction", "debug qualified fraction"),
    ("wait_p50_s.batch", "wait p50 batch (s)"),
    ("wait_p90_s.batch", "wait p90 batch (s)"),
    ("wait_p50_s.large", "wait p50 large (s)"),
    ("wait_p90_s.large", "wait p90 large (s)"),
    ("preemptions", "preemptions"),
    ("lost_gpu_hours_fraction", "lost GPU-hours fraction"),
    ("protection_violations", "protection violations"),
    ("fragmentation_mean", "fragmentation mean"),
    ("preemptions_per_1k_gpu_h", "preemptions per 1k GPU-h"),
    ("flaps", "flaps"),
    ("flaps_fraction", "flaps fraction"),
    ("jct_mean_s", "JCT mean (s)"),
    ("jct_p99_s", "JCT p99 (s)"),
    ("makespan_s", "makespan (s)"),
    ("rho_mean", "finish-time fairness ρ mean"),
    ("rho_p50", "ρ p50"),
    ("rho_p90", "ρ p90"),
    ("rho_p99", "ρ p99"),
    ("rho_max", "ρ max"),
    ("rho_gt1_fraction", "ρ > 1 fraction"),
    ("wall_s", "wall (s)"),
)


def _get(fig: dict[str, Any], key: str) -> Any:
    head, _, rest = key.partition(".")
    value = fig.get(head)
    if rest and isinstance(value, dict):
        return value.get(rest)
    return value


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.4g}" if value < 1 else f"{value:.3g}"
    return str(value)


def flat(fig: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in fig.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                out[f"{k}.{kk}"] = vv
        else:
            out[k] = v
    return out


def text_table(figs: Sequence[dict[str, Any]]) -> str:
    names = [str(f["policy"]) for f in figs]
    width = max(len(label) for _, label in ROWS) + 2
    cols = [max(12, len(n) + 2) for n in names]
    lines = [f"scenario {figs[0]['scenario']}" if figs else ""]
    lines.append("".ljust(width) + "".join(n.rjust(c) for n, c in zip(names, cols, strict=True)))
    for key, label in ROWS:
        cells = [_fmt(_get(f, key)).rjust(c) for f, c in zip(figs, cols, strict=True)]
        lines.append(label.ljust(width) + "".join(cells))
    return "\n".join(lines)


def markdown_table(figs: Sequence[dict[str, Any]]) -> str:
    names = [str(f["policy"]) for f in figs]
    lines = ["| figure | " + " | ".join(f"`{n}`" for n in names) + " |",
             "| --- | " + " | ".join("---:" for _ in names) + " |"]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(_fmt(_get(f, key)) for f in figs) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(results: Sequence[SimResult], out: Path, plots: bool = True) -> list[Path]:
    out_folder(out)
    figs = [r.to_json() for r in results]
    written: list[Path] = []

    def path(name: str) -> Path:
        p = out / name
        written.append(p)
        return p

    path("summary.json").write_text(json.dumps(figs, indent=2) + "\n")
    rows = [flat(f) for f in figs]
    with path("summary.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    path("summary.md").write_text(markdown_table(figs))
    diag = {r.policy: r.diagnostics() for r in results}
    path("diagnostics.json").write_text(json.dumps(diag, indent=2) + "\n")
    with path("allocations.csv").open("w", newline="") as fh:
        fields = ["policy", "allocation", "project", "period", "start_day", "end_day", "entitlement",
                  "owed_gpu_h", "delivered_gpu_h", "demand_gpu_h", "ratio", "credited"]
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in results:
            for row in r.recorder.owed_delivered_table():
                w.writerow({"policy": r.policy, **{k: _round(v) for k, v in row.items()}})
    with path("daily.csv").open("w", newline="") as fh:
        w2 = csv.writer(fh)
        w2.writerow(["policy", "day", "demand_gpus", "busy_funded_gpus", "busy_unfunded_gpus", "capacity"])
        for r in results:
            rec = r.recorder
            hours = rec.hours
            d = _daily(rec.demand.hourly.padded(hours))
            f = _daily(rec.busy_funded.hourly.padded(hours))
            u = _daily(rec.busy_unfunded.hourly.padded(hours))
            for day in range(len(d)):
                w2.writerow([r.policy, day, round(d[day], 3), round(f[day], 3), round(u[day], 3), rec.capacity])
    if plots:
        written += write_plots(results, out)
    return written


def _round(v: Any) -> Any:
    return round(v, 6) if isinstance(v, float) else v


def write_plots(results: Sequence[SimResult], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SimError("plots need matplotlib (pip install matplotlib), or pass --no-plots") from None
    paths = [out / "owed_delivered.png", out / "occupancy.png", out / "wait_cdf.png"]
    _plot_owed(plt, results, paths[0])
    _plot_occupancy(plt, results, paths[1])
    _plot_waits(plt, results, paths[2])
    return paths


def _weekly_ratio(owed: list[float], got: list[float], days: int = 7) -> tuple[list[float], list[float]]:
    step = days * 24
    xs: list[float] = []
    ys: list[float] = []
    for lo in range(0, len(owed), step):
        r = budget.ratio(sum(got[lo:lo + step]), sum(owed[lo:lo + step]))
        if r is None:
            continue
        xs.append((lo + step / 2) / 24.0)
        ys.append(r)
    return xs, ys


def _plot_owed(plt: Any, results: Sequence[SimResult], path: Path) -> None:
    projects = list(results[0].recorder.projects)
    ncols = 4
    nrows = max(1, (len(projects) + ncols - 1) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 2.6 * nrows), sharex=True, sharey=True,
                             squeeze=False)
    for r in results:
        rec = r.recorder
        demand, delivered = rec.alloc_hourly()
        for i, p in enumerate(projects):
            cap_h = rec.entitled_hourly(p)  # weighted GPU-seconds (ADR 0062, 0066)
            owed = [budget.owed_gpu_s(cap_h, d) for d in demand[p]]
            xs, ys = _weekly_ratio(owed, delivered[p])
            ax = axes[i // ncols][i % ncols]
            ax.plot(xs, ys, marker=".", label=r.policy, linewidth=1.2)
            ax.set_title(f"{p} ({rec.entitlement[p]:.1%})", fontsize=9)
    for i in range(len(projects), nrows * ncols):
        axes[i // ncols][i % ncols].axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("day")
    for row in axes:
        row[0].set_ylabel("delivered ÷ owed")
        for ax in row:
            ax.set_ylim(bottom=0)  # above 1 is over-delivery, shown as it is
            ax.axhline(1.0, color="grey", linewidth=0.6)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{results[0].scenario.name}: owed vs delivered per project, by week "
                 "(owed = min(entitlement × capacity, demand) hour by hour)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _daily(hourly: list[float]) -> list[float]:
    return [sum(hourly[i:i + 24]) / (24 * HOUR_S) for i in range(0, len(hourly), 24)]


def _plot_occupancy(plt: Any, results: Sequence[SimResult], path: Path) -> None:
    n = len(results)
    fig, axes = plt.subplots(n, 1, figsize=(12, 2.4 * n + 0.6), sharex=True, squeeze=False)
    for ax, r in zip([a[0] for a in axes], results, strict=True):
        rec = r.recorder
        hours = rec.hours
        f = _daily(rec.busy_funded.hourly.padded(hours))
        u = _daily(rec.busy_unfunded.hourly.padded(hours))
        d = _daily(rec.demand.hourly.padded(hours))
        days = list(range(len(f)))
        ax.stackplot(days, f, u, labels=["funded", "unfunded"], alpha=0.8, step="post")
        ax.step(days, [min(rec.capacity, x) for x in d], where="post", color="black", linewidth=0.8,
                label="min(capacity, demand)")
        ax.axhline(rec.capacity, color="grey", linestyle=":", linewidth=0.8)
        ax.set_ylabel("GPUs (daily mean)")
        ax.set_title(f"{r.policy}: occupancy {r.figures['occupancy']}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left")
    axes[-1][0].set_xlabel("day")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_waits(plt: Any, results: Sequence[SimResult], path: Path) -> None:
    fig, axes = plt.subplots(1, len(WAIT_CLASSES), figsize=(5 * len(WAIT_CLASSES), 3.6), squeeze=False)
    for ax, cls in zip(axes[0], WAIT_CLASSES, strict=True):
        for r in results:
            waits = r.recorder.waits[cls]
            if not waits:
                continue
            xs, ys = cdf_points(max(w, 1.0) for w in waits)
            ax.step(xs, ys, where="post", label=r.policy, linewidth=1.2)
        ax.set_xscale("log")
        ax.set_xlabel("wait, submit to first start (s; < 1 s shown at 1 s)")
        ax.set_title(cls, fontsize=10)
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=0.8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of jobs")
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
