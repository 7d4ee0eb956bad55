import { useApp, useData } from "../context";
import { fetchJobs, fetchNodes } from "../api/queries";
import { has } from "../api/schema";
import { ErrorNote, Meter, Missing, Panel } from "../components/common";
import { blocks, fragmentation, usedByNode } from "../lib/topology";
import { formatPercent } from "../lib/format";

export function NodesScreen() {
  const { schema } = useApp();
  const { data, error } = useData(async () => {
    const [nodes, jobs] = await Promise.all([fetchNodes(schema), fetchJobs(schema, {}, 1000)]);
    return { nodes, jobs };
  }, [schema]);
  if (!data) return <><ErrorNote error={error} /><p aria-busy="true">Loading nodes…</p></>;
  const bl = blocks(data.nodes, usedByNode(data.jobs));
  const largest = Math.max(0, ...data.jobs.filter((j) => ["QUEUED", "PREEMPTED"].includes(j.state)).map((j) => j.gpus));
  const frag = fragmentation(bl, largest);
  const total = bl.reduce((s, b) => s + b.gpus, 0);
  const used = bl.reduce((s, b) => s + b.used, 0);
  const reserved = bl.reduce((s, b) => s + b.reserved, 0);
  return (
    <>
      <Panel title="Cluster" id="cluster">
        <ErrorNote error={error} />
        <p className="kpis">
          <span><strong>{data.nodes.length}</strong> nodes in <strong>{bl.length}</strong> blocks</span>
          <span><strong>{used}</strong>/{total} GPUs busy ({formatPercent(total ? used / total : null, 0)})</span>
          <span><strong>{reserved}</strong> reserved</span>
          <span data-testid="fragmentation"><strong>{frag.unusable}</strong> of {frag.free} free GPUs unusable by the largest waiting gang ({largest || "none"} GPUs)</span>
        </p>
        <p className="legend"><span className="sw funded" /> busy <span className="sw reserved" /> reserved <span className="sw idle" /> free</p>
        {!has(schema, "Node.usedGpus") && <Missing fields={["Node.usedGpus", "Node.reservedGpus", "Node.reservations", "Query.fragmentation"]}>occupancy from running jobs' placements; reservations not shown; fragmentation computed in the browser</Missing>}
      </Panel>
      <div className="blocks">
        {bl.map((b) => (
          <section key={b.name} className="panel block" aria-labelledby={`blk-${b.name}`}>
            <h2 id={`blk-${b.name}`}>{b.name} <span className="muted">{b.used}/{b.gpus} busy · {b.free} free</span></h2>
            <ul className="nodes">
              {b.nodes.map((n) => (
                <li key={n.id} className={`node node-${(n.state ?? "").toLowerCase()}`} tabIndex={0}
                  aria-label={`${n.id}: ${n.used} of ${n.gpus} GPUs busy, ${n.reserved} reserved, ${n.free} free${n.state ? `, ${n.state}` : ""}`}>
                  <span className="node-id">{n.path.at(-1) ?? n.id}</span>
                  <Meter total={n.gpus} label={`${n.used}/${n.gpus}`} parts={[{ name: "used", value: n.used, cls: "funded" }, { name: "reserved", value: n.reserved, cls: "reserved" }]} />
                  <span className="node-nums">{n.used}/{n.gpus}</span>
                </li>
              ))}
            </ul>
          </section>
        ))}
      </div>
    </>
  );
}
