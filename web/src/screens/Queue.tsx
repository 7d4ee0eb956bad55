import { useState } from "react";
import { useApp, useData } from "../context";
import { fetchJobs, fetchQueue, type QueueEntry } from "../api/queries";
import { ErrorNote, Missing, Panel, Badge, stateTone } from "../components/common";
import { JobDrawer } from "../components/JobDrawer";
import { rankBySubmitOrder } from "../lib/queue";
import { formatDuration, humanise } from "../lib/format";

export function QueueScreen() {
  const { schema, now } = useApp();
  const [open, setOpen] = useState<string | null>(null);
  const [project, setProject] = useState("");
  const { data, error } = useData(async (): Promise<QueueEntry[]> => {
    const ranked = await fetchQueue(schema);
    if (ranked) return ranked;
    const jobs = await fetchJobs(schema, {}, 1000);
    return rankBySubmitOrder(jobs).map((r) => ({ ...r, reasonCode: r.job.reasonCode ?? null, blocking: null, ranked: false }));
  }, [schema]);
  const rows = (data ?? []).filter((e) => !project || e.job.project.includes(project));
  return (
    <Panel title="Waiting jobs" id="queue" actions={
      <label className="inline">Project <input value={project} onChange={(e) => setProject(e.target.value)} placeholder="filter" size={10} /></label>}>
      <ErrorNote error={error} />
      {data && !data.some((e) => e.ranked) && (
        <Missing fields={["Query.queue: [QueueEntry{job position positionInProject reasonCode blockingGpus blockedBy}]"]}>
          shown in submit order; the fair-share order, reason codes and what blocks each job come from the API
        </Missing>
      )}
      <table className="data" data-testid="queue-table">
        <caption className="sr-only">Waiting jobs, most urgent first; open a job for why it waits</caption>
        <thead><tr><th scope="col">#</th><th scope="col">in project</th><th scope="col">job</th><th scope="col">project</th><th scope="col">GPUs</th><th scope="col">state</th><th scope="col">waiting</th><th scope="col">reason</th><th scope="col">blocked by</th></tr></thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.job.id || `pos-${e.position}`}>
              <td className="num">{e.position}</td>
              <td className="num">{e.positionInProject}</td>
              <th scope="row">{e.job.id ? <button type="button" className="link" onClick={() => setOpen(e.job.id)} aria-haspopup="dialog">{e.job.id}</button> : <span className="muted">another tenant's job</span>}</th>
              <td>{e.job.project}</td>
              <td className="num">{e.job.id ? e.job.gpus : "—"}</td>
              <td><Badge tone={stateTone(e.job.state)}>{humanise(e.job.state)}</Badge></td>
              <td className="num">{e.job.id ? formatDuration(now - e.job.submittedAt) : "—"}</td>
              <td>{e.reasonCode ? <code title={e.text ?? undefined}>{e.reasonCode}</code> : <span className="muted">—</span>}{e.text ? <div className="muted small">{e.text}</div> : null}</td>
              <td>{e.blocking ?? <span className="muted">—</span>}</td>
            </tr>
          ))}
          {data && !rows.length && <tr><td colSpan={9} className="muted">Nothing is waiting.</td></tr>}
        </tbody>
      </table>
      {open && <JobDrawer jobId={open} onClose={() => setOpen(null)} />}
    </Panel>
  );
}
