import { useState } from "react";
import { useApp, useData } from "../context";
import { fetchJobs } from "../api/queries";
import { has } from "../api/schema";
import { CAN } from "../api/auth";
import { SubmitPanel } from "../components/SubmitPanel";
import { Badge, ErrorNote, Missing, Panel, stateTone } from "../components/common";
import { JobDrawer } from "../components/JobDrawer";
import { countdown, protectionEndsAt, sessionCapEndsAt } from "../lib/countdown";
import { formatRelative, formatTime, humanise } from "../lib/format";

const STATES = ["", "QUEUED", "PLACED", "RUNNING", "PREEMPTED", "COMPLETED", "FAILED", "CANCELLED"];
const CLASSES = ["", "batch", "debug", "interactive"];

export function JobsScreen() {
  const { schema, now, identity } = useApp();
  const [state, setState] = useState("");
  const [cls, setCls] = useState("");
  const [project, setProject] = useState("");
  const [open, setOpen] = useState<string | null>(null);
  const { data, error, reload } = useData(() => fetchJobs(schema, { state: state || undefined, project: project || undefined }, 500), [schema, state, project]);
  const canSubmit = CAN.submitJobs(identity.role) && has(schema, "Query.submitOutlook");
  const myProjects = (identity.scope ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  const jobs = (data ?? []).filter((j) => !cls || (j.jobClass ?? "batch") === cls);
  const sessions = (data ?? []).filter((j) => j.jobClass === "interactive" && j.state === "RUNNING");
  return (
    <>
      {canSubmit && <SubmitPanel projects={myProjects} onSubmitted={reload} />}
      {sessions.length > 0 && (
        <Panel title="Running sessions" id="sessions">
          <ul className="sessions">
            {sessions.map((s) => {
              const c = countdown(sessionCapEndsAt(s), now);
              return (
                <li key={s.id} className={`cap-${c.level}`}>
                  <button type="button" className="link" onClick={() => setOpen(s.id)}>{s.id}</button> · {s.project} · {s.gpus} GPU
                  <span className={`cap cap-${c.level}`} role="timer" data-testid={`cap-${s.id}`}> {c.label}</span>
                  {(c.level === "warning" || c.level === "critical") && <Badge tone={c.level === "critical" ? "bad" : "warn"}>cap soon</Badge>}
                </li>
              );
            })}
          </ul>
          {!has(schema, "Job.capEndsAt") && !has(schema, "Job.sessionCapAt") && <Missing fields={["Job.sessionCapAt: Float"]}>cap assumed start + 8 h</Missing>}
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
          <thead><tr><th scope="col">job</th><th scope="col">class</th><th scope="col">project</th><th scope="col">state</th><th scope="col">GPUs</th><th scope="col">submitted</th><th scope="col">protection ends</th><th scope="col">attempt</th><th scope="col">checkpoints</th><th scope="col">preemptions</th></tr></thead>
          <tbody>
            {jobs.map((j) => {
              const prot = protectionEndsAt(j);
              return (
                <tr key={j.id}>
                  <th scope="row"><button type="button" className="link" onClick={() => setOpen(j.id)} aria-haspopup="dialog">{j.id}</button></th>
                  <td>{j.jobClass ?? "batch"}</td>
                  <td>{j.project}</td>
                  <td><Badge tone={stateTone(j.state)}>{humanise(j.state)}</Badge></td>
                  <td className="num">{j.gpus}</td>
                  <td>{formatTime(j.submittedAt)}</td>
                  <td>{j.state === "RUNNING" && prot ? (prot > now ? formatRelative(prot, now) : "ended (preemptible)") : "—"}</td>
                  <td className="num">{j.attempt ?? 1}</td>
                  <td className="num">{j.checkpoints ? j.checkpoints.length : "—"}</td>
                  <td className="num">{j.preemptions ? j.preemptions.length : Math.max(0, (j.attempt ?? 1) - 1)}</td>
                </tr>
              );
            })}
            {data && !jobs.length && <tr><td colSpan={10} className="muted">No jobs match.</td></tr>}
          </tbody>
        </table>
        {!has(schema, "Job.checkpoints") && <Missing fields={["Job.protectedUntil: Float", "Job.lastCheckpointAt: Float", "Job.checkpoints: [Checkpoint!]", "Job.preemptions: [Preemption!]"]}>preemptions estimated from attempts; protection from start + min runtime; the job drawer lists checkpoint and preemption events</Missing>}
      </Panel>
      {open && <JobDrawer jobId={open} onClose={() => setOpen(null)} />}
    </>
  );
}
