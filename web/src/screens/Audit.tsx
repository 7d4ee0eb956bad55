import { useEffect, useMemo, useState } from "react";
import { useApp, useData } from "../context";
import { actorOf, type Allocation, type AuditEvent, fetchAllocations, fetchEvents, fetchJobs, fetchStateAt, type Job, verifyRange, type Verification } from "../api/queries";
import { firstOf } from "../api/schema";
import { canReadAudit } from "../api/auth";
import { ErrorNote, JsonView, Missing, Panel } from "../components/common";
import { TreeTable } from "../components/TreeTable";
import { treeFromEvents } from "../lib/tree";
import { formatTime, shortHash } from "../lib/format";

const TYPES = ["", "AllocationsSet", "NodeRegistered", "JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "CommandRejected"];

const SINCE = [{ label: "last hour", s: 3600 }, { label: "last 24 h", s: 86400 }, { label: "last 7 days", s: 7 * 86400 }, { label: "all time", s: 0 }];

export function AuditScreen() {
  const { schema, identity } = useApp();
  const readAudit = canReadAudit(identity);
  const [filter, setFilter] = useState({ stream: "", type: "", actor: "", since: 1 });
  const { data, error } = useData(() => {
    const s = SINCE[filter.since].s;
    return fetchEvents(schema, { ...filter, since: s ? Date.now() / 1000 - s : undefined }, 300, readAudit);
  }, [schema, filter.stream, filter.type, filter.actor, filter.since, readAudit]);
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
        {data?.source === "jobs" && (readAudit
          ? <Missing fields={["Query.auditEvents(first, after, filter: EventFilter): EventConnection"]}>showing only the latest jobs' own streams</Missing>
          : <Missing fields={[`auditEvents for the ${identity.role} role (own subtree)`]}>your role may not read the audit stream: showing the events of the latest jobs you can see; allocation changes appear here for auditors and admins</Missing>)}
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
  const { schema } = useApp();
  const [from, setFrom] = useState("1");
  const [to, setTo] = useState("");
  const [result, setResult] = useState<{ busy: boolean; v: Verification | null; error: string | null }>({ busy: false, v: null, error: null });
  const path = firstOf(schema, "Query.verify", "Query.verifyChain", "Query.auditVerify", "Query.verification");
  const run = async (e: React.FormEvent) => {
    e.preventDefault();
    setResult({ busy: true, v: null, error: null });
    try {
      const v = await verifyRange(schema, from ? Number(from) : null, to ? Number(to) : null);
      setResult({ busy: false, v, error: null });
    } catch (err) {
      setResult({ busy: false, v: null, error: err instanceof Error ? err.message : String(err) });
    }
  };
  return (
    <Panel title="Verify the hash chain" id="verify">
      <form onSubmit={run} className="verify">
        <label className="inline">From position <input type="number" min={1} value={from} onChange={(e) => setFrom(e.target.value)} size={6} /></label>
        <label className="inline">to <input type="number" min={1} value={to} placeholder="head" onChange={(e) => setTo(e.target.value)} size={6} /></label>
        <button type="submit" disabled={!path || result.busy}>{result.busy ? "Verifying…" : "Verify range"}</button>
      </form>
      {!path && <Missing fields={["Query.verify(from: Int, to: Int): Verification { ok checked firstBad message }"]}>the server recomputes each hash from the previous one; the browser cannot</Missing>}
      <ErrorNote error={result.error} />
      {result.v && (
        <p className={result.v.ok ? "ok verify-result" : "error verify-result"} role="status" data-testid="verify-result">
          {result.v.ok ? "✔ Intact" : "✘ Broken"}: {result.v.message}
          {result.v.checked !== null ? ` · ${result.v.checked} events checked` : ""}
          {result.v.firstBad !== null ? ` · first bad position ${result.v.firstBad}` : ""}
        </p>
      )}
    </Panel>
  );
}

function TimeTravel({ events }: { events: AuditEvent[] | null }) {
  const { schema, now } = useApp();
  const stateAtPath = firstOf(schema, "Query.stateAt", "Query.asOf", "Query.stateAsOf");
  const { data } = useData(async () => {
    const [jobs, allocations] = await Promise.all([fetchJobs(schema, {}, 1000), fetchAllocations(schema)]);
    return { jobs, allocations };
  }, [schema]);
  const start = useMemo(() => {
    const times = [...(data?.jobs.map((j) => j.submittedAt) ?? []), ...(events?.map((e) => e.recordedAt) ?? [])];
    return times.length ? Math.floor(Math.min(...times)) - 1 : Math.floor(now) - 3600;
  }, [data, events, now]);
  const end = Math.ceil(now);
  const [at, setAt] = useState<number | null>(null);
  const when = at ?? end;
  const [asOf, setAsOf] = useState<{ allocations: Allocation[]; waiting: Job[]; position: number | null } | null>(null);
  useEffect(() => {
    if (!stateAtPath || at === null) return setAsOf(null);
    const t = window.setTimeout(() => fetchStateAt(schema, at).then(setAsOf, () => setAsOf(null)), 250);
    return () => window.clearTimeout(t);
  }, [at, schema, stateAtPath]);

  const tree = asOf?.allocations ?? (events && at !== null ? treeFromEvents(events, when) : data?.allocations ?? []);
  const waiting = asOf?.waiting ?? (data?.jobs ?? []).filter((j) => j.submittedAt <= when && !(j.startedAt && j.startedAt <= when) && !(j.endedAt && j.endedAt <= when));
  return (
    <Panel title="As of a past moment" id="timetravel">
      <label htmlFor="asof">Time: <output htmlFor="asof" data-testid="asof-time">{at === null ? `now (${formatTime(end)})` : formatTime(when)}</output></label>
      <input id="asof" type="range" min={start} max={end} step={1} value={when} onChange={(e) => setAt(Number(e.target.value) >= end ? null : Number(e.target.value))}
        aria-valuetext={formatTime(when)} data-testid="time-slider" />
      {!stateAtPath && <Missing fields={["Query.stateAt(at: Float!): StateAsOf { allocations queue }"]}>{events ? "tree replayed in the browser from AllocationsSet events" : "tree shown as now"}; queue reconstructed from job times</Missing>}
      {asOf?.position ? <p className="muted" data-testid="asof-position">State folded from the log up to position {asOf.position}.</p> : null}
      <h3>Tree</h3>
      <TreeTable rows={tree} label={`Allocation tree as of ${formatTime(when)}`} testid="asof-tree" />
      <h3>Queue <span className="muted" data-testid="asof-queue-count">{waiting.length} waiting</span></h3>
      <ul className="asof-queue">
        {waiting.slice(0, 30).map((j) => <li key={j.id}><code>{j.id}</code> {j.project} · {j.gpus} GPU</li>)}
      </ul>
    </Panel>
  );
}
