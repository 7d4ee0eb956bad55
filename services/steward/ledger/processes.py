"""The fetch stage's wire between the ledger and its fetch process (ADR 0019, ADR 0024).

Messages are tuples of plain values (str, bytes, int, float, None, lists, dicts) written with `marshal`,
each behind an 8-byte length, over one end of a socket pair. `marshal` because both ends are the same
interpreter (the child is `sys.executable`) and it writes a batch of 2,000 `(source, bytes)` pairs ~25x
faster than multiprocessing's pickler (0.02 against 0.6 us a message, measured) and reads it a little faster
(0.05 against 0.06 us). A message is read into one buffer of its exact size with `recv_into`, instead of
`Connection`'s chunks gathered in a `BytesIO`, and the socket buffers hold a whole batch (4 MiB) so the
child writes one in a few calls instead of waiting on the ledger's reads every 200 KiB.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

_LENGTH = struct.Struct("!Q")
# the socket buffers asked for (Linux caps them at net.core.[rw]mem_max; 4 MiB here)
BUFFER_BYTES = 4 * 1024 * 1024
_SMALL = 64 * 1024  # messages up to this size go out in one call with their length


class Wire:
    """One end of the socket pair: `send` and `recv` whole messages, `poll` for one to read."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):  # the system's default size: slower, not wrong
                sock.setsockopt(socket.SOL_SOCKET, option, BUFFER_BYTES)
        self._poller = select.poll()
        self._poller.register(sock.fileno(), select.POLLIN)

    @classmethod
    def from_fd(cls, fd: int) -> Wire:
        return cls(socket.socket(fileno=fd))

    def send(self, message: Any) -> None:
        """Write `message` (ValueError when it holds a value marshal cannot write)."""
        data = marshal.dumps(message)
        if len(data) <= _SMALL:
            self._sock.sendall(_LENGTH.pack(len(data)) + data)
        else:
            self._sock.sendall(_LENGTH.pack(len(data)))
            self._sock.sendall(data)

    def poll(self, timeout_s: float) -> bool:
        """Whether a message (or the end of the stream) can be read, waiting up to `timeout_s`."""
        return bool(self._poller.poll(max(0, int(timeout_s * 1000 + 0.999))))

    def recv(self) -> Any:
        """The next message (EOFError when the other end closed)."""
        (size,) = _LENGTH.unpack(self._read(_LENGTH.size))
        return marshal.loads(self._read(size))

    def _read(self, size: int) -> bytearray:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end of the wire closed")
            got += n
        return buf

    def close(self) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(self._sock.fileno())
        self._sock.close()


def start_child(module: str) -> tuple[Wire, subprocess.Popen[bytes]]:
    """`python -m <module> FD PARENT_PID` and the wire to it: a new interpreter, not multiprocessing (the
    ledger has threads, so no fork, and spawn would re-import whatever script started the ledger)."""
    ours, theirs = socket.socketpair()
    conn = Wire(ours)
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, str(theirs.fileno()), str(os.getpid())],
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    finally:
        theirs.close()
    return conn, proc


def stop_child(conn: Wire, proc: subprocess.Popen[bytes], timeout_s: float) -> float | None:
    """Ask a child started by `start_child` to stop, and wait for it (killed after `timeout_s`); the CPU
    seconds it reported on the way out (`("stopped", cpu)`, read past anything still queued), or None."""
    cpu: float | None = None
    try:
        conn.send(("stop",))
        deadline = time.monotonic() + timeout_s
        while conn.poll(max(0.0, deadline - time.monotonic())):
            kind, *args = conn.recv()
            if kind == "stopped":
                cpu = float(args[0])
                break
    except (EOFError, OSError):
        pass
    finally:
        conn.close()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
    return cpu


def die_with_parent(parent: int) -> None:
    """In a child started by `start_child`: SIGKILL this process when the ledger dies (Linux), and leave at
    once if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere, the closed socket ends it
    if os.getppid() != parent:
        os._exit(0)
