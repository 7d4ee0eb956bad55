import { useApp, useData } from "../context";
import { fetchClusterOccupancy, fetchNodes, type NodeRow } from "../api/queries";
import { ErrorNote, Meter, Panel } from "../components/common";
import { GpuModelWeights } from "../components/GpuModelWeights";
import { type BlockView, blocks } from "../lib/topology";
import { type ClusterView, byCluster, countsText, fragmentationText, labFragmentation, mayWeigh } from "../lib/clusters";
import { formatPercent } from "../lib/format";

/** One block of nodes: its occupancy and a meter per node. */
function Block({ b, prefix }: { b: BlockView<NodeRow>; prefix: string }) {
  return (
    <section className="panel block" aria-labelledby={`blk-${prefix}${b.name}`}>
      <h3 id={`blk-${prefix}${b.name}`}>{b.name} <span className="muted">{b.used}/{b.gpus} busy{b.foreign ? ` · ${b.foreign} foreign` : ""} · {b.free} free</span></h3>
      <ul className="nodes">
        {b.nodes.map((n) => (
          <li key={n.id} className={`node node-${(n.state ?? "").toLowerCase()}`} tabIndex={0}
            aria-label={`${n.id}: ${n.used} of ${n.gpus} GPUs busy, ${n.foreign ? `${n.foreign} held by other schedulers, ` : ""}${n.free} free${n.state ? `, ${n.state}` : ""}`}>
            <span className="node-id">{n.path.at(-1) ?? n.id}</span>
            <Meter total={n.gpus} label={`${n.used}/${n.gpus}${n.foreign ? ` (+${n.foreign} foreign)` : ""}`} parts={[{ name: "used", value: n.used, cls: "funded" }, { name: "foreign", value: n.foreign, cls: "foreign" }]} />
            <span className="node-nums">{n.used}{n.foreign ? `+${n.foreign}` : ""}/{n.gpus}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** One cluster (issue 25): its totals, fragmentation and GPU models as the API counts them (Query.clusterOccupancy),
 * then its blocks. Gangs never span clusters, so each cluster is its own pool, fragmented against its own largest
 * waiting gang (ADR 0091). */
export function ClusterSection({ cluster }: { cluster: ClusterView<NodeRow> }) {
  const f = cluster.figures;
  const id = `cl-${cluster.name}`;
  const frag = f ? fragmentationText(f) : null;
  return (
    <section className="cluster" aria-labelledby={id} data-testid={`cluster-${cluster.name}`}>
      <h2 id={id}>Cluster {cluster.name} <span className="muted" data-testid={`cluster-${cluster.name}-totals`}>{f ? `${cluster.nodes} nodes · ${countsText(f)} (${formatPercent(f.gpus ? f.busyGpus / f.gpus : null, 0)})` : `${cluster.nodes} nodes`}</span></h2>
      {frag && <p className="muted" data-testid={`cluster-${cluster.name}-fragmentation`}>{frag}</p>}
      {f && f.gpuModels.length > 0 && (
        <ul className="cluster-models" aria-label={`GPU models in ${cluster.name}`}>
          {f.gpuModels.map((m) => (
            <li key={m.gpuModel} data-testid={`cluster-${cluster.name}-model-${m.gpuModel}`}><strong>{m.gpuModel}</strong> · {m.nodes} node{m.nodes === 1 ? "" : "s"} · {countsText(m)}</li>
          ))}
        </ul>
      )}
      <div className="blocks">
        {cluster.blocks.map((b) => <Block key={b.name} b={b} prefix={`${cluster.name}-`} />)}
      </div>
    </section>
  );
}

export function NodesScreen() {
  const { identity } = useApp();
  const { data, error } = useData(async () => {
    const [nodes, occupancy] = await Promise.all([fetchNodes(), fetchClusterOccupancy()]);
    return { nodes, occupancy };
  }, []);
  if (!data) return <><ErrorNote error={error} /><p aria-busy="true">Loading nodes…</p></>;
  const bl = blocks(data.nodes);
  const clusters = byCluster(data.nodes, data.occupancy);
  // per cluster, against the largest waiting gang that may run there (ADR 0091), as the server measures it
  const frag = labFragmentation(data.occupancy);
  const total = bl.reduce((s, b) => s + b.gpus, 0);
  const used = bl.reduce((s, b) => s + b.used, 0);
  const foreign = bl.reduce((s, b) => s + b.foreign, 0);
  return (
    <>
      <Panel title="All clusters" id="cluster">
        <ErrorNote error={error} />
        <p className="kpis">
          <span><strong>{data.nodes.length}</strong> nodes in <strong>{clusters.length}</strong> cluster{clusters.length === 1 ? "" : "s"}, <strong>{bl.length}</strong> blocks</span>
          <span><strong>{used}</strong>/{total} GPUs busy ({formatPercent(total ? used / total : null, 0)})</span>
          {foreign > 0 && <span data-testid="foreign"><strong>{foreign}</strong> held by other schedulers</span>}
          {frag && <span data-testid="fragmentation"><strong>{frag.unusable}</strong> of {frag.free} free GPUs unusable by the largest waiting gang of their cluster</span>}
        </p>
        <p className="legend"><span className="sw funded" /> busy <span className="sw foreign" /> other schedulers' work <span className="sw idle" /> free</p>
      </Panel>
      {clusters.map((c) => <ClusterSection key={c.name} cluster={c} />)}
      <GpuModelWeights canChange={mayWeigh(identity)} />
    </>
  );
}
