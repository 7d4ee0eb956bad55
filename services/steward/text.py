"""How a file the user named that is not UTF-8 text is described, the one wording (the CLI's files, the simulator's
scenario, trace and event log): the first byte that is not, and where. A support module: the CLI and the simulator
both read files a person wrote, and neither is the other's to import for this."""

from __future__ import annotations


def not_utf8(err: UnicodeDecodeError) -> str:
    """`not UTF-8 text (byte 0xe9 at offset 12)`: what a UnicodeDecodeError says, in a person's words."""
    bad = err.object[err.start:err.start + 1]
    return f"not UTF-8 text (byte 0x{bad.hex() or '??'} at offset {err.start})"
