// WCAG 2.x contrast, used by the tests to hold the stylesheet to AA (4.5:1 for text).

export function parseHex(hex: string): [number, number, number] | null {
  const m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(hex.trim());
  if (!m) return null;
  const h = m[1].length === 3 ? m[1].split("").map((c) => c + c).join("") : m[1];
  return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)) as [number, number, number];
}

export function luminance([r, g, b]: [number, number, number]): number {
  const lin = (c: number) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

export function contrastRatio(fg: string, bg: string): number {
  const a = parseHex(fg);
  const b = parseHex(bg);
  if (!a || !b) throw new Error(`not a hex colour: ${!a ? fg : bg}`);
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

export interface TextRule {
  selector: string;
  color: string;
  background: string | null;
}

/** The rules of a stylesheet that set a text colour, with `var(--x)` resolved from `:root`. */
export function textRules(css: string): TextRule[] {
  const body = css.replace(/\/\*[\s\S]*?\*\//g, "");
  const vars = new Map<string, string>();
  const rules: { selector: string; decls: Map<string, string> }[] = [];
  for (const m of body.matchAll(/([^{}]+)\{([^{}]*)\}/g)) {
    const decls = new Map<string, string>();
    for (const d of m[2].split(";")) {
      const i = d.indexOf(":");
      if (i > 0) decls.set(d.slice(0, i).trim(), d.slice(i + 1).trim());
    }
    const selector = m[1].trim();
    if (selector === ":root") for (const [k, v] of decls) if (k.startsWith("--")) vars.set(k, v);
    rules.push({ selector, decls });
  }
  const resolve = (v: string | undefined) => {
    if (!v) return null;
    const m = /^var\((--[\w-]+)\)$/.exec(v);
    const out = m ? vars.get(m[1]) ?? null : v;
    return out && parseHex(out) ? out : null;
  };
  return rules
    .map((r) => ({ selector: r.selector, color: resolve(r.decls.get("color")), background: resolve(r.decls.get("background") ?? r.decls.get("background-color")) }))
    .filter((r): r is TextRule => r.color !== null);
}
