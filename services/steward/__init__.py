"""Steward: event-sourced governance for shared GPU clusters."""
