import { useMemo, useState } from "react";
import { useApp, useData } from "../context";
import { fetchAllocations, fetchEvents, fetchJobs, fetchNodes, fetchOwedDelivered, fetchQueue } from "../api/queries";
import { canReadAudit } from "../api/auth";
import { firstOf, has } from "../api/schema";
import { Chart, PALETTE, type ChartOption } from "../components/Chart";
import { ErrorNote, Missing, Panel } from "../components/common";
import { demandByHourOfWeek, occupancySeries, owedVsDelivered, p90WaitByClass, preemptionsPerDay } from "../lib/stats";
import { entitlements } from "../lib/tree";
import { formatDuration, formatGpuHours, formatPercent, formatTime } from "../lib/format";

const RANGES: { label: string; seconds: number | null }[] = [
  { label: "since first job", seconds: null },
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

export function Overview() {
  const { schema, now, identity } = useApp();
  const [range, setRange] = useState(0);
  const [period, setPeriod] = useState(1);
  const readAudit = canReadAudit(identity);
  const { data, error } = useData(async () => {
    const [jobs, nodes, allocations, events, owed, queueTotal] = await Promise.all([
      fetchJobs(schema, {}, 1000),
      fetchNodes(schema),
      fetchAllocations(schema),
      readAudit && firstOf(schema, "Query.events", "Query.auditEvents") ? fetchEvents(schema, { type: "JobPreempted", since: Date.now() / 1000 - 30 * 86400 }, 1000).catch(() => null) : Promise.resolve(null),
      fetchOwedDelivered(schema, PERIODS[period].seconds).catch(() => null),
      fetchQueue(schema).then((q) => (q ? q.length : null)).catch(() => null),
    ]);
    return { jobs, nodes, allocations, events, owed, queueTotal };
  }, [schema, period, readAudit]);

  const t = Math.floor(now / 10) * 10; // recompute charts every 10 s, not every second
  const derived = useMemo(() => {
    if (!data) return null;
    const capacity = data.nodes.reduce((s, n) => s + n.gpus, 0);
    const first = Math.min(...data.jobs.map((j) => j.submittedAt), t - 3600);
    const span = RANGES[range].seconds ?? Math.max(600, t - first + 60);
    const from = t - span;
    const step = Math.max(10, Math.ceil(span / 240));
    const occ = occupancySeries(data.jobs, capacity, from, t, step);
    const ents = entitlements(data.allocations);
    const projects = new Map([...ents].filter(([n]) => !data.allocations.some((a) => a.parent === n)));
    const p = PERIODS[period].seconds;
    const curFrom = Math.floor(t / p) * p;
    // The API's figures when it has them (a sliding window: the last period and the one before it);
    // otherwise computed here over calendar-aligned periods.
    const current = data.owed?.current ?? owedVsDelivered(data.jobs, projects, capacity, curFrom, t, t, Math.min(3600, p / 12));
    const previous = data.owed?.previous ?? owedVsDelivered(data.jobs, projects, capacity, curFrom - p, curFrom, t, Math.min(3600, p / 12));
    return { capacity, occ, step, current, previous, heat: demandByHourOfWeek(data.jobs), waits: p90WaitByClass(data.jobs, t) };
  }, [data, range, period, t]);

  if (!data || !derived) return <><ErrorNote error={error} /><p aria-busy="true">Loading overview…</p></>;
  const { occ, capacity, current, previous, heat, waits } = derived;
  // Nodes carry the whole cluster's occupancy (every role sees it); the jobs list only what this role may see.
  const nodesBusy = data.nodes.some((n) => typeof n.usedGpus === "number") ? data.nodes.reduce((s, n) => s + (n.usedGpus ?? 0), 0) : null;
  const busyNow = nodesBusy ?? (occ.funded.at(-1) ?? 0) + (occ.unfunded.at(-1) ?? 0);
  const waitingNow = data.queueTotal ?? data.jobs.filter((j) => j.state === "QUEUED").length;

  const occOption: ChartOption = {
    tooltip: { trigger: "axis" },
    legend: { top: 0 },
    grid: { left: 48, right: 16, top: 32, bottom: 48 },
    dataZoom: [{ type: "inside" }, { type: "slider", height: 16, bottom: 8 }],
    xAxis: { type: "time" },
    yAxis: { type: "value", name: "GPUs", max: capacity || undefined },
    series: (["funded", "unfunded", "idle"] as const).map((k) => ({
      name: k, type: "line", stack: "gpus", areaStyle: { opacity: 0.85 }, symbol: "none", step: "end",
      color: PALETTE[k], lineStyle: { width: 0.5 }, data: occ.t.map((x, i) => [x * 1000, occ[k][i]]),
    })),
  };
  const projects = [...new Set([...current, ...previous].map((r) => r.project))];
  const val = (rows: typeof current, p: string, k: "owed" | "delivered") => (rows.find((r) => r.project === p)?.[k] ?? 0) / 3600;
  const owedOption: ChartOption = {
    tooltip: { trigger: "axis" },
    legend: { top: 0 },
    grid: { left: 56, right: 16, top: 32, bottom: 56 },
    xAxis: { type: "category", data: projects, axisLabel: { rotate: 30 } },
    yAxis: { type: "value", name: "GPU·h" },
    series: [
      { name: "owed (previous)", type: "bar", color: "#afb8c1", data: projects.map((p) => val(previous, p, "owed")) },
      { name: "delivered (previous)", type: "bar", color: "#8dd3a1", data: projects.map((p) => val(previous, p, "delivered")) },
      { name: "owed (current)", type: "bar", color: PALETTE.owed, data: projects.map((p) => val(current, p, "owed")) },
      { name: "delivered (current)", type: "bar", color: PALETTE.delivered, data: projects.map((p) => val(current, p, "delivered")) },
    ],
  };
  const maxHeat = Math.max(1, ...heat.flat());
  const heatOption: ChartOption = {
    tooltip: { position: "top" },
    grid: { left: 48, right: 16, top: 8, bottom: 56 },
    xAxis: { type: "category", data: Array.from({ length: 24 }, (_, h) => `${h}`), name: "hour", nameLocation: "middle", nameGap: 24, splitArea: { show: true } },
    yAxis: { type: "category", data: DAYS, inverse: true, splitArea: { show: true } },
    visualMap: { min: 0, max: maxHeat, calculable: false, orient: "horizontal", left: "center", bottom: 0, itemHeight: 120, inRange: { color: ["#f6f8fa", "#54aeff", "#0a3069"] } },
    series: [{ name: "GPUs requested", type: "heatmap", data: heat.flatMap((row, d) => row.map((v, h) => [h, d, v])) }],
  };
  const preempt = data.events ? preemptionsPerDay(data.events.events) : [];
  const waitEntries = Object.entries(waits).sort();
  const hasApiFairness = Boolean(data.owed);

  return (
    <div className="grid-2">
      <Panel title="Occupancy over time" id="occupancy" actions={
        <label className="inline">Range{" "}
          <select value={range} onChange={(e) => setRange(Number(e.target.value))}>
            {RANGES.map((r, i) => <option key={r.label} value={i}>{r.label}</option>)}
          </select>
        </label>}>
        <p className="kpis">
          <span><strong>{capacity}</strong> GPUs</span>
          <span><strong>{busyNow.toFixed(0)}</strong> busy now ({formatPercent(capacity ? busyNow / capacity : null, 0)})</span>
          <span><strong>{waitingNow}</strong> waiting</span>
        </p>
        <Chart label={`Occupancy: funded, unfunded and idle GPUs of ${capacity}, ${formatTime(occ.t[0])} to now, one point per ${formatDuration(derived.step)}`} option={occOption} height={260} />
        {!has(schema, "Query.occupancyHistory") && <Missing fields={["Query.occupancyHistory(since: Float!, until: Float, stepS: Float!): [OccupancyPoint{t funded unfunded idle}]"]}>computed in the browser from the latest 1,000 jobs (current attempts only)</Missing>}
      </Panel>
      <Panel title="Owed vs delivered" id="owed" actions={
        <label className="inline">Period{" "}
          <select value={period} onChange={(e) => setPeriod(Number(e.target.value))}>
            {PERIODS.map((p, i) => <option key={p.label} value={i}>{p.label}</option>)}
          </select>
        </label>}>
        <Chart label="Owed and delivered GPU-hours per allocation, current and previous period" option={owedOption} height={260} />
        <table className="compact">
          <caption className="sr-only">Owed vs delivered per allocation</caption>
          <thead><tr><th scope="col">allocation</th><th scope="col">owed (current)</th><th scope="col">delivered</th><th scope="col">ratio</th><th scope="col">ratio (previous)</th></tr></thead>
          <tbody>
            {current.filter((r) => r.owed > 0 || r.delivered > 0).slice(0, 12).map((r) => (
              <tr key={r.project}><th scope="row">{r.project}</th><td>{formatGpuHours(r.owed)}</td><td>{formatGpuHours(r.delivered)}</td>
                <td className={r.ratio !== null && r.ratio < 0.9 ? "bad" : ""}>{formatPercent(r.ratio, 0)}</td>
                <td>{formatPercent(previous.find((p) => p.project === r.project)?.ratio, 0)}</td></tr>
            ))}
          </tbody>
        </table>
        {hasApiFairness ? <p className="muted small">From the API: the last {PERIODS[period].label} and the {PERIODS[period].label} before it.</p>
          : <Missing fields={["Allocation.owed", "Allocation.delivered", "allocations(windowS)"]}>owed = min(entitlement × capacity, demand) per hour, computed in the browser</Missing>}
      </Panel>
      <Panel title="Demand by hour of week" id="demand">
        <Chart label="Heatmap of GPUs requested by weekday and hour (local time)" option={heatOption} height={240} />
        {!has(schema, "Query.demandByHourOfWeek") && <Missing fields={["Query.demandByHourOfWeek(since: Float): [[Float!]!]"]}>from submissions of the latest 1,000 jobs</Missing>}
      </Panel>
      <Panel title="Waits and preemptions" id="waits">
        <h3>p90 wait by class</h3>
        <dl className="stats">
          {waitEntries.length === 0 && <dd className="muted">no jobs yet</dd>}
          {waitEntries.map(([cls, w]) => (
            <div key={cls}><dt>{cls}</dt><dd data-testid={`p90-${cls}`}>{formatDuration(w)}</dd></div>
          ))}
        </dl>
        <h3>Preemptions per day</h3>
        {data.events ? (
          preempt.length ? (
            <Chart label="Preemptions per day" height={160} option={{ grid: { left: 40, right: 8, top: 8, bottom: 24 }, tooltip: { trigger: "axis" }, xAxis: { type: "category", data: preempt.map((p) => p.day) }, yAxis: { type: "value", minInterval: 1 }, series: [{ type: "bar", name: "preemptions", color: PALETTE.unfunded, data: preempt.map((p) => p.count) }] }} />
          ) : <p className="muted">No preemptions recorded.</p>
        ) : <Missing fields={readAudit ? ["Query.auditEvents"] : ["Query.preemptionsPerDay(days: Int): [DayCount{day count}]"]}>preemptions are counted from the audit stream, which your role may not read</Missing>}
      </Panel>
    </div>
  );
}
