import { useEffect, useRef, type ReactNode } from "react";

/** Says which API field a panel waits for, and what it shows meanwhile. */
export function Missing({ fields, children }: { fields: string[]; children?: ReactNode }) {
  return (
    <p className="missing" role="note" data-missing={fields.join(" ")}>
      <strong>Needs API:</strong> {fields.map((f, i) => (
        <span key={f}>{i > 0 && ", "}<code>{f}</code></span>
      ))}
      {children ? <> — {children}</> : null}
    </p>
  );
}

export function ErrorNote({ error }: { error: string | null }) {
  if (!error) return null;
  return <p className="error" role="alert">{error}</p>;
}

export function Panel({ title, id, children, actions }: { title: string; id?: string; children: ReactNode; actions?: ReactNode }) {
  const hid = id ? `${id}-h` : undefined;
  return (
    <section className="panel" aria-labelledby={hid} id={id}>
      <header className="panel-head">
        <h2 id={hid}>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

export function Badge({ tone, children, title }: { tone: "ok" | "warn" | "bad" | "info" | "muted"; children: ReactNode; title?: string }) {
  return <span className={`badge badge-${tone}`} title={title}>{children}</span>;
}

export function stateTone(state: string): "ok" | "warn" | "bad" | "info" | "muted" {
  if (state === "RUNNING" || state === "COMPLETED") return "ok";
  if (state === "QUEUED" || state === "PLACED") return "info";
  if (state === "PREEMPTED" || state === "CHECKPOINTED" || state === "STOPPED") return "warn";
  if (state === "FAILED") return "bad";
  return "muted";
}

/** A side drawer as a modal dialog: focus moves in, Escape closes, focus returns to the opener. */
export function Drawer({ title, onClose, children }: { title: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && onClose();
    document.addEventListener("keydown", onKey);
    return () => {
      document.removeEventListener("keydown", onKey);
      opener?.focus?.();
    };
  }, [onClose]);
  return (
    <div className="drawer-backdrop" onClick={onClose}>
      <div className="drawer" role="dialog" aria-modal="true" aria-label={title} tabIndex={-1} ref={ref} onClick={(e) => e.stopPropagation()}>
        <header className="drawer-head">
          <h2>{title}</h2>
          <button type="button" className="ghost" onClick={onClose} aria-label="Close">✕</button>
        </header>
        <div className="drawer-body">{children}</div>
      </div>
    </div>
  );
}

/** Any JSON as a compact, readable block (evidence, payloads). */
export function JsonView({ value, label }: { value: unknown; label?: string }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

export function Meter({ parts, total, label }: { parts: { value: number; cls: string; name: string }[]; total: number; label: string }) {
  const t = Math.max(total, 1e-9);
  return (
    <div className="meter" role="img" aria-label={label} title={label}>
      {parts.map((p) => (
        <span key={p.name} className={p.cls} style={{ width: `${Math.min(100, (p.value / t) * 100)}%` }} />
      ))}
    </div>
  );
}
