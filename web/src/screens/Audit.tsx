import { useEffect, useMemo, useState } from "react";
import { ProjectName } from "../names";
import { useApp, useData } from "../context";
import { verdict, verdictClass } from "../lib/verify";
import { type AuditEvent, type BudgetReport, fetchAllocations, fetchBudgetReport, fetchEvents, fetchJobs, fetchStateAtPin, type StateAtPage, verifyRange, type Verification } from "../api/queries";
import { canReadAudit } from "../api/auth";
import { actorOf } from "../lib/audit";
import { ErrorNote, JsonView, Panel } from "../components/common";
import { TreeTable } from "../components/TreeTable";
import { type AllocationRow, treeFromEvents } from "../lib/tree";
import { formatGpuHours, formatRatio, formatTime, shortHash } from "../lib/format";
import { type Pin, waitingOf } from "../lib/timetravel";
import { TimeTravelControl } from "../components/TimeTravelControl";

const TYPES = ["", "AllocationsSet", "NodeRegistered", "JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "CommandRejected"];

const SINCE = [{ label: "last hour", s: 3600 }, { label: "last 24 h", s: 86400 }, { label: "last 7 days", s: 7 * 86400 }, { label: "all time", s: 0 }];

export function AuditScreen() {
  const { identity } = useApp();
  const readAudit = canReadAudit(identity);
  const [filter, setFilter] = useState({ stream: "", type: "", actor: "", since: 1 });
  const { data, error } = useData(() => {
    const s = SINCE[filter.since].s;
    return fetchEvents({ ...filter, since: s ? Date.now() / 1000 - s : undefined }, 300, readAudit);
  }, [filter.stream, filter.type, filter.actor, filter.since, readAudit]);
  const events = data?.events ?? [];
  return (
    <div className="audit">
      <Panel title="Event stream" id="events">
        <form className="filters" role="search" aria-label="Filter events" onSubmit={(e) => e.preventDefault()}>
          <label className="inline">Stream <input value={filter.stream} onChange={(e) => setFilter({ ...filter, stream: e.target.value })} placeholder="e.g. allocation-cluster" size={16} /></label>
          <label className="inline">Type <select value={filter.type} onChange={(e) => setFilter({ ...filter, type: e.target.value })}>{TYPES.map((t) => <option key={t} value={t}>{t || "any"}</option>)}</select></label>
          <label className="inline">Actor <input value={filter.actor} onChange={(e) => setFilter({ ...filter, actor: e.target.value })} size={10} /></label>
          <label className="inline">Since <select value={filter.since} onChange={(e) => setFilter({ ...filter, since: Number(e.target.value) })}>{SINCE.map((o, i) => <option key={o.label} value={i}>{o.label}</option>)}</select></label>
        </form>
        <ErrorNote error={error} />
        {!readAudit && (
          <p className="note" role="note" data-testid="audit-own-streams">
            Your role ({identity.role}) may not read the audit stream: showing the events of the latest jobs you can see; allocation changes appear here for auditors and admins.
          </p>)}
        {data?.truncated && <p className="muted">Showing the newest 300 matching events; narrow the filters to see older ones.</p>}
        <table className="data events-table" data-testid="events-table">
          <caption className="sr-only">Recorded events, newest first; expand one for its payload (the evidence) and metadata</caption>
          <thead><tr><th scope="col">position</th><th scope="col">time</th><th scope="col">type</th><th scope="col">stream</th><th scope="col">actor</th><th scope="col">hash</th></tr></thead>
          <tbody>
            {events.map((e) => <EventRow key={e.position} e={e} />)}
            {data && !events.length && <tr><td colSpan={6} className="muted">No events match.</td></tr>}
          </tbody>
        </table>
      </Panel>
      <div className="audit-side">
        {readAudit ? <VerifyPanel /> : null}
        {readAudit ? <TimeTravel events={data?.source === "api" ? events : null} /> : null}
      </div>
    </div>
  );
}

function EventRow({ e }: { e: AuditEvent }) {
  const [open, setOpen] = useState(false);
  const reason = (e.payload as { reason?: string } | null)?.reason;
  return (
    <>
      <tr className={open ? "open" : ""} data-type={e.type}>
        <td className="num"><button type="button" className="link" aria-expanded={open} onClick={() => setOpen(!open)} aria-label={`event ${e.position}, ${e.type}: ${open ? "hide" : "show"} details`}>#{e.position}</button></td>
        <td>{formatTime(e.recordedAt)}</td>
        <td><strong>{e.type}</strong>{reason ? <span className="muted"> — {reason}</span> : null}</td>
        <td><code>{e.streamId}</code></td>
        <td>{actorOf(e)}</td>
        <td><code className="hash" title={e.hash}>{shortHash(e.hash, 12)}</code></td>
      </tr>
      {open && (
        <tr className="detail"><td colSpan={6}>
          <div className="two">
            <div><h4>Payload (evidence)</h4><JsonView value={e.payload} label="payload" /></div>
            <div><h4>Metadata</h4><JsonView value={e.metadata} label="metadata" /><p className="hash-full">hash <code>{e.hash}</code>{e.prevHash && <> · prev <code>{e.prevHash}</code></>}</p></div>
          </div>
        </td></tr>
      )}
    </>
  );
}

function VerifyPanel() {
  const [from, setFrom] = useState("1");
  const [to, setTo] = useState("");
  const [result, setResult] = useState<{ busy: boolean; v: Verification | null; error: string | null }>({ busy: false, v: null, error: null });
  const check = async (start: string) => {
    setResult({ busy: true, v: null, error: null });
    try {
      const v = await verifyRange(start ? Number(start) : null, to ? Number(to) : null);
      setResult({ busy: false, v, error: null });
    } catch (err) {
      setResult({ busy: false, v: null, error: err instanceof Error ? err.message : String(err) });
    }
  };
  const run = async (e: React.FormEvent) => {
    e.preventDefault();
    await check(from);
  };
  const next = result.v?.truncated && result.v.reached !== null ? String(result.v.reached + 1) : null;
  const goOn = async () => {
    if (!next) return;
    setFrom(next);
    await check(next);
  };
  return (
    <Panel title="Verify the hash chain" id="verify">
      <form onSubmit={run} className="verify">
        <label className="inline">From position <input type="number" min={1} value={from} onChange={(e) => setFrom(e.target.value)} size={6} /></label>
        <label className="inline">to <input type="number" min={1} value={to} placeholder="head" onChange={(e) => setTo(e.target.value)} size={6} /></label>
        <button type="submit" disabled={result.busy}>{result.busy ? "Verifying…" : "Verify range"}</button>
      </form>
      <ErrorNote error={result.error} />
      {result.v && (
        <p className={`${verdictClass(result.v)} verify-result`} role="status" data-testid="verify-result">
          {verdict(result.v)}: {result.v.message}
          {result.v.checked !== null ? ` · ${result.v.checked} events checked` : ""}
          {result.v.firstBad !== null ? ` · first bad position ${result.v.firstBad}` : ""}
          {next && result.v.firstBad === null ? <> · <button type="button" onClick={goOn} disabled={result.busy}>Go on from position {next}</button></> : null}
        </p>
      )}
    </Panel>
  );
}

function TimeTravel({ events }: { events: AuditEvent[] | null }) {
  const { now } = useApp();
  const { data } = useData(async () => {
    const [jobs, allocations] = await Promise.all([fetchJobs({}, 1000), fetchAllocations()]);
    return { jobs, allocations };
  }, []);
  const start = useMemo(() => {
    const times = [...(data?.jobs.map((j) => j.submittedAt) ?? []), ...(events?.map((e) => e.recordedAt) ?? [])];
    return times.length ? Math.floor(Math.min(...times)) - 1 : Math.floor(now) - 3600;
  }, [data, events, now]);
  const end = Math.ceil(now);
  const [at, setAt] = useState<number | null>(null);
  const [typed, setTyped] = useState<Pin | null>(null); // a date or a position typed in the control
  const pin: Pin | null = typed ?? (at === null ? null : { at });
  const when = at ?? end;
  const [state, setState] = useState<{ page: StateAtPage; report: BudgetReport | null; refused: string | null } | null>(null);
  const [refused, setRefused] = useState<string | null>(null);
  useEffect(() => {
    if (pin === null) {
      setState(null);
      setRefused(null);
      return;
    }
    let live = true;
    const t = window.setTimeout(() => {
      // the state and the figures of one position: the report is pinned to the position the state names
      fetchStateAtPin(pin).then(async (page) => {
        let report: BudgetReport | null = null;
        let why: string | null = null;
        if (page.position > 0) {
          try {
            report = await fetchBudgetReport(86400, 1, { position: page.position });
          } catch (err) {
            why = err instanceof Error ? err.message : String(err);
          }
        }
        if (live) {
          setState({ page, report, refused: why });
          setRefused(null);
        }
      }, (err: unknown) => {
        if (live) {
          setState(null); // never the previous moment's state under the new moment's heading
          setRefused(err instanceof Error ? err.message : String(err));
        }
      });
    }, typed ? 0 : 250);
    return () => {
      live = false;
      window.clearTimeout(t);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [JSON.stringify(pin)]);

  const fromLog = state?.page ?? null;
  // until the state of the moment comes: the tree replayed from the AllocationsSet events on screen, or now's
  const tree: AllocationRow[] = fromLog ? fromLog.allocations : events && at !== null ? treeFromEvents(events, when) : data?.allocations ?? [];
  const listed = fromLog ? waitingOf(fromLog) : null;
  const waiting = listed ? listed.shown : (data?.jobs ?? []).filter((j) => j.submittedAt <= when && !(j.startedAt && j.startedAt <= when) && !(j.endedAt && j.endedAt <= when));
  const waitingCount = listed ? listed.count : waiting.length;
  const position = fromLog ? fromLog.position : null;
  const current = state?.report?.periods.find((p) => p.current) ?? null;
  const label = typed && "position" in typed ? `position ${typed.position}` : formatTime(typed && "at" in typed ? typed.at : when);
  return (
    <Panel title="As of a past moment" id="timetravel">
      <label htmlFor="asof">Time: <output htmlFor="asof" data-testid="asof-time">{pin === null ? `now (${formatTime(end)})` : label}</output></label>
      <input id="asof" type="range" min={start} max={end} step={1} value={when} onChange={(e) => { setTyped(null); setAt(Number(e.target.value) >= end ? null : Number(e.target.value)); }}
        aria-valuetext={formatTime(when)} data-testid="time-slider" />
      <TimeTravelControl id="audit" pin={typed} onPin={(p) => { setTyped(p); if (p === null) setAt(null); }} />
      {refused && <p className="bad" role="alert" data-testid="asof-refused">Not shown: {refused}</p>}
      {position ? <p className="muted" data-testid="asof-position" data-position={position}>State folded from the log up to position {position}{fromLog?.recordedAt ? `, recorded ${formatTime(fromLog.recordedAt)}` : ""}.</p> : null}
      <h3>Tree</h3>
      <TreeTable rows={tree} label={`Allocation tree as of ${label}`} testid="asof-tree" />
      {fromLog && <p className="small muted" data-testid="asof-counts">Jobs then: {fromLog.jobCounts.length ? fromLog.jobCounts.map((c) => `${c.count} ${c.state.toLowerCase()}`).join(", ") : "none"}.</p>}
      <h3>Queue <span className="muted" data-testid="asof-queue-count">{waitingCount} waiting</span></h3>
      {listed?.note && <p className="small warn" data-testid="asof-queue-truncated">{listed.note}</p>}
      <ul className="asof-queue">
        {waiting.slice(0, 30).map((j) => <li key={j.id}><code>{j.id}</code> <ProjectName id={j.project} /> · {j.gpus} GPU</li>)}
      </ul>
      {waiting.length > 30 && <p className="small muted">The first 30 of {waitingCount} waiting are listed.</p>}
      {state?.refused && <p className="small bad">Owed vs delivered not shown: {state.refused}</p>}
      {state?.report && current && (
        <>
          <h3>Owed vs delivered then <span className="muted small">({current.label}, to {formatTime(state.report.asOf)})</span></h3>
          <table className="compact" data-testid="asof-books" data-position={state.report.position}>
            <caption className="sr-only">Owed vs delivered per project in the period as of the moment shown</caption>
            <thead><tr><th scope="col">project</th><th scope="col">owed</th><th scope="col">delivered</th><th scope="col">delivered / owed</th></tr></thead>
            <tbody>
              {current.allocations.filter((a) => a.isProject && (a.owed > 0 || a.delivered > 0)).map((a) => (
                <tr key={a.name} data-name={a.name}><th scope="row"><ProjectName id={a.name} /></th>
                  <td className="num" data-testid={`asof-owed-${a.name}`}>{formatGpuHours(a.owed)}</td>
                  <td className="num" data-testid={`asof-delivered-${a.name}`}>{formatGpuHours(a.delivered)}</td>
                  <td className="num">{formatRatio(a.ratio)}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </Panel>
  );
}
