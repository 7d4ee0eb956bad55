// The group mapping as the People screen reads and writes it (ADR 0049): rules as text lines
// `GROUP=ROLE[:SCOPE,SCOPE]`, the same form `steward identity map` takes.

export interface GroupRule {
  group: string;
  role: string;
  scopes: string[];
}

export function ruleLine(r: GroupRule): string {
  return `${r.group}=${r.role}${r.scopes.length ? `:${r.scopes.join(",")}` : ""}`;
}

/** Rules from text, one per line (blank lines skipped); the first malformed line is named. */
export function parseRules(text: string): { rules: GroupRule[]; problem: string | null } {
  const rules: GroupRule[] = [];
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  for (const [i, line] of lines.entries()) {
    const eq = line.indexOf("=");
    const group = eq > 0 ? line.slice(0, eq).trim() : "";
    const rest = eq > 0 ? line.slice(eq + 1) : "";
    const [role, scopes = ""] = rest.split(":", 2);
    if (!group || !role?.trim()) return { rules, problem: `line ${i + 1} ('${line}') is not GROUP=ROLE[:SCOPE,SCOPE]` };
    rules.push({ group, role: role.trim(), scopes: scopes.split(",").map((s) => s.trim()).filter(Boolean) });
  }
  return { rules, problem: null };
}
