"""Developer tools run with `python -m steward.tools.NAME` (they read the code; the stack never imports them)."""
