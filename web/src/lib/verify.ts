import type { VerifyQuery } from "../api/generated";

/** A verification of the hash chain as the Audit screen shows it. */
export interface Verification {
  ok: boolean;
  checked: number | null;
  firstBad: number | null;
  message: string;
  /** Positions of the range asked for exist past `reached` and were not checked (the server's limit per request). */
  truncated: boolean;
  /** The last position checked. */
  reached: number | null;
}

/** The API's answer (Query.verify) in the screen's words. */
export function verificationOf(v: VerifyQuery["verify"]): Verification {
  return {
    ok: v.ok,
    truncated: v.truncated,
    reached: v.toPosition,
    checked: v.checked,
    firstBad: v.firstBadPosition,
    message: v.problem ?? (v.ok || v.truncated ? `positions ${v.fromPosition}–${v.toPosition} hash-chain to each other` : "the chain is broken"),
  };
}

/** The verdict of a verification. A truncated range (the server checks at most so many positions per request) is
 * "not all checked", never "intact": the server vouches only for what it checked, and nothing it checked is wrong. */
export function verdict(v: Verification): string {
  if (v.firstBad !== null || (!v.ok && !v.truncated)) return "✘ Broken";
  return v.truncated ? "⚠ Not all checked" : "✔ Intact";
}

/** The style of the verdict: ok (green), partial (amber: not all checked, nothing wrong) or error (red). */
export function verdictClass(v: Verification): "ok" | "partial" | "error" {
  if (v.firstBad !== null || (!v.ok && !v.truncated)) return "error";
  return v.truncated ? "partial" : "ok";
}
