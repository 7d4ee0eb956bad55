"""The scheduling cycle's phases, numbered in the order they run over one `CyclePlan` (policy/plan.py),
as Kueue's `schedule()` and KAI Scheduler's actions are: each phase is one module whose functions read
and extend the plan; `steward.policy.cycle.schedule` runs them in order.
"""
