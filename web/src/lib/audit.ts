// The audit stream as the Audit screen reads it: the filter typed in the screen, the API's filter for the
// next page, the resumable cursor of a filter, and who did what (the event's metadata.actor).

import { person } from "../auth/person";
import type { EventFilter as ApiEventFilter } from "../api/generated";

export interface EventFilter {
  stream?: string;
  type?: string;
  actor?: string;
  since?: number;
  until?: number;
}

export interface AuditEventLike {
  position: number;
  streamId: string;
  type: string;
  recordedAt: number;
  metadata: unknown;
}

/** Where the last read of a filter stopped: its cursor, the events read so far and the time it read from. */
export interface Cursor<E = AuditEventLike> {
  after: string | undefined;
  events: E[];
  since: number | undefined;
}

export function actorOf(e: { metadata: unknown }): string {
  const m = e.metadata && typeof e.metadata === "object" ? (e.metadata as Record<string, unknown>) : {};
  return person(m.actor, m.actor_name);
}

export function applyFilter<E extends AuditEventLike>(events: E[], f: EventFilter): E[] {
  return events.filter(
    (e) =>
      (!f.stream || e.streamId.includes(f.stream)) &&
      (!f.type || e.type === f.type) &&
      (!f.actor || actorOf(e).includes(f.actor)) &&
      (f.since === undefined || e.recordedAt >= f.since) &&
      (f.until === undefined || e.recordedAt <= f.until),
  );
}

/** The cache key of a filter and where to go on from: the cached cursor, or a fresh one when there is none or
 * the filter now reaches more than a minute further back than the cached read. */
export function cursorFor<E>(cache: Map<string, Cursor<E>>, f: EventFilter): { key: string; cursor: Cursor<E> } {
  const key = JSON.stringify([f.stream || null, f.type || null, f.actor || null, f.since !== undefined, f.until ?? null]);
  const cached = cache.get(key);
  const fresh = !cached || (f.since !== undefined && (cached.since ?? 0) > f.since + 60);
  return { key, cursor: fresh || !cached ? { after: undefined, events: [], since: f.since } : cached };
}

/** The API's EventFilter for a read from `cursor` (the stream as a prefix, the type as a list of one). */
export function apiFilter(f: EventFilter, cursor: { since: number | undefined }): ApiEventFilter {
  return {
    streamPrefix: f.stream || null, types: f.type ? [f.type] : null, actor: f.actor || null,
    since: cursor.since ?? null, until: f.until ?? null,
  };
}
