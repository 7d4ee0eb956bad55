"""Steward: event-sourced governance for shared GPU clusters."""

from steward.native import install_guard

install_guard()  # ADR 0020: a compiled module runs only while it matches its .py source
