"""Temporal workflows: the long-running promises of the contract (runs, timers, sagas)."""
