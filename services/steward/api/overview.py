"""The `overview` and `budgetReport` queries: their GraphQL types and resolvers, over the figures that
`steward.api.figures` folds from the log (it sits above the request context; the figures sit below it)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

import strawberry

from steward.api.context import BadInput, Context
from steward.api.figures import (
    DAY,
    HOUR,
    MAX_PAST_PERIODS,
    MAX_POINTS,
    OverviewArgs,
    PeriodOwed,
    owed_delivered_periods,
    source_for,
)
from steward.api.scalars import BigInt
from steward.domain import budget
from steward.store.eventstore import EventStore


@strawberry.type(description="Mean GPUs over one step of the occupancy series.")
class OccupancyPoint:
    t: float = strawberry.field(description="The step's start (epoch seconds).")
    funded: float
    unfunded: float
    idle: float
    capacity: float = strawberry.field(description="Mean registered GPUs over the step.")


@strawberry.type(description="Waits from submission to first start, per job class, of the jobs submitted in the "
                             "range; jobs still waiting count with their wait so far.")
class ClassWait:
    job_class: str
    jobs: BigInt
    started: BigInt
    waiting: BigInt
    p50_s: float | None
    p90_s: float | None
    max_s: float | None


@strawberry.type
class DayCount:
    day: str = strawberry.field(description="YYYY-MM-DD in the requested UTC offset.")
    count: BigInt


@strawberry.type(description="Owed vs delivered of one allocation in one period (GPU-seconds).")
class OwedAllocation:
    name: str
    is_project: bool
    owed: float
    delivered: float
    demand: float
    entitled: float
    ratio: float | None = strawberry.field(description="delivered / owed, as it is: above 1 is over-delivery "
                                                       "(null: nothing owed).")
    over_delivered: bool = strawberry.field(description="More delivered than owed (ratio above 1).")


@strawberry.type(description="One budget period: the current one (computed now) or a past one (from its "
                             "PeriodClosed event when it was closed).")
class OwedPeriod:
    period_id: str
    start: float
    end: float
    current: bool
    recorded: bool = strawberry.field(description="From a PeriodClosed event (false: computed from the log).")
    delivered_of_owed: float | None = strawberry.field(description="Over all projects (cluster-wide), each credited "
                                                                   "at most what it was owed.")
    label: str = strawberry.field(description="The period in words, e.g. \"1 Dec 00:00 – 2 Dec 00:00 UTC\".")
    allocations: list[OwedAllocation]


@strawberry.type(description="The overview's figures, computed on the server from the log.")
class Overview:
    position: BigInt = strawberry.field(description="The log position the figures include.")
    since: float
    until: float
    step_s: float
    capacity_gpus: BigInt
    occupancy: list[OccupancyPoint]
    demand_by_hour_of_week: list[list[float]] = strawberry.field(
        description="Mean GPUs demanded (waiting or running), [Monday..Sunday][hour 0..23] in the UTC offset.")
    waits: list[ClassWait]
    preemptions_per_day: list[DayCount]
    owed_delivered: list[OwedPeriod] = strawberry.field(
        description="The current period first, then past ones, newest first; allocations you may see.")


async def overview(ctx: Context, since_s: float | None, until_s: float | None, points: int, utc_offset_s: int,
                   period_s: float, past_periods: int) -> Overview:
    """The `overview` query: every role sees the cluster-wide series; owed vs delivered lists the
    allocations the principal may see. Up to the time the log's head was recorded (ADR 0075)."""
    access = await ctx.access("overview")
    if not 10 <= points <= MAX_POINTS:
        raise BadInput(f"'points' must be between 10 and {MAX_POINTS}, got {points}")
    if not -14 * 3600 <= utc_offset_s <= 14 * 3600:
        raise BadInput(f"'utcOffsetS' must be between -50400 and 50400 seconds, got {utc_offset_s}")
    if not HOUR <= period_s <= 90 * DAY:
        raise BadInput(f"'periodS' must be between 3600 and {90 * DAY:.0f} seconds, got {period_s:g}")
    if not 0 <= past_periods <= MAX_PAST_PERIODS:
        raise BadInput(f"'pastPeriods' must be between 0 and {MAX_PAST_PERIODS}, got {past_periods}")
    for name, v in (("sinceS", since_s), ("untilS", until_s)):
        if v is not None and not math.isfinite(v):
            raise BadInput(f"'{name}' must be a finite time in epoch seconds")
    if since_s is not None and until_s is not None and since_s >= until_s:
        raise BadInput("'sinceS' must be before 'untilS'")
    args = OverviewArgs(since_s, until_s, points, utc_offset_s, period_s, past_periods)
    d = await asyncio.to_thread(source_for(ctx.services.store).overview, ctx.services.store, args)
    return Overview(
        position=d.position, since=d.since, until=d.until, step_s=d.step, capacity_gpus=d.capacity,
        occupancy=[OccupancyPoint(t=o.t, funded=o.funded, unfunded=o.unfunded, idle=o.idle, capacity=o.capacity)
                   for o in d.occupancy],
        demand_by_hour_of_week=d.demand,
        waits=[ClassWait(job_class=w.job_class, jobs=w.jobs, started=w.started, waiting=w.waiting, p50_s=w.p50_s,
                         p90_s=w.p90_s, max_s=w.max_s) for w in d.waits],
        preemptions_per_day=[DayCount(day=day, count=n) for day, n in d.preemptions],
        owed_delivered=[owed_period(p, d.projects, access.sees) for p in d.periods])


