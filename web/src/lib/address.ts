// How to reach a running session (Job.sessionAddress, ADR 0055): the URL or host:port its current attempt
// published. Only an http(s) URL becomes a link; anything else (ssh://, host:port) is shown to copy.

export interface SessionAddress {
  text: string;
  href: string | null;
  hint: string;
}

export function sessionAddress(address: string | null | undefined): SessionAddress | null {
  if (!address) return null;
  let url: URL | null = null;
  try {
    url = address.includes("://") ? new URL(address) : null;
  } catch {
    url = null;
  }
  if (url && (url.protocol === "http:" || url.protocol === "https:")) return { text: address, href: url.href, hint: "open it in a new tab" };
  if (url && url.protocol === "ssh:") return { text: address, href: null, hint: `ssh -p ${url.port || 22} ${url.hostname}` };
  return { text: address, href: null, hint: "copy it into the client of the session's kind" };
}
