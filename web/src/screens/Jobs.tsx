import { useState } from "react";
import { useApp, useData } from "../context";
import { fetchOwnedJobs, fetchProjects } from "../api/acting";
import { SubmitPanel } from "../components/SubmitPanel";
import { Badge, ErrorNote, Panel, stateTone } from "../components/common";
import { JobDrawer } from "../components/JobDrawer";
import { sessionCountdown } from "../lib/countdown";
import type { Job } from "../api/queries";
import { formatRelative, formatTime, humanise } from "../lib/format";
import { actableProjects, defaultWhose, formFromJob, matchesSearch, ownerLabel, powersOf, type Whose } from "../lib/acting";
import type { SubmitForm } from "../lib/outlook";
import { ProjectName } from "../names";

const STATES = ["", "QUEUED", "PLACED", "RUNNING", "PREEMPTED", "SUSPENDED", "COMPLETED", "FAILED", "CANCELLED", "RESTORED"];
const CLASSES = ["", "batch", "debug", "interactive"];
const SESSIONS_SHOWN = 12;

/** A running session's time left before its cap: the cap and warnings the API serves as its SessionOpened
 * event recorded them (Job.sessionCapAt, Job.sessionWarningsAt), never an estimate. */
export function SessionCap({ session, now }: { session: Pick<Job, "id" | "sessionCapAt" | "sessionWarningsAt">; now: number }) {
  const c = sessionCountdown(session, now);
  return (
    <>
      <span className={`cap cap-${c.level}`} role="timer" data-testid={`cap-${session.id}`}> {c.level === "none" ? "cap not recorded yet (opening)" : c.label}</span>
      {(c.level === "warning" || c.level === "critical") && <Badge tone={c.level === "critical" ? "bad" : "warn"}>cap soon</Badge>}
    </>
  );
}

/** Jobs and sessions: submit and open (for those who may work), one's own by default for researchers (a toggle
 * shows all one may see), and each job's drawer with its actions. Tables turn into cards on a narrow screen. */
