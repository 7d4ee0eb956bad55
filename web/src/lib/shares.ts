// Share editing: what a manager types, checked as they type, before anything is sent. The ledger checks
// again (the children of a node sum to at most 1); this only saves a round trip and explains the rule.

export const EPSILON = 1e-9;

export type ParsedShare = { ok: true; value: number } | { ok: false; error: string };

/** "0.35", ".35", "35%" and "35 %" all mean 0.35. Empty means 0 is not assumed: it is an error. */
export function parseShare(text: string): ParsedShare {
  const t = text.trim();
  if (t === "") return { ok: false, error: "enter a share between 0 and 1" };
  const pct = t.endsWith("%");
  const num = pct ? t.slice(0, -1).trim() : t;
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(num)) return { ok: false, error: `"${t}" is not a number` };
  const value = pct ? Number(num) / 100 : Number(num);
  if (value > 1 + EPSILON) return { ok: false, error: pct ? "at most 100 %" : "at most 1 (write 35% or 0.35)" };
  return { ok: true, value: Number(value.toFixed(12)) };
}

export interface ShareRow {
  child: string;
  text: string;
  original: number;
}

export interface ShareValidation {
  ok: boolean;
  total: number; // sum of the valid shares
  remaining: number; // 1 - total (negative when over)
  rowErrors: Record<string, string>;
  sumError: string | null;
  reasonError: string | null;
  changed: { child: string; share: number }[];
}

export function validateShares(rows: ShareRow[], reason: string): ShareValidation {
  const rowErrors: Record<string, string> = {};
  let total = 0;
  const changed: { child: string; share: number }[] = [];
  for (const row of rows) {
    const parsed = parseShare(row.text);
    if (!parsed.ok) {
      rowErrors[row.child] = parsed.error;
      continue;
    }
    total += parsed.value;
    if (Math.abs(parsed.value - row.original) > EPSILON) changed.push({ child: row.child, share: parsed.value });
  }
  total = Number(total.toFixed(12));
  const sumError =
    total > 1 + EPSILON ? `the shares sum to ${Number(total.toFixed(6))}, more than 1 by ${Number((total - 1).toFixed(6))}` : null;
  const reasonError = reason.trim() === "" ? "say why: every allocation change needs a reason" : null;
  const ok = Object.keys(rowErrors).length === 0 && sumError === null && reasonError === null && changed.length > 0;
  return { ok, total, remaining: Number((1 - total).toFixed(12)), rowErrors, sumError, reasonError, changed };
}
