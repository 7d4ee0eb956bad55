// The queue (Query.queue) as the screen lists it: one row per entry in the scheduler's order; another tenant's
// job is a position only (its id, project and size are not the viewer's to see).

import type { QueueQuery } from "../api/generated";

type Entry = QueueQuery["queue"]["entries"][number];
export type QueueJob = NonNullable<Entry["job"]>;

export interface QueueRow {
  /** null: another tenant's job, shown only as its position. */
  job: QueueJob | null;
  project: string;
  position: number;
  positionInProject: number | null;
  /** Its place among the waiting jobs that accept a cluster it accepts (with one cluster, `position`). */
  positionInClusters: number | null;
  /** With a cluster chosen: its place among the waiting jobs that may run on that cluster. */
  positionInCluster: number | null;
  reasonCode: string | null;
  text: string | null;
  /** What blocks it, in words ("8 GPUs"): the GPUs it still needs. */
  blocking: string | null;
}

export const OTHER_TENANT = "(another tenant)";

export function queueRows(entries: Entry[]): QueueRow[] {
  return entries.map((e) => ({
    job: e.mine ? e.job : null,
    project: e.mine && e.job ? e.job.project : OTHER_TENANT,
    position: e.position,
    positionInProject: e.positionInProject,
    positionInClusters: e.positionInClusters ?? null,
    positionInCluster: e.positionInCluster ?? null,
    reasonCode: e.reason,
    text: e.text,
    blocking: e.blockingGpus != null ? `${e.blockingGpus} GPUs` : null,
  }));
}
