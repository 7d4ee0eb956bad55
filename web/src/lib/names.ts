// What people call a node of the org tree (ADR 0055): the display name its parent's manager set, or its id.
// Every screen shows the name; the id stays visible beside it (commands, filters and search take ids) and a
// search matches either. Pure: the names come from the API (Query.allocations { name displayName }).

export type Names = ReadonlyMap<string, string>;

export const NO_NAMES: Names = new Map();

/** What `id` is called: its display name, or the id itself when none is recorded (or names are not loaded). */
export function nameOf(names: Names, id: string): string {
  return names.get(id) || id;
}

/** Whether `id` has a name of its own (so the id is worth showing beside it). */
export function isNamed(names: Names, id: string): boolean {
  const name = names.get(id);
  return !!name && name !== id;
}

/** `Name (id)` when the node has a name, else the id: one line of text (options, titles, messages). */
export function labelOf(names: Names, id: string): string {
  return isNamed(names, id) ? `${nameOf(names, id)} (${id})` : id;
}

/** Whether a search `query` finds `id`: in its id or its name, ignoring case and surrounding spaces. */
export function matchesName(names: Names, id: string, query: string): boolean {
  const q = query.trim().toLocaleLowerCase();
  if (!q) return true;
  return id.toLocaleLowerCase().includes(q) || nameOf(names, id).toLocaleLowerCase().includes(q);
}
