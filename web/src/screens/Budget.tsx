import { useMemo, useState } from "react";
import { ProjectName } from "../names";
import { useData } from "../context";
import { fetchBudgetReport } from "../api/queries";
import { Chart, type ChartOption } from "../components/Chart";
import { ErrorNote, Panel } from "../components/common";
import { budgetRows, budgetTrend } from "../lib/budget";
import { periodLabel } from "../lib/overview";
import { formatGpuHours, formatRatio, formatTime } from "../lib/format";
import { describeAsOf, type Pin } from "../lib/timetravel";
import { TimeTravelControl } from "../components/TimeTravelControl";

const PERIODS = [
  { label: "1 day", seconds: 86400, count: 14 },
  { label: "7 days", seconds: 7 * 86400, count: 12 },
  { label: "30 days", seconds: 30 * 86400, count: 12 },
  { label: "1 hour", seconds: 3600, count: 24 },
];

/** Owed vs delivered per allocation and period (Query.budgetReport): a table, a trend chart and the CSV. */
export function BudgetScreen() {
  const [choice, setChoice] = useState(0);
  const [pin, setPin] = useState<Pin | null>(null);
  const p = PERIODS[choice];
  const { data, error } = useData(() => fetchBudgetReport(p.seconds, p.count, pin), [choice, pin]);
  const view = useMemo(() => {
    if (!data) return null;
    const trend = budgetTrend(data.periods);
    const option: ChartOption = {
      tooltip: { trigger: "axis" },
      legend: { top: 0, type: "scroll" },
      grid: { left: 56, right: 16, top: 36, bottom: 32 },
      xAxis: { type: "category", data: trend.starts.map((t) => formatTime(t)) },
      yAxis: { type: "value", name: "delivered ÷ owed", min: 0 },
      series: [
        ...trend.series.map((s) => ({ name: s.name, type: "line", connectNulls: false, data: s.data })),
        { name: "owed (1.0)", type: "line", symbol: "none", lineStyle: { type: "dashed", width: 1 }, color: "#6e7781", data: trend.starts.map(() => 1) },
      ],
    };
    return { rows: budgetRows(data.periods), option };
  }, [data]);
  const download = () => {
    if (!data) return;
    const url = URL.createObjectURL(new Blob([data.csv], { type: "text/csv" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `budget-${p.label.replace(" ", "")}-position-${data.position}${data.pinned ? "-pinned" : ""}.csv`;
    a.click();
    URL.revokeObjectURL(url);
  };
  // the control stays at one place in the tree whether or not an answer has come: a control rendered in
  // another branch while loading would be a new one once the answer came, losing what was typed into it
  const travel = <TimeTravelControl id="budget" pin={pin} onPin={setPin} />;
  // a refused pin (past the head, before the log) leaves the last answer on screen: say it is not the one asked
  const stale = error !== null && pin !== null;
  return (
    <>
      <ErrorNote error={error} />
      <Panel title="Budget report: owed vs delivered" id="budget" actions={
        <>
          <label className="inline">Period{" "}
            <select value={choice} onChange={(e) => setChoice(Number(e.target.value))}>
              {PERIODS.map((x, i) => <option key={x.label} value={i}>{x.label}</option>)}
            </select>
          </label>{" "}
          <button type="button" onClick={download} disabled={!data} data-testid="budget-csv">Download CSV</button>
        </>}>
        {travel}
        {!data || !view ? <p aria-busy="true">Loading the budget report…</p> : <>
        <p className={`small ${data.pinned ? "info" : "muted"}`} data-testid="budget-asof" data-position={data.position} data-pinned={String(data.pinned)}>
          {stale ? <strong className="bad">Not shown: the moment asked for ({error}). Below is still the previous answer. </strong> : null}
          {describeAsOf(data, formatTime)}
        </p>
        <p className="muted small">Per period of {p.label} (aligned to UTC): owed = Σ over hours of min(entitlement × capacity, demand); delivered = GPU-hours its jobs ran; a ratio above 1 is over-delivery, shown as it is. The same figures as <code>steward report budget{data.pinned ? ` --position ${data.position}` : ""}</code>, up to log position {data.position}.</p>
        <Chart label={`Delivered ÷ owed per project and period of ${p.label}, oldest first`} option={view.option} height={260} />
        <table className="compact" data-testid="budget-table">
          <caption className="sr-only">Owed vs delivered per project and period</caption>
          <thead><tr><th scope="col">period</th><th scope="col">project</th><th scope="col">owed</th><th scope="col">delivered</th><th scope="col">delivered / owed</th></tr></thead>
          <tbody>
            {view.rows.map((r) => (
              <tr key={`${r.periodId}/${r.name}`} data-name={r.name} data-period={r.periodId}>
                <td className="nowrap">{r.current ? `${r.period} (current)` : r.period}</td><th scope="row"><ProjectName id={r.name} /></th>
                <td className="num">{formatGpuHours(r.owed)}</td><td className="num">{formatGpuHours(r.delivered)}</td>
                <td className={`num nowrap ${r.ratio !== null && r.ratio < 0.9 ? "bad" : ""}`}>{formatRatio(r.ratio)}</td>
              </tr>
            ))}
            {!view.rows.length && <tr><td colSpan={5} className="muted">Nothing owed in these periods.</td></tr>}
          </tbody>
        </table>
        <ul className="periods small">
          {data.periods.map((x) => <li key={x.periodId}>{periodLabel(x, formatTime)}: delivered {formatRatio(x.deliveredOfOwed)} of owed (each project credited at most what it was owed)</li>)}
        </ul>
        </>}
      </Panel>
    </>
  );
}
