import { useState } from "react";
import { useData } from "../context";
import { fetchGpuModels, setGpuModelWeights } from "../api/queries";
import { type GpuModelRow, parseWeightChange } from "../lib/clusters";
import { ErrorNote, Panel } from "./common";

/** The weights form (operators and admins): one model, its new weight and why. The server's refusal is shown in
 * its own words; a change is recorded as a PolicySet of `gpu_model_weights` with the reason. */
export function WeightForm({ models, onSaved }: { models: GpuModelRow[]; onSaved: () => void }) {
  const [model, setModel] = useState(models[0]?.model ?? "");
  const [weight, setWeight] = useState("");
  const [reason, setReason] = useState("");
  const [problem, setProblem] = useState<{ field: string; message: string } | null>(null);
  const [result, setResult] = useState<{ ok: boolean; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const save = async (e: React.FormEvent) => {
    e.preventDefault();
    setResult(null);
    const change = parseWeightChange(model, weight, reason);
    if (!change.ok) {
      setProblem({ field: change.field, message: change.message });
      document.getElementById(`weight-${change.field}`)?.focus();
      return;
    }
    setProblem(null);
    setBusy(true);
    try {
      const out = await setGpuModelWeights(change.weights, change.reason);
      setResult({ ok: out.ok, message: out.ok ? `Recorded: ${model} now weighs ${change.weights[0].weight}.` : out.message });
      if (out.ok) {
        setWeight("");
        setReason("");
        onSaved();
      }
    } catch (err) {
      setResult({ ok: false, message: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  };
  const err = (field: string) => problem?.field === field ? <span id={`weight-${field}-err`} className="field-error">{problem.message}</span> : null;
  const described = (field: string) => (problem?.field === field ? `weight-${field}-err` : undefined);
  return (
    <form onSubmit={save} aria-label="Change a GPU model's weight" noValidate className="weight-form" data-testid="weight-form">
      <div className="form-row">
        <div className="field">
          <label htmlFor="weight-model">GPU model</label>
          <select id="weight-model" value={model} onChange={(e) => setModel(e.target.value)} aria-describedby={described("model")}>
            {models.map((m) => <option key={m.model} value={m.model}>{m.model} (now {m.weight})</option>)}
          </select>
          {err("model")}
        </div>
        <div className="field">
          <label htmlFor="weight-weight">New weight</label>
          <input id="weight-weight" inputMode="decimal" size={6} value={weight} onChange={(e) => setWeight(e.target.value)} aria-invalid={problem?.field === "weight"} aria-describedby={described("weight")} placeholder="0.55" />
          {err("weight")}
        </div>
        <div className="field">
          <label htmlFor="weight-reason">Reason</label>
          <input id="weight-reason" className="wide" value={reason} onChange={(e) => setReason(e.target.value)} aria-invalid={problem?.field === "reason"} aria-describedby={described("reason")} placeholder="older hardware" />
          {err("reason")}
        </div>
      </div>
      <div className="actions"><button type="submit" disabled={busy || !models.length}>{busy ? "Saving…" : "Save weight"}</button></div>
      {result && <p className={result.ok ? "ok" : "error"} role={result.ok ? "status" : "alert"} data-testid="weight-result">{result.message}</p>}
    </form>
  );
}

/** The GPU models of the registered nodes with the weight each is charged at (budget units per GPU-hour). */
export function WeightsTable({ models }: { models: GpuModelRow[] }) {
  return (
    <table className="data" data-testid="weights-table">
      <caption className="sr-only">GPU models and their weights</caption>
      <thead><tr><th scope="col">GPU model</th><th scope="col" title="Budget units per GPU-hour: an hour on it costs this many GPU-hours of budget">weight</th><th scope="col">GPUs</th><th scope="col">nodes</th><th scope="col">clusters</th></tr></thead>
      <tbody>
        {models.map((m) => (
          <tr key={m.model} data-testid={`weight-${m.model}`}>
            <th scope="row">{m.model}</th><td className="num">{m.weight}</td><td className="num">{m.gpus}</td><td className="num">{m.nodes}</td><td>{m.clusters.join(", ")}</td>
          </tr>
        ))}
        {!models.length && <tr><td colSpan={5} className="muted">No node is registered yet.</td></tr>}
      </tbody>
    </table>
  );
}

/** The weights panel of the Nodes screen: everyone reads them; operators and admins change one with a reason. */
export function GpuModelWeights({ canChange }: { canChange: boolean }) {
  const { data, error, reload } = useData(fetchGpuModels, []);
  return (
    <Panel title="GPU model weights" id="gpu-weights">
      <ErrorNote error={error} />
      <p className="muted small">An hour on a GPU costs its model's weight in budget (weighted GPU-hours); 1 unless set.</p>
      {data ? <WeightsTable models={data} /> : <p aria-busy="true">Loading GPU models…</p>}
      {canChange && data && data.length > 0 && <WeightForm models={data} onSaved={reload} />}
    </Panel>
  );
}
