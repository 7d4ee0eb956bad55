import { useMemo, useState } from "react";
import { ProjectName } from "../names";
import { useData } from "../context";
import { fetchOverview, fetchQueue } from "../api/queries";
import { Chart, PALETTE, type ChartOption } from "../components/Chart";
import { ErrorNote, Panel } from "../components/common";
import { heatmapCells, latestBusy, occupancySeries, owedChart, owedRows, periodLabel, utcOffsetSeconds, waitRows } from "../lib/overview";
import { formatDuration, formatGpuHours, formatPercent, formatRatio, formatTime } from "../lib/format";

const RANGES: { label: string; seconds: number | null }[] = [
  { label: "since the first event", seconds: null },
  { label: "last hour", seconds: 3600 },
  { label: "last 24 h", seconds: 86400 },
  { label: "last 7 days", seconds: 7 * 86400 },
  { label: "last 30 days", seconds: 30 * 86400 },
];
const PERIODS = [
  { label: "1 hour", seconds: 3600 },
  { label: "1 day", seconds: 86400 },
  { label: "7 days", seconds: 7 * 86400 },
  { label: "30 days", seconds: 30 * 86400 },
];
const DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/** Every figure here is computed by the server from the log (Query.overview) and refreshed live. */
export function Overview() {
  const [range, setRange] = useState(3);
  const [period, setPeriod] = useState(1);
  const { data, error } = useData(async () => {
    const seconds = RANGES[range].seconds;
    const [overview, queueTotal] = await Promise.all([
      fetchOverview({ sinceS: seconds === null ? 0 : Date.now() / 1000 - seconds, utcOffsetS: utcOffsetSeconds(), periodS: PERIODS[period].seconds, pastPeriods: 3 }),
      fetchQueue().then((q) => q.waiting, () => null),
    ]);
    return { overview, queueTotal };
  }, [range, period]);

  const charts = useMemo(() => {
    if (!data) return null;
    const o = data.overview;
    const occ = occupancySeries(o.occupancy);
    const occOption: ChartOption = {
      tooltip: { trigger: "axis" },
      legend: { top: 0 },
      grid: { left: 48, right: 16, top: 32, bottom: 48 },
      dataZoom: [{ type: "inside" }, { type: "slider", height: 16, bottom: 8 }],
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "GPUs", max: o.capacityGpus || undefined },
      series: (["funded", "unfunded", "idle"] as const).map((k) => ({
        name: k, type: "line", stack: "gpus", areaStyle: { opacity: 0.85 }, symbol: "none", step: "end",
        color: PALETTE[k], lineStyle: { width: 0.5 }, data: occ[k],
      })),
    };
    const bars = owedChart(o.owedDelivered);
    const colour = { "owed previous": "#afb8c1", "delivered previous": "#8dd3a1", "owed current": PALETTE.owed, "delivered current": PALETTE.delivered } as const;
    const owedOption: ChartOption = {
      tooltip: { trigger: "axis" },
      legend: { top: 0 },
      grid: { left: 56, right: 16, top: 32, bottom: 56 },
      xAxis: { type: "category", data: bars.projects, axisLabel: { rotate: 30 } },
      yAxis: { type: "value", name: "GPU·h" },
      series: bars.series.map((s) => ({ name: s.name, type: "bar", color: colour[`${s.kind} ${s.period}`], data: s.data })),
    };
    const heat = heatmapCells(o.demandByHourOfWeek);
    const heatOption: ChartOption = {
      tooltip: { position: "top" },
      grid: { left: 48, right: 16, top: 8, bottom: 56 },
      xAxis: { type: "category", data: Array.from({ length: 24 }, (_, h) => `${h}`), name: "hour", nameLocation: "middle", nameGap: 24, splitArea: { show: true } },
      yAxis: { type: "category", data: DAYS, inverse: true, splitArea: { show: true } },
      visualMap: { min: 0, max: heat.max, calculable: false, orient: "horizontal", left: "center", bottom: 0, itemHeight: 120, inRange: { color: ["#f6f8fa", "#54aeff", "#0a3069"] } },
      series: [{ name: "mean GPUs demanded", type: "heatmap", data: heat.cells }],
    };
    const preempt = o.preemptionsPerDay;
    const preemptOption: ChartOption = {
      grid: { left: 40, right: 8, top: 8, bottom: 24 }, tooltip: { trigger: "axis" },
      xAxis: { type: "category", data: preempt.map((p) => p.day) }, yAxis: { type: "value", minInterval: 1 },
      series: [{ type: "bar", name: "preemptions", color: PALETTE.unfunded, data: preempt.map((p) => p.count) }],
    };
    return { occOption, owedOption, heatOption, preemptOption, rows: owedRows(o.owedDelivered), busy: latestBusy(o.occupancy) };
  }, [data]);

  if (!data || !charts) return <><ErrorNote error={error} /><p aria-busy="true">Loading overview…</p></>;
  const o = data.overview;
  const waits = waitRows(o.waits);
  const totalPreemptions = o.preemptionsPerDay.reduce((s, p) => s + p.count, 0);
  const current = o.owedDelivered.find((p) => p.current);

  return (
    <>
    <ErrorNote error={error} />
    <div className="grid-2">
      <Panel title="Occupancy over time" id="occupancy" actions={
        <label className="inline">Range{" "}
          <select value={range} onChange={(e) => setRange(Number(e.target.value))}>
            {RANGES.map((r, i) => <option key={r.label} value={i}>{r.label}</option>)}
          </select>
        </label>}>
        <p className="kpis">
          <span><strong>{o.capacityGpus}</strong> GPUs</span>
          <span data-testid="busy-now"><strong>{charts.busy.busy.toFixed(0)}</strong> busy in the last step ({formatPercent(charts.busy.fraction, 0)})</span>
          {data.queueTotal !== null && <span><strong>{data.queueTotal}</strong> waiting</span>}
        </p>
        <Chart label={`Occupancy: funded, unfunded and idle GPUs of ${o.capacityGpus}, ${formatTime(o.since)} to ${formatTime(o.until)}, one point per ${formatDuration(o.stepS)}`} option={charts.occOption} height={260} />
        <p className="muted small">From the log, every run of every job, up to position {o.position}.</p>
      </Panel>
      <Panel title="Owed vs delivered" id="owed" actions={
        <label className="inline">Period{" "}
          <select value={period} onChange={(e) => setPeriod(Number(e.target.value))}>
            {PERIODS.map((p, i) => <option key={p.label} value={i}>{p.label}</option>)}
          </select>
        </label>}>
        <Chart label="Owed and delivered GPU-hours per project, current and previous period" option={charts.owedOption} height={260} />
        {current && <p className="small" data-testid="owed-period">Period: {periodLabel(current, formatTime)} (periods of {PERIODS[period].label}, UTC-aligned)</p>}
        <table className="compact" data-testid="owed-table">
          <caption className="sr-only">Owed vs delivered per project in the current period</caption>
          <thead><tr><th scope="col">project</th><th scope="col">owed (this period)</th><th scope="col">delivered (this period)</th><th scope="col">delivered / owed</th><th scope="col">previous period</th></tr></thead>
          <tbody>
            {charts.rows.slice(0, 12).map((r) => (
              <tr key={r.name}><th scope="row"><ProjectName id={r.name} /></th><td>{formatGpuHours(r.owed)}</td><td>{formatGpuHours(r.delivered)}</td>
                <td className={r.ratio !== null && r.ratio < 0.9 ? "bad" : ""}>{formatRatio(r.ratio)}</td>
                <td>{formatRatio(r.previousRatio)}</td></tr>
            ))}
            {!charts.rows.length && <tr><td colSpan={5} className="muted">Nothing owed in this period yet.</td></tr>}
          </tbody>
        </table>
        <ul className="periods small" data-testid="periods">
          {o.owedDelivered.map((p) => (
            <li key={p.periodId}>{periodLabel(p, formatTime)}: delivered {formatPercent(p.deliveredOfOwed, 0)} of owed</li>
          ))}
        </ul>
        {current && <p className="muted small">Periods of {PERIODS[period].label}, aligned to UTC; past ones from their PeriodClosed events where the period was closed.</p>}
      </Panel>
      <Panel title="Demand by hour of week" id="demand">
        <Chart label="Heatmap of the mean GPUs demanded (waiting or running) by weekday and hour, local time" option={charts.heatOption} height={240} />
      </Panel>
      <Panel title="Waits and preemptions" id="waits">
        <h3>Wait to first start by class</h3>
        <table className="compact" data-testid="waits-table">
          <thead><tr><th scope="col">class</th><th scope="col">jobs</th><th scope="col">still waiting</th><th scope="col">p50</th><th scope="col">p90</th></tr></thead>
          <tbody>
            {waits.map((w) => (
              <tr key={w.jobClass}><th scope="row">{w.jobClass}</th><td>{w.jobs}</td><td>{w.waiting}</td><td>{formatDuration(w.p50S)}</td><td data-testid={`p90-${w.jobClass}`}>{formatDuration(w.p90S)}</td></tr>
            ))}
            {!waits.length && <tr><td colSpan={5} className="muted">No jobs submitted in this range.</td></tr>}
          </tbody>
        </table>
        <h3>Preemptions per day</h3>
        {totalPreemptions ? <Chart label={`Preemptions per day: ${totalPreemptions} in the range`} height={160} option={charts.preemptOption} />
          : <p className="muted" data-testid="no-preemptions">No preemptions in this range.</p>}
      </Panel>
    </div>
    </>
  );
}
