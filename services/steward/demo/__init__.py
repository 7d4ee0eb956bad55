"""`make demo`: the Philly scenario replayed through the live stack at an accelerated clock.

- `python -m steward.demo` (what `make demo` runs): brings the stack up with the demo's contract timings,
  applies the scenario's tree, its 40 nodes on the simulated executor (the default cluster, V100) plus one
  node on the local executor (a second cluster, `local`, A100, which that agent alone serves),
  the scenario's policy scaled by S, starts the simulated executor and the replay driver as background
  processes of the stack (stopped by `make down`), waits for the first useful screen and prints the
  addresses, a token per role and the summary table.
- `python -m steward.demo summary [--json]`: the summary table again, at any time.
- `python -m steward.demo driver` / `sim-executor`: the two background processes.

plan.py holds the pure part (what to submit when, and the scaled settings); docs/adr/0009 explains the
time compression and its limits.
"""
