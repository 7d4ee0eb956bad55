import { useState } from "react";
import { useApp, useData } from "../context";
import { fetchClusterOccupancy, fetchQueue } from "../api/queries";
import { ErrorNote, Panel, Badge, stateTone } from "../components/common";
import { JobDrawer } from "../components/JobDrawer";
import { formatDuration, humanise } from "../lib/format";
import { matchesName } from "../lib/names";
import { clusterChoices } from "../lib/clusters";
import { ProjectName, useNames } from "../names";

export function QueueScreen() {
  const { now } = useApp();
  const [open, setOpen] = useState<string | null>(null);
  const [project, setProject] = useState("");
  const [cluster, setCluster] = useState("");
  const names = useNames();
  const { data, error } = useData(() => fetchQueue(cluster || null), [cluster]);
  const clusters = useData(fetchClusterOccupancy, []);
  const choices = clusterChoices(clusters.data ?? []);
  const rows = (data?.rows ?? []).filter((e) => matchesName(names, e.project, project));
  return (
    <Panel title="Waiting jobs" id="queue" actions={<>
      {choices.length > 2 && (
        <label className="inline">Cluster <select value={cluster} onChange={(e) => setCluster(e.target.value)} data-testid="queue-cluster">
          {choices.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
        </select></label>
      )}
      <label className="inline">Project <input value={project} onChange={(e) => setProject(e.target.value)} placeholder="name or id" size={10} /></label></>}>
      <ErrorNote error={error} />
      {cluster && <p className="muted small" data-testid="queue-cluster-note">The jobs that may run on {cluster} (the GPU models and clusters they accept, their allocation's pin), in the scheduler's order; "in {cluster}" is each one's place there.</p>}
      <table className="data" data-testid="queue-table">
        <caption className="sr-only">Waiting jobs, most urgent first; open a job for why it waits</caption>
        <thead><tr><th scope="col">#</th><th scope="col">in project</th>{cluster && <th scope="col" title={`Its place among the waiting jobs that may run on ${cluster}`}>in {cluster}</th>}<th scope="col" title="Its place among the waiting jobs that may run on a cluster it may run on">in its clusters</th><th scope="col">job</th><th scope="col">project</th><th scope="col">GPUs</th><th scope="col">state</th><th scope="col">waiting</th><th scope="col">reason</th><th scope="col">blocked by</th></tr></thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.job?.id ?? `pos-${e.position}`}>
              <td className="num">{e.position}</td>
              <td className="num">{e.positionInProject ?? "—"}</td>
              {cluster && <td className="num">{e.positionInCluster ?? "—"}</td>}
              <td className="num">{e.positionInClusters ?? "—"}</td>
              <th scope="row">{e.job ? <button type="button" className="link" onClick={() => setOpen(e.job!.id)} aria-haspopup="dialog">{e.job.id}</button> : <span className="muted">another tenant's job</span>}</th>
              <td><ProjectName id={e.project} /></td>
              <td className="num">{e.job ? e.job.gpus : "—"}</td>
              <td><Badge tone={stateTone(e.job?.state ?? "QUEUED")}>{humanise(e.job?.state ?? "QUEUED")}</Badge></td>
              <td className="num">{e.job ? formatDuration(now - e.job.submittedAt) : "—"}</td>
              <td>{e.reasonCode ? <code title={e.text ?? undefined}>{e.reasonCode}</code> : <span className="muted">—</span>}{e.text ? <div className="muted small">{e.text}</div> : null}</td>
              <td>{e.blocking ?? <span className="muted">—</span>}</td>
            </tr>
          ))}
          {data && !rows.length && <tr><td colSpan={cluster ? 11 : 10} className="muted">{cluster ? `Nothing is waiting that may run on ${cluster}.` : "Nothing is waiting."}</td></tr>}
        </tbody>
      </table>
      {open && <JobDrawer jobId={open} onClose={() => setOpen(null)} />}
    </Panel>
  );
}
