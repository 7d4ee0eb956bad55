// Blocks and nodes from the nodes' topology paths, with their occupancy (Node.usedGpus: Steward's jobs;
// Node.foreignGpus: work another scheduler placed, under Slurm or Kubernetes; Node.freeGpus: what a job could
// be placed on now, as the server reads a node: 0 on a draining, retiring or unhealthy node). The fragmentation
// figure is the server's, per cluster (ClusterOccupancy.fragmentedGpus, ADR 0091; lib/clusters.ts words it).

export interface NodeRow {
  id: string;
  gpus: number;
  path: string[];
  state: string;
  usedGpus: number;
  freeGpus: number;
  foreignGpus?: number;
}

export interface NodeView<N extends NodeRow = NodeRow> {
  node: N;
  id: string;
  gpus: number;
  path: string[];
  state: string;
  used: number;
  /** GPUs held by work another scheduler placed (busy for Steward, never preempted). */
  foreign: number;
  free: number;
  block: string;
}

export interface BlockView<N extends NodeRow = NodeRow> {
  name: string;
  nodes: NodeView<N>[];
  gpus: number;
  used: number;
  foreign: number;
  free: number;
}

/** The block of a node: its path without the last element ("zone/spine/block"). */
export function blockOf(path: string[]): string {
  return path.length > 1 ? path.slice(0, -1).join("/") : "(no block)";
}

export function blocks<N extends NodeRow>(nodes: N[]): BlockView<N>[] {
  const byBlock = new Map<string, NodeView<N>[]>();
  for (const n of nodes) {
    const used = Math.min(n.gpus, n.usedGpus);
    const foreign = Math.min(n.gpus - used, Math.max(0, n.foreignGpus ?? 0));
    const view: NodeView<N> = { node: n, id: n.id, gpus: n.gpus, path: n.path, state: n.state, used, foreign, free: n.freeGpus, block: blockOf(n.path) };
    (byBlock.get(view.block) ?? byBlock.set(view.block, []).get(view.block)!).push(view);
  }
  return [...byBlock.entries()]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([name, list]) => {
      list.sort((a, b) => a.id.localeCompare(b.id, undefined, { numeric: true }));
      const sum = (f: (n: NodeView<N>) => number) => list.reduce((s, n) => s + f(n), 0);
      return { name, nodes: list, gpus: sum((n) => n.gpus), used: sum((n) => n.used), foreign: sum((n) => n.foreign), free: sum((n) => n.free) };
    });
}
