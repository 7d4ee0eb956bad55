import { useData } from "../context";
import { fetchNodes, fetchQueue } from "../api/queries";
import { ErrorNote, Meter, Panel } from "../components/common";
import { blocks, fragmentation } from "../lib/topology";
import { formatPercent } from "../lib/format";

export function NodesScreen() {
  const { data, error } = useData(async () => {
    const [nodes, queue] = await Promise.all([fetchNodes(), fetchQueue()]);
    return { nodes, queue };
  }, []);
  if (!data) return <><ErrorNote error={error} /><p aria-busy="true">Loading nodes…</p></>;
  const bl = blocks(data.nodes);
  // the largest gang among the waiting jobs one may see (other tenants' sizes are not shown)
  const largest = Math.max(0, ...data.queue.rows.map((r) => r.job?.gpus ?? 0));
  const frag = fragmentation(bl, largest);
  const total = bl.reduce((s, b) => s + b.gpus, 0);
  const used = bl.reduce((s, b) => s + b.used, 0);
  const foreign = bl.reduce((s, b) => s + b.foreign, 0);
  return (
    <>
      <Panel title="Cluster" id="cluster">
        <ErrorNote error={error} />
        <p className="kpis">
          <span><strong>{data.nodes.length}</strong> nodes in <strong>{bl.length}</strong> blocks</span>
          <span><strong>{used}</strong>/{total} GPUs busy ({formatPercent(total ? used / total : null, 0)})</span>
          {foreign > 0 && <span data-testid="foreign"><strong>{foreign}</strong> held by other schedulers</span>}
          <span data-testid="fragmentation"><strong>{frag.unusable}</strong> of {frag.free} free GPUs unusable by the largest waiting gang ({largest || "none"} GPUs)</span>
        </p>
        <p className="legend"><span className="sw funded" /> busy <span className="sw foreign" /> other schedulers' work <span className="sw idle" /> free</p>
      </Panel>
      <div className="blocks">
        {bl.map((b) => (
          <section key={b.name} className="panel block" aria-labelledby={`blk-${b.name}`}>
            <h2 id={`blk-${b.name}`}>{b.name} <span className="muted">{b.used}/{b.gpus} busy{b.foreign ? ` · ${b.foreign} foreign` : ""} · {b.free} free</span></h2>
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
        ))}
      </div>
    </>
  );
}
