import { useState } from "react";
import { type Pin, readPin } from "../lib/timetravel";

/** Pick the moment a screen shows: a date (the events recorded by then, in the viewer's zone) or a log
 * position; "Now" goes back to the head and the clock. The screen fetches with the pin it is given. */
export function TimeTravelControl({ pin, onPin, id }: { pin: Pin | null; onPin: (pin: Pin | null) => void; id: string }) {
  const [date, setDate] = useState("");
  const [position, setPosition] = useState("");
  const [error, setError] = useState<string | null>(null);
  const apply = (e: React.FormEvent) => {
    e.preventDefault();
    const read = readPin(date, position);
    setError(read.error);
    if (!read.error) onPin(read.pin);
  };
  const now = () => {
    setDate("");
    setPosition("");
    setError(null);
    onPin(null);
  };
  return (
    <form className="inline timetravel" onSubmit={apply} data-testid={`${id}-timetravel`} aria-label="Time travel: show the log as of a date or a position">
      <label className="inline">As of date{" "}
        <input type="datetime-local" step={1} value={date} onChange={(e) => setDate(e.target.value)} data-testid={`${id}-asof-date`} />
      </label>{" "}
      <label className="inline">or log position{" "}
        <input type="text" inputMode="numeric" size={8} value={position} onChange={(e) => setPosition(e.target.value)} data-testid={`${id}-asof-position`} />
      </label>{" "}
      <button type="submit" data-testid={`${id}-asof-go`}>Show</button>{" "}
      <button type="button" onClick={now} disabled={pin === null && !date && !position}>Now</button>
      {error && <span className="bad small" role="alert"> {error}</span>}
    </form>
  );
}
