import { useState } from "react";
import { useApp, useData } from "../context";
import { fetchJobs, type Job } from "../api/queries";
import { CAN } from "../api/auth";
import { SubmitPanel } from "../components/SubmitPanel";
import { Badge, ErrorNote, Panel, stateTone } from "../components/common";
import { JobDrawer } from "../components/JobDrawer";
import { sessionCountdown } from "../lib/countdown";
import { formatRelative, formatTime, humanise } from "../lib/format";

const STATES = ["", "QUEUED", "PLACED", "RUNNING", "PREEMPTED", "COMPLETED", "FAILED", "CANCELLED"];
const CLASSES = ["", "batch", "debug", "interactive"];

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

export function JobsScreen() {
  const { now, identity } = useApp();
  const [state, setState] = useState("");
  const [cls, setCls] = useState("");
  const [project, setProject] = useState("");
  const [open, setOpen] = useState<string | null>(null);
  const { data, error, reload } = useData(() => fetchJobs({ state: state || undefined, project: project || undefined }, 500), [state, project]);
  const canSubmit = CAN.submitJobs(identity.role);
  const myProjects = (identity.scope ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  const jobs = (data ?? []).filter((j) => !cls || j.jobClass === cls);
  const sessions = (data ?? []).filter((j) => j.jobClass === "interactive" && j.state === "RUNNING");
  return (
    <>
      {canSubmit && <SubmitPanel projects={myProjects} onSubmitted={reload} />}
      {sessions.length > 0 && (
        <Panel title="Running sessions" id="sessions">
          <ul className="sessions">
            {sessions.map((s) => {
              const level = sessionCountdown(s, now).level;
              return (
                <li key={s.id} className={`cap-${level}`}>
                  <button type="button" className="link" onClick={() => setOpen(s.id)}>{s.id}</button> · {s.project} · {s.gpus} GPU
                  <SessionCap session={s} now={now} />
                </li>
              );
            })}
          </ul>
          <p className="note small" role="note">Each cap is the one the session's SessionOpened event recorded; its drawer shows the warnings.</p>
        </Panel>
      )}
      <Panel title="Jobs and sessions" id="jobs" actions={
        <div className="filters" role="group" aria-label="Filters">
          <label className="inline">State <select value={state} onChange={(e) => setState(e.target.value)}>{STATES.map((s) => <option key={s} value={s}>{s ? humanise(s) : "any"}</option>)}</select></label>
          <label className="inline">Class <select value={cls} onChange={(e) => setCls(e.target.value)}>{CLASSES.map((s) => <option key={s} value={s}>{s || "any"}</option>)}</select></label>
          <label className="inline">Project <input value={project} onChange={(e) => setProject(e.target.value)} size={10} /></label>
        </div>}>
        <ErrorNote error={error} />
        <table className="data" data-testid="jobs-table">
          <caption className="sr-only">Jobs, newest first; open one for its history, evidence and (for sessions) restore</caption>
          <thead><tr><th scope="col">job</th><th scope="col">class</th><th scope="col">project</th><th scope="col">state</th><th scope="col">GPUs</th><th scope="col">submitted</th><th scope="col">protection ends</th><th scope="col">attempt</th></tr></thead>
          <tbody>
            {jobs.map((j) => {
              const prot = j.protectedUntil;
              return (
                <tr key={j.id}>
                  <th scope="row"><button type="button" className="link" onClick={() => setOpen(j.id)} aria-haspopup="dialog">{j.id}</button></th>
                  <td>{j.jobClass}</td>
                  <td>{j.project}</td>
                  <td><Badge tone={stateTone(j.state)}>{humanise(j.state)}</Badge></td>
                  <td className="num">{j.gpus}</td>
                  <td>{formatTime(j.submittedAt)}</td>
                  <td>{j.state !== "RUNNING" ? "—" : !j.funded ? "none (unfunded)" : prot ? (prot > now ? formatRelative(prot, now) : "ended (preemptible)") : "—"}</td>
                  <td className="num">{j.attempt}</td>
                </tr>
              );
            })}
            {data && !jobs.length && <tr><td colSpan={8} className="muted">No jobs match.</td></tr>}
          </tbody>
        </table>
        <p className="note small" role="note" data-testid="jobs-protection-note">Protection ends when the job's start recorded it (unfunded work is preemptible at once); a job's drawer shows its checkpoints and preemptions.</p>
      </Panel>
      {open && <JobDrawer jobId={open} onClose={() => setOpen(null)} />}
    </>
  );
}
