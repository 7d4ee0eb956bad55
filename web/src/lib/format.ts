// Formatting shared by every screen: one place decides how numbers, times and durations read.

export function formatPercent(fraction: number | null | undefined, digits = 1): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "—";
  const pct = fraction * 100;
  const fixed = pct.toFixed(digits);
  return `${fixed.replace(/\.0+$/, "")} %`;
}

/** delivered ÷ owed as it is: "85 %", "135 % (over-delivery)" above 1 (never capped), "—" when nothing owed. */
export function formatRatio(ratio: number | null | undefined): string {
  const pct = formatPercent(ratio, 0);
  return ratio !== null && ratio !== undefined && ratio > 1 ? `${pct} (over-delivery)` : pct;
}

/** "45 s", "12 min 05 s", "2 h 05 min", "3 d 4 h"; negative durations read as "0 s". */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return h ? `${d} d ${h} h` : `${d} d`;
  if (h > 0) return `${h} h ${two(m)} min`;
  if (m > 0) return `${m} min ${two(sec)} s`;
  return `${sec} s`;
}

/** GPU-seconds as GPU-hours with a sensible precision. */
export function formatGpuHours(gpuSeconds: number | null | undefined): string {
  if (gpuSeconds === null || gpuSeconds === undefined || !Number.isFinite(gpuSeconds)) return "—";
  const h = gpuSeconds / 3600;
  if (h === 0) return "0 GPU·h";
  if (Math.abs(h) < 0.1) return `${h.toFixed(3)} GPU·h`;
  if (Math.abs(h) < 10) return `${h.toFixed(2)} GPU·h`;
  if (Math.abs(h) < 1000) return `${h.toFixed(1)} GPU·h`;
  return `${Math.round(h).toLocaleString("en-US")} GPU·h`;
}

const pad = (n: number) => String(n).padStart(2, "0");

/** Epoch seconds as local "YYYY-MM-DD HH:MM:SS" (sortable, unambiguous). */
export function formatTime(epochSeconds: number | null | undefined): string {
  if (epochSeconds === null || epochSeconds === undefined || !Number.isFinite(epochSeconds)) return "—";
  const d = new Date(epochSeconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "in 5 min 00 s" / "3 min 10 s ago" relative to now. */
export function formatRelative(epochSeconds: number | null | undefined, now: number): string {
  if (epochSeconds === null || epochSeconds === undefined || !Number.isFinite(epochSeconds)) return "—";
  const delta = epochSeconds - now;
  if (Math.abs(delta) < 1) return "now";
  return delta > 0 ? `in ${formatDuration(delta)}` : `${formatDuration(-delta)} ago`;
}

export function shortHash(hash: string | null | undefined, n = 10): string {
  if (!hash) return "—";
  return hash.length <= n ? hash : `${hash.slice(0, n)}…`;
}

/** "QUEUED" -> "queued", "NO_CAPACITY" -> "no capacity". */
export function humanise(code: string | null | undefined): string {
  if (!code) return "—";
  return code.toLowerCase().replace(/_/g, " ");
}

export function formatShare(share: number | null | undefined): string {
  if (share === null || share === undefined || !Number.isFinite(share)) return "—";
  return String(Number(share.toFixed(4)));
}