def owed_period(p: PeriodOwed, projects: frozenset[str], sees: Callable[[str], bool]) -> OwedPeriod:
    """One period as GraphQL serves it, with the allocations the principal may see."""
    return OwedPeriod(
        period_id=p.period_id, start=p.start, end=p.end, current=p.current, recorded=p.recorded,
        delivered_of_owed=p.delivered_of_owed, label=budget.describe_interval(p.start, p.end),
        allocations=[OwedAllocation(name=r.name, is_project=r.name in projects, owed=r.owed, delivered=r.delivered,
                                    demand=r.demand, entitled=r.entitled, ratio=r.ratio,
                                    over_delivered=budget.over_delivered(r.ratio))
                     for r in p.rows if sees(r.name)])


# == The budget report (issue 19): owed vs delivered per allocation and period, as rows and as CSV ===========

MAX_REPORT_PERIODS = 90
CSV_COLUMNS = ("period_id", "period", "start", "end", "current", "recorded", "allocation", "is_project",
               "owed_gpu_h", "delivered_gpu_h", "ratio", "over_delivered", "demand_gpu_h", "entitled_gpu_h")


def budget_csv(periods: Sequence[OwedPeriod]) -> str:
    """The report as CSV, one row per period and allocation, oldest period first (GPU-hours; times in ISO
    8601 UTC; `ratio` as it is, empty when nothing was owed)."""
    import csv
    import io
    from datetime import UTC, datetime

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p in sorted(periods, key=lambda x: x.start):
        for a in p.allocations:
            w.writerow([p.period_id, p.label, iso(p.start), iso(p.end), p.current, p.recorded, a.name, a.is_project,
                        f"{a.owed / HOUR:.4f}", f"{a.delivered / HOUR:.4f}",
                        "" if a.ratio is None else f"{a.ratio:.4f}", a.over_delivered,
                        f"{a.demand / HOUR:.4f}", f"{a.entitled / HOUR:.4f}"])
    return buf.getvalue()


@strawberry.type(description="Owed vs delivered per allocation and period: the current period and the past ones, "
                             "newest first (the same figures as the overview and the period close).")
