// Notifications settings (issue 24 "Being told", ADR 0050): which notices of an allocation reach you by e-mail or
import { ProjectName } from "../names";
// webhook. Every change is a `setNotifications` mutation (a command through the ledger); the server checks who
// may follow what.
import { type FormEvent, useState } from "react";
import { request } from "../api/client";
import { NotificationSettingsDocument, SetNotificationsDocument } from "../api/generated";
import { ErrorNote, Panel } from "../components/common";
import { useApp, useData } from "../context";

type Channel = "email" | "webhook";

interface Choice {
  allocation: string;
  channel: Channel;
  target: string;
  kinds: string[];
}

/** The one line the server's answer says (a refusal's reason, or what is now in force). */
export function answerText(result: { __typename: string; [k: string]: unknown }, choice: Choice): string {
  switch (result.__typename) {
    case "NotificationsChosen":
      return choice.kinds.length
        ? `Saved: ${choice.kinds.join(", ")} of ${choice.allocation} to ${choice.target}.`
        : `Stopped: nothing of ${choice.allocation} goes to ${choice.target}.`;
    case "Rejected":
      return `Refused: ${String(result.reason)}`;
    case "InvalidInput":
      return `Not saved: ${String(result.message)}`;
    case "NotAuthorised":
      return `Not allowed: ${String(result.message)}`;
    default:
      return "Unexpected answer";
  }
}

async function save(choice: Choice): Promise<string> {
  const data = await request(SetNotificationsDocument, choice);
  return answerText(data.setNotifications as { __typename: string }, choice);
}

export function NotificationsScreen() {
  const { identity, refresh } = useApp();
  const { data, error } = useData(() => request(NotificationSettingsDocument, {}), []);
  const [choice, setChoice] = useState<Choice>({ allocation: identity.scope?.split(",")[0] ?? "", channel: "email", target: "", kinds: [] });
  const [said, setSaid] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    try {
      setSaid(await save(choice));
      refresh();
    } catch (err) {
      setSaid(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const stop = async (c: Choice) => {
    setSaid(await save({ ...c, kinds: [] }).catch((err: unknown) => String(err)));
    refresh();
  };
  const toggle = (kind: string, on: boolean) =>
    setChoice((c) => ({ ...c, kinds: on ? [...c.kinds, kind] : c.kinds.filter((k) => k !== kind) }));

  if (!data) return <><ErrorNote error={error} /><p aria-busy="true">Loading notifications…</p></>;
  const subs = data.notificationSubscriptions;
  return (
    <>
      <Panel title="What reaches you" id="notify-current">
        <ErrorNote error={error} />
        {subs.length === 0 ? <p className="muted">Nothing yet: choose below.</p> : (
          <div className="scroll-x">
            <table>
              <caption className="sr-only">Your notifications</caption>
              <thead><tr><th scope="col">allocation</th><th scope="col">channel</th><th scope="col">to</th><th scope="col">kinds</th><th scope="col"><span className="sr-only">actions</span></th></tr></thead>
              <tbody>
                {subs.map((s) => (
                  <tr key={`${s.allocation} ${s.channel} ${s.target}`}>
                    <td><ProjectName id={s.allocation} /></td><td>{s.channel}</td><td className="hash-full">{s.target}</td><td>{s.kinds.join(", ")}</td>
                    <td>
                      <button type="button" className="ghost" onClick={() => setChoice({ allocation: s.allocation, channel: s.channel as Channel, target: s.target, kinds: [...s.kinds] })}
                        aria-label={`Edit ${s.channel} to ${s.target} for ${s.allocation}`}>Edit</button>{" "}
                      <button type="button" className="ghost" onClick={() => void stop({ allocation: s.allocation, channel: s.channel as Channel, target: s.target, kinds: [] })}
                        aria-label={`Stop ${s.channel} to ${s.target} for ${s.allocation}`}>Stop</button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Panel>
      <Panel title="Choose" id="notify-choose">
        <form onSubmit={(e) => void submit(e)} className="notify-form">
          <label>Allocation (a project, or a node: its whole subtree)
            <input required value={choice.allocation} onChange={(e) => setChoice({ ...choice, allocation: e.target.value })} />
          </label>
          <label>Channel
            <select value={choice.channel} onChange={(e) => setChoice({ ...choice, channel: e.target.value as Channel })}>
              <option value="email">e-mail</option>
              <option value="webhook">webhook (Slack-compatible JSON)</option>
            </select>
          </label>
          <label>{choice.channel === "email" ? "E-mail address" : "Webhook URL"}
            <input required type={choice.channel === "email" ? "email" : "url"} value={choice.target}
              onChange={(e) => setChoice({ ...choice, target: e.target.value })} />
          </label>
          <fieldset>
            <legend>Tell me when</legend>
            {data.notificationKinds.map((k) => (
              <label key={k.name}>
                <input type="checkbox" checked={choice.kinds.includes(k.name)} onChange={(e) => toggle(k.name, e.target.checked)} />
                {" "}<code>{k.name}</code>: {k.description}
              </label>
            ))}
          </fieldset>
          <button type="submit" disabled={busy}>{choice.kinds.length ? "Save" : "Save (stops this channel)"}</button>
          <p role="status" aria-live="polite" data-testid="notify-answer">{said}</p>
        </form>
      </Panel>
    </>
  );
}
