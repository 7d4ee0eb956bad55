import { useEffect, useRef, type ReactNode } from "react";

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
  // The latest onClose, read when Escape is pressed: the screens pass a new function on every redraw (each
  // second, for the clock), and an effect depending on it would move the focus to the opener and back into
  // the drawer each time, away from where the keyboard had put it.
  const close = useRef(onClose);
  useEffect(() => {
    close.current = onClose;
  }, [onClose]);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && close.current();
    document.addEventListener("keydown", onKey);
    return () => {
      document.removeEventListener("keydown", onKey);
      opener?.focus?.();
    };
  }, []);
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