class BudgetReport:
    position: BigInt = strawberry.field(description="The log position the figures include.")
    as_of: float = strawberry.field(description="The time the figures run to (epoch seconds; the current period "
                                                "ends here): when `position` was recorded (ADR 0075: every event "
                                                "recorded before it is counted), or, pinned to a time, that time.")
    pinned: bool = strawberry.field(description="As of a pinned position or time (time travel): the same answer "
                                                "whenever it is asked.")
    head: BigInt = strawberry.field(description="The log's head when the report was read (past `position` when "
                                                "the report is pinned before it).")
    period_s: float
    periods: list[OwedPeriod]
    csv: str = strawberry.field(description="The same rows as CSV (GPU-hours), oldest period first.")


async def budget_report(ctx: Context, period_s: float, periods: int,
                        position: int | None = None, at: float | None = None) -> BudgetReport:
    """The `budgetReport` query: `periods` periods of `period_s` (the current one included), the allocations
    the principal may see; as of the head and the time it was recorded (ADR 0075), or pinned (time travel) to a
    log `position` (the figures of the events up to it, to the time it was recorded) or a time `at` (the events
    recorded by then, to that time)."""
    access = await ctx.access("budgetReport")
    if not HOUR <= period_s <= 90 * DAY:
        raise BadInput(f"'periodS' must be between 3600 and {90 * DAY:.0f} seconds, got {period_s:g}")
    if not 1 <= periods <= MAX_REPORT_PERIODS:
        raise BadInput(f"'periods' must be between 1 and {MAX_REPORT_PERIODS}, got {periods}")
    store = ctx.services.store
    src = source_for(store)
    if position is not None or at is not None:
        target, _at = await asyncio.to_thread(pin, store, position, at)

        def read_pinned() -> tuple[int, int, list[PeriodOwed], frozenset[str], float]:
            fold, recorded = src.pinned(store, target, at)
            until = recorded if at is None else at
            projects = fold.projects()
            return target, store.head(), owed_delivered_periods(fold, until, period_s, periods - 1,
                                                                set(projects)), projects, until

        pos, head, rows, projects, as_of = await asyncio.to_thread(read_pinned)
        out = [owed_period(p, projects, access.sees) for p in rows]
        return BudgetReport(position=pos, as_of=as_of, pinned=True, head=head, period_s=period_s, periods=out,
                            csv=budget_csv(out))

    def read() -> tuple[int, float, list[PeriodOwed], frozenset[str]]:
        with src.lock:
            fold, as_of = src.live(store)
            projects = fold.projects()
            return fold.position, as_of, owed_delivered_periods(fold, as_of, period_s, periods - 1,
                                                                set(projects)), projects

    position_, as_of, rows, projects = await asyncio.to_thread(read)
    out = [owed_period(p, projects, access.sees) for p in rows]
    return BudgetReport(position=position_, as_of=as_of, pinned=False, head=position_, period_s=period_s,
                        periods=out, csv=budget_csv(out))


def pin(store: EventStore, position: int | None, at: float | None) -> tuple[int, float | None]:
    """The log position a time-travel request names (`position`, or the last one recorded by `at`), checked
    against the log: a position before its start or past its head, or a time before its first event, is
    refused with a one-line reason naming the log's extent (never an empty or a wrong state)."""
    if position is not None and at is not None:
        raise BadInput("give 'position' or 'at', not both")
    head = store.head()
    if position is not None:
        if position < 1:
            raise BadInput(f"'position' must be 1 or more, got {position}")
        if position > head:
            raise BadInput(f"position {position} is past the log's head ({head}): nothing is recorded there yet")
        return position, None
    assert at is not None
    if not math.isfinite(at):
        raise BadInput("'at' must be a finite time in epoch seconds")
    if at > time.time():
        raise BadInput("'at' is in the future: the log holds nothing there yet (leave it out for now)")
    target = store.position_at(at)
    if target == 0:
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise BadInput(f"nothing was recorded at or before {when}: the log starts later")
    return target, at
