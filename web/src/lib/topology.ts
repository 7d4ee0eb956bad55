// Blocks and nodes from the nodes' topology paths, with occupancy from running jobs' assignments, and the
// fragmentation figure: free GPUs that the largest waiting gang cannot use.

export interface NodeRow {
  id: string;
  gpus: number;
  gpuModel?: string;
  path: string[];
  state?: string;
  usedGpus?: number | null;
  reservedGpus?: number | null;
}

export interface NodeView extends NodeRow {
  used: number;
  reserved: number;
  free: number;
  block: string;
}

export interface BlockView {
  name: string;
  nodes: NodeView[];
  gpus: number;
  used: number;
  reserved: number;
  free: number;
}

/** The block of a node: its path without the last element ("zone/spine/block"). */
export function blockOf(path: string[]): string {
  return path.length > 1 ? path.slice(0, -1).join("/") : "(no block)";
}

export function usedByNode(jobs: { state: string; assignments?: unknown }[]): Map<string, number> {
  const used = new Map<string, number>();
  for (const j of jobs) {
    if (!["RUNNING", "PLACED"].includes(j.state) || !j.assignments || typeof j.assignments !== "object") continue;
    for (const [node, gpus] of Object.entries(j.assignments as Record<string, unknown>)) {
      used.set(node, (used.get(node) ?? 0) + (Array.isArray(gpus) ? gpus.length : Number(gpus) || 0));
    }
  }
  return used;
}

export function blocks(nodes: NodeRow[], used: Map<string, number>): BlockView[] {
  const byBlock = new Map<string, NodeView[]>();
  for (const n of nodes) {
    const u = n.usedGpus ?? used.get(n.id) ?? 0;
    const r = n.reservedGpus ?? 0;
    const view: NodeView = { ...n, used: u, reserved: r, free: Math.max(0, n.gpus - u - r), block: blockOf(n.path) };
    (byBlock.get(view.block) ?? byBlock.set(view.block, []).get(view.block)!).push(view);
  }
  return [...byBlock.entries()]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([name, list]) => {
      list.sort((a, b) => a.id.localeCompare(b.id, undefined, { numeric: true }));
      const sum = (f: (n: NodeView) => number) => list.reduce((s, n) => s + f(n), 0);
      return { name, nodes: list, gpus: sum((n) => n.gpus), used: sum((n) => n.used), reserved: sum((n) => n.reserved), free: sum((n) => n.free) };
    });
}

/**
 * Free GPUs the largest waiting gang cannot use. A gang that fits one node can use a node's free GPUs
 * only where the node has at least that many free; a larger gang needs whole free nodes inside one block
 * adding up to its size. No waiting gang: nothing is fragmented.
 */
export function fragmentation(bl: BlockView[], largestWaitingGang: number): { unusable: number; free: number } {
  const free = bl.reduce((s, b) => s + b.free, 0);
  if (largestWaitingGang <= 0) return { unusable: 0, free };
  const maxNode = Math.max(0, ...bl.flatMap((b) => b.nodes.map((n) => n.gpus)));
  let usable = 0;
  if (largestWaitingGang <= maxNode) {
    for (const b of bl) for (const n of b.nodes) if (n.free >= largestWaitingGang) usable += n.free;
  } else {
    for (const b of bl) {
      const whole = b.nodes.filter((n) => n.free === n.gpus && n.gpus > 0).reduce((s, n) => s + n.gpus, 0);
      if (whole >= largestWaitingGang) usable += whole;
    }
  }
  return { unusable: free - usable, free };
}
