/** The routing of a job's latest placement (issue 25, ADR 0057/0068): the `routing` evidence the scheduler
 * recorded on `JobPlaced` — where it went and why, in the scheduler's words, and the cluster it left when it
 * moved out of a room being made for it. Null when the job was never placed, or placed with one cluster and
 * no request (no routing then). */
export interface Routing {
  cluster: string;
  reason: string;
  movedFrom: string | null;
}

export function routingOf(decisions: readonly { type: string; evidence?: unknown }[]): Routing | null {
  const placed = [...decisions].reverse().find((d) => d.type === "JobPlaced");
  const ev = placed?.evidence;
  const r = ev && typeof ev === "object" ? (ev as Record<string, unknown>).routing : null;
  if (!r || typeof r !== "object") return null;
  const { cluster, reason, moved_from: movedFrom } = r as Record<string, unknown>;
  if (typeof cluster !== "string" || typeof reason !== "string") return null;
  return { cluster, reason, movedFrom: typeof movedFrom === "string" ? movedFrom : null };
}