export function JobsScreen() {
  const { now, identity } = useApp();
  const powers = powersOf(identity);
  const [whose, setWhose] = useState<Whose>(defaultWhose(identity.role));
  const [state, setState] = useState("");
  const [cls, setCls] = useState("");
  const [search, setSearch] = useState("");
  const [open, setOpen] = useState<string | null>(null);
  const [prefill, setPrefill] = useState<{ form: SubmitForm; nonce: number } | null>(null);
  const { data, error, reload } = useData(() => fetchOwnedJobs({ whose, state: state || undefined, jobClass: cls || undefined }, 500), [whose, state, cls]);
  const sessionsData = useData(() => fetchOwnedJobs({ whose, sessions: true }, 100), [whose]);
  const projects = useData(() => (powers.work ? fetchProjects() : Promise.resolve([])), [powers.work]);
  const myProjects = actableProjects(projects.data ?? [], powers);
  const jobs = (data ?? []).filter((j) => matchesSearch(j, search));
  // sessions still open or restorable (a restored one lives on as its successor), newest first
  const allSessions = (sessionsData.data ?? []).filter((j) => matchesSearch(j, search) && j.state !== "RESTORED");
  const sessions = allSessions.slice(0, SESSIONS_SHOWN);
  const mine = whose === "mine";
  const onSubmitted = () => {
    reload();
    sessionsData.reload();
  };
  return (
    <>
      {powers.work && <SubmitPanel projects={myProjects} onSubmitted={onSubmitted} prefill={prefill} />}
      <div className="toolbar" role="group" aria-label="Which jobs">
        <fieldset className="whose" data-testid="whose">
          <legend className="sr-only">Show</legend>
          <label className="inline"><input type="radio" name="whose" value="mine" checked={mine} onChange={() => setWhose("mine")} /> My jobs and sessions</label>
          <label className="inline"><input type="radio" name="whose" value="all" checked={!mine} onChange={() => setWhose("all")} /> All I may see</label>
        </fieldset>
        <label className="inline search">Search <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="id, project (name or id), command, owner" data-testid="jobs-search" /></label>
      </div>
      <Panel title={mine ? "My sessions" : "Sessions"} id="sessions">
        <ErrorNote error={sessionsData.error} />
        {sessions.length ? (
          <ul className="sessions" data-testid="sessions-list">
            {sessions.map((s) => {
              const c = sessionCountdown(s, now);
              const running = s.state === "RUNNING";
              return (
                <li key={s.id} className={`session-card cap-${running ? c.level : "none"}`}>
                  <button type="button" className="link" onClick={() => setOpen(s.id)} aria-haspopup="dialog">{s.id}</button>
                  <span> · <ProjectName id={s.project} /> · {s.gpus} GPU{s.gpus === 1 ? "" : "s"}{!mine ? ` · ${ownerLabel(s.owner)}` : ""} · </span>
                  <Badge tone={stateTone(s.state)}>{humanise(s.state)}</Badge>
                  {running && <SessionCap session={s} now={now} />}
                </li>
              );
            })}
          </ul>
        ) : null}
        {allSessions.length > sessions.length && <p className="muted small">The newest {sessions.length} of {allSessions.length}; the others are in the table below (class: interactive).</p>}
        {!allSessions.length && sessionsData.data ? <p className="muted" data-testid="sessions-empty">{mine ? "You have no session." : "No session."}{powers.work ? " Open one above (kind: interactive session)." : ""}</p> : null}
        <p className="note small" role="note">Each cap is the one the session's SessionOpened event recorded; its drawer shows the warnings, and closes or restores it.</p>
      </Panel>
      <Panel title={mine ? "My jobs" : "Jobs and sessions"} id="jobs" actions={
        <div className="filters" role="group" aria-label="Filters">
          <label className="inline">State <select value={state} onChange={(e) => setState(e.target.value)}>{STATES.map((s) => <option key={s} value={s}>{s ? humanise(s) : "any"}</option>)}</select></label>
          <label className="inline">Class <select value={cls} onChange={(e) => setCls(e.target.value)}>{CLASSES.map((s) => <option key={s} value={s}>{s || "any"}</option>)}</select></label>
        </div>}>
        <ErrorNote error={error} />
        <table className="data cards" data-testid="jobs-table">
          <caption className="sr-only">Jobs, newest first; open one for its history, evidence and actions (cancel; for sessions close and restore)</caption>
          <thead><tr><th scope="col">job</th><th scope="col">class</th><th scope="col">project</th><th scope="col" className="p3">owner</th><th scope="col">state</th><th scope="col" className="num">GPUs</th><th scope="col" className="p2">submitted</th><th scope="col">protection ends</th><th scope="col" className="num p3">attempt</th></tr></thead>
          <tbody>
            {jobs.map((j) => {
              const prot = j.protectedUntil;
              return (
                <tr key={j.id}>
                  <th scope="row" data-label="job"><button type="button" className="link" onClick={() => setOpen(j.id)} aria-haspopup="dialog">{j.id}</button></th>
                  <td data-label="class">{j.jobClass}</td>
                  <td data-label="project"><ProjectName id={j.project} /></td>
                  <td data-label="owner" className="p3">{ownerLabel(j.owner)}</td>
                  <td data-label="state"><Badge tone={stateTone(j.state)}>{humanise(j.state)}</Badge></td>
                  <td data-label="GPUs" className="num">{j.gpus}</td>
                  <td data-label="submitted" className="p2">{formatTime(j.submittedAt)}</td>
                  <td data-label="protection ends">{j.state !== "RUNNING" ? "—" : !j.funded ? "none (unfunded)" : prot ? (prot > now ? formatRelative(prot, now) : "ended (preemptible)") : "—"}</td>
                  <td data-label="attempt" className="num p3">{j.attempt}</td>
                </tr>
              );
            })}
            {data && !jobs.length && <tr><td colSpan={9} className="muted">{mine && !search && !state && !cls ? "You have no jobs yet." : "No jobs match."}</td></tr>}
          </tbody>
        </table>
        <p className="note small" role="note" data-testid="jobs-protection-note">Protection ends when the job's start recorded it (unfunded work is preemptible at once); a job's drawer shows its checkpoints and preemptions.</p>
      </Panel>
      {open && <JobDrawer jobId={open} onClose={() => setOpen(null)} onSubmitAgain={powers.work ? (job) => {
        setOpen(null);
        setPrefill((p) => ({ form: formFromJob(job), nonce: (p?.nonce ?? 0) + 1 }));
      } : undefined} />}
    </>
  );
}
