// A person as the audit trail shows them: "Name (subject)" when the event recorded a display name (single
// sign-on, ADR 0049), else the subject alone (API tokens, Steward's components).
export function person(subject: unknown, name: unknown): string {
  const s = subject == null || subject === "" ? "—" : String(subject);
  return name && name !== subject ? `${String(name)} (${s})` : s;
}
