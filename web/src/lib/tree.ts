// The allocation tree from the API's flat list (name, parent, share), with entitlements and who may edit.

export const ROOT = "cluster";

export interface AllocationRow {
  name: string;
  displayName?: string | null; // what people call it (ADR 0055); its id when none is set
  parent: string;
  share: number;
  entitlement?: number | null;
  usageInWindow?: number | null; // GPU-seconds
  entitledInWindow?: number | null; // GPU-seconds
  owed?: number | null; // GPU-seconds over `window`
  delivered?: number | null;
  deliveredOverOwed?: number | null; // as it is: above 1 is over-delivery
  window?: string | null; // the window in words ("last 7 days")
  windowEnd?: number | null; // the time the window's figures run to (epoch seconds)
  burn?: number | null;
  debugQuotaGpus?: import("./outlook").DebugQuota | null;
}

export interface TreeNode extends AllocationRow {
  depth: number;
  children: TreeNode[];
  entitlement: number;
}

export function entitlements(rows: AllocationRow[]): Map<string, number> {
  const byName = new Map(rows.map((r) => [r.name, r]));
  const memo = new Map<string, number>();
  const ent = (name: string, seen: Set<string>): number => {
    if (memo.has(name)) return memo.get(name)!;
    const r = byName.get(name);
    if (!r || seen.has(name)) return 1;
    seen.add(name);
    const v = r.share * (byName.has(r.parent) ? ent(r.parent, seen) : 1);
    memo.set(name, v);
    return v;
  };
  for (const r of rows) ent(r.name, new Set());
  return memo;
}

/** Roots are the children of the cluster (or of any parent that is not itself a node). */
export function buildTree(rows: AllocationRow[]): TreeNode[] {
  const ents = entitlements(rows);
  const names = new Set(rows.map((r) => r.name));
  const nodes = new Map<string, TreeNode>(
    rows.map((r) => [r.name, { ...r, depth: 0, children: [], entitlement: r.entitlement ?? ents.get(r.name) ?? 0 }]),
  );
  const roots: TreeNode[] = [];
  for (const n of nodes.values()) {
    if (names.has(n.parent) && n.parent !== n.name) nodes.get(n.parent)!.children.push(n);
    else roots.push(n);
  }
  const sortRec = (list: TreeNode[], depth: number) => {
    list.sort((a, b) => b.share - a.share || a.name.localeCompare(b.name));
    for (const n of list) {
      n.depth = depth;
      sortRec(n.children, depth + 1);
    }
  };
  sortRec(roots, 0);
  return roots;
}

export function flatten(roots: TreeNode[]): TreeNode[] {
  const out: TreeNode[] = [];
  const walk = (list: TreeNode[]) => {
    for (const n of list) {
      out.push(n);
      walk(n.children);
    }
  };
  walk(roots);
  return out;
}

/** The parents whose children this viewer may re-share: admin everywhere, a manager inside their subtree. */
export function editableParents(rows: AllocationRow[], role: string, scope: string | null): string[] {
  if (role !== "admin" && role !== "manager") return [];
  const parents = new Set(rows.map((r) => r.parent));
  const all = [...parents].sort((a, b) => (a === ROOT ? -1 : b === ROOT ? 1 : a.localeCompare(b)));
  if (role === "admin" || !scope || scope === ROOT) return all;
  const byName = new Map(rows.map((r) => [r.name, r]));
  const within = (name: string): boolean => {
    let cur: string | undefined = name;
    for (let i = 0; cur && i < 16; i++) {
      if (cur === scope) return true;
      cur = byName.get(cur)?.parent;
    }
    return false;
  };
  return all.filter(within);
}

export function childrenOf(rows: AllocationRow[], parent: string): AllocationRow[] {
  return rows.filter((r) => r.parent === parent).sort((a, b) => a.name.localeCompare(b.name));
}

/** Replay AllocationsSet events (payload {parent, shares}) up to a time: the tree as it was then. */
export function treeFromEvents(
  events: { type: string; recordedAt: number; payload: unknown }[],
  until: number,
): AllocationRow[] {
  const rows = new Map<string, AllocationRow>();
  for (const e of [...events].sort((a, b) => a.recordedAt - b.recordedAt)) {
    if (e.recordedAt > until) break;
    if (e.type !== "AllocationsSet") continue;
    const p = e.payload as { parent?: string; shares?: Record<string, number> };
    if (!p.parent || !p.shares) continue;
    for (const [child, share] of Object.entries(p.shares)) rows.set(child, { name: child, parent: p.parent, share });
  }
  return [...rows.values()];
}
