/** Allocations pinned to a cluster (ADR 0067): what the tree screen shows and sends. A pin is a cluster's name
 * (the server checks it names a registered cluster and says which are); empty means unpinned. The pin holds for
 * the allocation's subtree, so a child of a pinned node shows its ancestor's cluster as inherited. */

export interface PinnedRow {
  name: string;
  pin?: string | null;
  pinnedTo?: string | null;
}

/** Where an allocation's jobs run, in words: its own pin, an ancestor's (inherited), or any cluster. */
export function pinText(row: PinnedRow): string {
  if (row.pin) return row.pin;
  if (row.pinnedTo) return `${row.pinnedTo} (inherited)`;
  return "any cluster";
}

/** The pins a manager changed in the editor: (child, cluster or null to unpin), only those that differ. */
export function pinChanges(rows: PinnedRow[], texts: Record<string, string>): { child: string; cluster: string | null }[] {
  return rows
    .map((r) => ({ child: r.name, now: r.pin ?? "", next: (texts[r.name] ?? r.pin ?? "").trim() }))
    .filter((c) => c.next !== c.now)
    .map((c) => ({ child: c.child, cluster: c.next || null }));
}

const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Why a typed cluster name cannot be sent (null when it can, or when empty: unpinned). */
export function pinProblem(text: string): string | null {
  const t = text.trim();
  if (!t || CLUSTER_NAME.test(t)) return null;
  return "a cluster name is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit";
}
