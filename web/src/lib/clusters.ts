// Clusters and GPU models (issue 25, ADR 0057) as the screens show them: the nodes grouped by cluster with each
// cluster's occupancy as the API counts it (Query.clusterOccupancy: busy, free, draining and down GPUs, in all and
// per GPU model, and its fragmentation), the queue's cluster choices, what a job accepts in words, and the weights' form. The rules live
// in the server (steward.api.clusters, steward.domain.clusters); this only groups and words them.

import type { ClusterOccupancyQuery, GpuModelsQuery } from "../api/generated";
import { type BlockView, type NodeRow, blocks } from "./topology";

export type ClusterFigures = ClusterOccupancyQuery["clusterOccupancy"][number];
export type GpuModelRow = GpuModelsQuery["gpuModels"][number];

export interface ClusterView<N extends NodeRow & { cluster: string }> {
  name: string;
  /** The API's figures for the cluster (null when the nodes list is newer than the occupancy read). */
  figures: ClusterFigures | null;
  blocks: BlockView<N>[];
  nodes: number;
}

/** The nodes grouped by their cluster, by name, each with its blocks and the API's figures for it. */
export function byCluster<N extends NodeRow & { cluster: string }>(nodes: N[], occupancy: ClusterFigures[]): ClusterView<N>[] {
  const groups = new Map<string, N[]>();
  for (const n of nodes) (groups.get(n.cluster) ?? groups.set(n.cluster, []).get(n.cluster)!).push(n);
  for (const c of occupancy) if (!groups.has(c.name)) groups.set(c.name, []);
  const figures = new Map(occupancy.map((c) => [c.name, c]));
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([name, list]) => ({ name, figures: figures.get(name) ?? null, blocks: blocks(list), nodes: list.length }));
}

type Counts = Pick<ClusterFigures, "gpus" | "busyGpus" | "freeGpus" | "drainingGpus" | "downGpus">;

/** "12/16 GPUs busy · 4 free", with draining and down only when there are some. */
export function countsText(c: Counts): string {
  const parts = [`${c.busyGpus}/${c.gpus} GPUs busy`, `${c.freeGpus} free`];
  if (c.drainingGpus) parts.push(`${c.drainingGpus} draining`);
  if (c.downGpus) parts.push(`${c.downGpus} down`);
  return parts.join(" · ");
}

type Fragmentation = Pick<ClusterFigures, "freeGpus" | "largestWaitingGang" | "fragmentedGpus">;

/** A cluster's fragmentation as the API measures it (ADR 0091: against the largest waiting gang that may run on that
 * cluster; gangs never span clusters): "2 of 3 free GPUs unusable by the largest waiting gang that may run here (8
 * GPUs)"; null while the server has not ordered the queue yet. */
export function fragmentationText(f: Fragmentation): string | null {
  if (f.largestWaitingGang == null || f.fragmentedGpus == null) return null;
  const gang = f.largestWaitingGang ? `${f.largestWaitingGang} GPUs` : "none waits";
  return `${f.fragmentedGpus} of ${f.freeGpus} free GPUs unusable by the largest waiting gang that may run here (${gang})`;
}

/** The lab's fragmentation: each cluster's unusable free GPUs (against its own largest waiting gang), summed, of all
 * free GPUs; null while any cluster's is not known. */
export function labFragmentation(clusters: Fragmentation[]): { unusable: number; free: number } | null {
  if (clusters.some((c) => c.fragmentedGpus == null)) return null;
  return { unusable: clusters.reduce((s, c) => s + (c.fragmentedGpus ?? 0), 0), free: clusters.reduce((s, c) => s + c.freeGpus, 0) };
}

/** The cluster choices of the queue: "" (all clusters) then each cluster by name. */
export function clusterChoices(occupancy: { name: string }[]): { value: string; label: string }[] {
  const names = [...new Set(occupancy.map((c) => c.name))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return [{ value: "", label: "all clusters" }, ...names.map((n) => ({ value: n, label: n }))];
}

/** What a job accepts, in words: the names, or "any" for none (the API's empty list means any). */
export function acceptsText(names: readonly string[] | null | undefined, what: "GPU model" | "cluster"): string {
  return names && names.length ? names.join(", ") : `any ${what}`;
}

/** The GPU models and clusters a submission may name: those of the registered nodes (Query.gpuModels). */
export function submitChoices(models: GpuModelRow[]): { gpuModels: string[]; clusters: string[] } {
  const sort = (xs: Iterable<string>) => [...new Set(xs)].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return { gpuModels: sort(models.map((m) => m.model)), clusters: sort(models.flatMap((m) => m.clusters)) };
}

/** Toggle one name in a chosen list, keeping the choices' order. */
export function toggled(chosen: readonly string[], name: string, order: readonly string[]): string[] {
  const next = new Set(chosen);
  if (next.has(name)) next.delete(name);
  else next.add(name);
  return order.filter((x) => next.has(x));
}

/** Who may change the weights: the API asks `operate` (Mutation.setGpuModelWeights); admins when it does not say. */
export function mayWeigh(id: { role: string; capabilities: string[] | null }): boolean {
  return id.capabilities ? id.capabilities.includes("operate") : id.role === "admin";
}

export type WeightChange = { ok: true; weights: { model: string; weight: number }[]; reason: string } | { ok: false; field: "model" | "weight" | "reason"; message: string };

/** The weights form as Mutation.setGpuModelWeights' arguments, or what to mend first. The server decides the rest
 * (and says so in its own words): a weight is budget units per GPU-hour, a finite number above 0. */
export function parseWeightChange(model: string, weight: string, reason: string): WeightChange {
  if (!model) return { ok: false, field: "model", message: "choose a GPU model" };
  const w = Number(weight);
  if (weight.trim() === "" || !Number.isFinite(w) || w <= 0) return { ok: false, field: "weight", message: "a weight above 0 (budget units per GPU-hour, e.g. 0.55)" };
  if (!reason.trim()) return { ok: false, field: "reason", message: "say why (recorded with the change)" };
  return { ok: true, weights: [{ model, weight: w }], reason: reason.trim().slice(0, 500) };
}
