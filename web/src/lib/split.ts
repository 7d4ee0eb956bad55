// The tree's figures split by cluster and GPU model (ADR 0062), as the API serves them (Allocation.split, in
// weighted GPU-seconds). No figure is computed here but sums: the rows per (cluster, model) come from the
// server, and the totals by cluster or by model add them up.

export interface PlaceRow {
  cluster: string;
  gpuModel: string;
  owed: number; // weighted GPU-seconds
  delivered: number;
  demand: number;
}

export interface SplitRow {
  key: string; // the cluster, the model, or "cluster · model"
  owed: number;
  delivered: number;
  ratio: number | null; // delivered ÷ owed, as it is (null: nothing owed)
}

/** What a place is called: an empty cluster or model is demand no registered node could take yet. */
export function placeLabel(cluster: string, gpuModel: string): string {
  if (!cluster && !gpuModel) return "no admissible node yet";
  return `${cluster || "?"} · ${gpuModel || "?"}`;
}

/** The split summed by cluster, by GPU model, or kept per (cluster, model); largest owed first, then by name. */
export function splitBy(rows: PlaceRow[], by: "cluster" | "model" | "place"): SplitRow[] {
  const sums = new Map<string, { owed: number; delivered: number }>();
  for (const r of rows) {
    const key = by === "cluster" ? (r.cluster || "—") : by === "model" ? (r.gpuModel || "—") : placeLabel(r.cluster, r.gpuModel);
    const s = sums.get(key) ?? { owed: 0, delivered: 0 };
    s.owed += r.owed;
    s.delivered += r.delivered;
    sums.set(key, s);
  }
  return [...sums.entries()]
    .map(([key, s]) => ({ key, owed: s.owed, delivered: s.delivered, ratio: s.owed > 0 ? s.delivered / s.owed : null }))
    .sort((a, b) => b.owed - a.owed || b.delivered - a.delivered || a.key.localeCompare(b.key));
}

/** Whether a split says more than the totals do: more than one cluster or model. */
export function isSplit(rows: PlaceRow[]): boolean {
  return new Set(rows.map((r) => `${r.cluster}\u0000${r.gpuModel}`)).size > 1;
}
