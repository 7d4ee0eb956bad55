import { useState } from "react";
import { buildTree, flatten, type AllocationRow, type TreeNode } from "../lib/tree";
import { formatGpuHours, formatPercent, formatRatio, formatShare, formatTime } from "../lib/format";
import { quotaText } from "../lib/outlook";

/** The allocation tree as an indented table (a treegrid for keyboard users: arrows move, Enter selects). */
export function TreeTable({ rows, selected, onSelect, label, testid }: {
  rows: AllocationRow[];
  selected?: string | null;
  onSelect?: (name: string) => void;
  label: string;
  testid?: string;
}) {
  const [collapsed, setCollapsed] = useState<Set<string>>(new Set());
  const all = flatten(buildTree(rows));
  const hidden = new Set<string>();
  for (const n of all) if (collapsed.has(n.parent) || hidden.has(n.parent)) hidden.add(n.name);
  const visible = all.filter((n) => !hidden.has(n.name));
  const toggle = (n: TreeNode) => setCollapsed((c) => { const x = new Set(c); if (x.has(n.name)) x.delete(n.name); else x.add(n.name); return x; });
  const onKey = (e: React.KeyboardEvent<HTMLTableRowElement>, n: TreeNode, i: number) => {
    const rowsEl = (e.currentTarget.parentElement?.querySelectorAll("tr[tabindex]") ?? []) as NodeListOf<HTMLElement>;
    if (e.key === "ArrowDown") rowsEl[Math.min(i + 1, rowsEl.length - 1)]?.focus();
    else if (e.key === "ArrowUp") rowsEl[Math.max(i - 1, 0)]?.focus();
    else if ((e.key === "ArrowLeft" && !collapsed.has(n.name)) || (e.key === "ArrowRight" && collapsed.has(n.name))) { if (n.children.length) toggle(n); }
    else if (e.key === "Enter" || e.key === " ") onSelect?.(n.name);
    else return;
    e.preventDefault();
  };
  const quotas = rows.some((r) => r.debugQuotaGpus);
  const books = rows.some((r) => r.owed !== undefined && r.owed !== null);
  const window = rows.find((r) => r.window)?.window ?? "window";
  const windowEnd = rows.find((r) => r.windowEnd)?.windowEnd ?? undefined;
  if (!rows.length) return <p className="muted">No allocations yet: an admin applies the tree (<code>steward tree apply</code>).</p>;
  return (
    <table className="tree" role="treegrid" aria-label={label} data-testid={testid} data-window-end={windowEnd}>
      <thead>
        <tr><th scope="col">allocation</th><th scope="col">share</th><th scope="col">entitlement</th><th scope="col">usage in window</th>{books && <><th scope="col" title={windowEnd ? `figures to ${formatTime(windowEnd)}` : undefined}>owed ({window})</th><th scope="col">delivered ({window})</th><th scope="col">delivered / owed</th></>}<th scope="col">burn</th>{quotas && <th scope="col" title="GPUs of debug work ahead of the fair-share order">debug quota</th>}</tr>
      </thead>
      <tbody>
        {visible.map((n, i) => {
          const burn = n.burn ?? null;
          return (
            <tr key={n.name} tabIndex={0} aria-level={n.depth + 1} aria-expanded={n.children.length ? !collapsed.has(n.name) : undefined}
              aria-selected={selected === n.name} className={selected === n.name ? "selected" : ""} onKeyDown={(e) => onKey(e, n, i)}
              onClick={() => onSelect?.(n.name)} data-name={n.name}>
              <th scope="row" style={{ paddingLeft: `${0.5 + n.depth * 1.25}rem` }}>
                {n.children.length ? (
                  <button type="button" className="twisty" aria-label={`${collapsed.has(n.name) ? "expand" : "collapse"} ${n.name}`} tabIndex={-1} onClick={(e) => { e.stopPropagation(); toggle(n); }}>
                    {collapsed.has(n.name) ? "▸" : "▾"}
                  </button>
                ) : <span className="twisty-space" />}
                {n.displayName && n.displayName !== n.name ? <>{n.displayName} <code className="muted id">{n.name}</code></> : n.name}
              </th>
              <td className="num" data-testid={`share-${n.name}`}>{formatShare(n.share)}</td>
              <td className="num">
                <span className="bar" style={{ width: `${Math.min(100, n.entitlement * 100)}%` }} aria-hidden="true" />
                {formatPercent(n.entitlement)}
              </td>
              <td className="num">{formatGpuHours(n.usageInWindow ?? null)}</td>
              {books && <>
                <td className="num" data-testid={`owed-${n.name}`}>{formatGpuHours(n.owed ?? null)}</td>
                <td className="num" data-testid={`delivered-${n.name}`}>{formatGpuHours(n.delivered ?? null)}</td>
                <td className={`num nowrap ${(n.deliveredOverOwed ?? 1) < 0.9 ? "bad" : ""}`} data-testid={`ratio-${n.name}`}>{formatRatio(n.deliveredOverOwed)}</td>
              </>}
              <td className={`num ${burn !== null && burn > 1 ? "warn" : ""}`}>{formatPercent(burn, 0)}</td>
              {quotas && <td className="num nowrap" data-testid={`quota-${n.name}`}>{quotaText(n.debugQuotaGpus)}</td>}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
