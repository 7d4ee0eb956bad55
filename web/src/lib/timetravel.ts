// Time travel (issue 19): which moment of the log a screen shows. A pin is a log position or a date (the
// events recorded by then); the server folds the log up to it (budgetReport, stateAt), so the same pin gives
// the same figures on every surface and at any time. Nothing here computes a figure: this module reads the
// control's inputs and words what the server answered, including what it did not show (a truncated list).

export type Pin = { position: number } | { at: number };

export interface PinInput {
  pin: Pin | null; // null: now (the head and the clock)
  error: string | null; // the one line to show when the inputs name no moment
}

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?$/;

/** A date as the `datetime-local` input gives it ("2026-12-02T07:12" or with seconds), in the viewer's
 * zone, as epoch seconds; null when it is not such a date. */
export function parseLocalDate(text: string): number | null {
  const m = DATE_RE.exec(text.trim());
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map((x) => (x === undefined ? 0 : Number(x)));
  const date = new Date(y, mo - 1, d, h, mi, s);
  if (date.getFullYear() !== y || date.getMonth() !== mo - 1 || date.getDate() !== d) return null;
  return date.getTime() / 1000;
}

/** Epoch seconds as the `datetime-local` input's value (local zone, to the second). */
export function toLocalDateInput(epochSeconds: number): string {
  const d = new Date(epochSeconds * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** The moment the control's two inputs name: a position wins over a date; both empty is now. */
export function readPin(dateText: string, positionText: string): PinInput {
  const p = positionText.trim();
  if (p !== "") {
    if (!/^\d+$/.test(p) || Number(p) < 1 || !Number.isSafeInteger(Number(p))) {
      return { pin: null, error: `a log position is a whole number from 1, not "${p}"` };
    }
    return { pin: { position: Number(p) }, error: null };
  }
  const d = dateText.trim();
  if (d !== "") {
    const at = parseLocalDate(d);
    if (at === null) return { pin: null, error: `not a date and time: "${d}"` };
    return { pin: { at }, error: null };
  }
  return { pin: null, error: null };
}

/** The GraphQL arguments of a pin (budgetReport, stateAt name a date `at` and `time`). */
export function pinArgs(pin: Pin | null): { position: number | null; at: number | null } {
  if (!pin) return { position: null, at: null };
  return "position" in pin ? { position: pin.position, at: null } : { position: null, at: pin.at };
}

export interface AsOfAnswer {
  position: number;
  asOf: number;
  pinned: boolean;
  head: number;
}

/** The line under a pinned or live report: which position and time the figures run to, and whether the log
 * has moved on since. */
export function describeAsOf(a: AsOfAnswer, formatTime: (t: number) => string): string {
  if (!a.pinned) return `Now: the log up to position ${a.position}, figures to ${formatTime(a.asOf)}.`;
  const moved = a.head > a.position ? ` The log has moved on to position ${a.head} since.` : " This is the log's head.";
  return `As of position ${a.position}, recorded ${formatTime(a.asOf)}: the figures of the log up to it.${moved}`;
}

export interface StateJobs {
  jobCounts: { state: string; count: number }[];
  jobs: { id: string; project: string; state: string; gpus: number }[];
  jobsTruncated: boolean;
}

export const WAITING_STATES = ["QUEUED", "PREEMPTED"];

/** The waiting jobs of a state page: their number from the counts (never from the page, which may be cut),
 * the ones the page holds, and the words that say when the list is not all of them. */
export function waitingOf(s: StateJobs): { count: number; shown: StateJobs["jobs"]; note: string | null } {
  const count = s.jobCounts.filter((c) => WAITING_STATES.includes(c.state)).reduce((n, c) => n + c.count, 0);
  const shown = s.jobs.filter((j) => WAITING_STATES.includes(j.state));
  if (shown.length === count) return { count, shown, note: null };
  const total = s.jobCounts.reduce((n, c) => n + c.count, 0);
  const why = s.jobsTruncated ? `the page holds the first ${s.jobs.length} of ${total} jobs by submission` : "the page is incomplete";
  return { count, shown, note: `${shown.length} of ${count} waiting listed: ${why}.` };
}
