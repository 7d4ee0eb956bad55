"""API tokens checked from the mirror in memory (steward.api.tokenmirror): while the mirror is being read again,
a request checks its token from memory on the event loop (ADR 0079), as a check in a thread would have done
after finding the read running; a token the mirror has not seen yet is still looked up in the store."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from steward.api.tokenmirror import MirroredTokens, checked_in_memory
from steward.auth.tokens import TokenStore

from .test_live_model import _store


def test_a_token_is_checked_in_memory_while_the_mirror_is_read_again(tmp_path: Path) -> None:
    store = _store(tmp_path)
    token, info = TokenStore(store).create(role="researcher", scopes=["a1"], subject="alice", created_by="t")
    tokens = MirroredTokens(store, refresh_s=0.05)
    assert checked_in_memory(tokens, token) is None  # nothing read yet: the store
    assert tokens.row(info.token_id) is not None
    minted, _ = TokenStore(store).create(role="researcher", scopes=["a1"], subject="bob", created_by="t")
    time.sleep(0.1)  # the mirror is stale: the next check reads it again
    assert checked_in_memory(tokens, token) is None
    entered, gate = threading.Event(), threading.Event()

    def slow(*_: Any) -> None:
        entered.set()
        gate.wait(30)

    event.listen(store.engine, "engine_connect", slow)
    reader = threading.Thread(target=tokens.row, args=(info.token_id,))
    reader.start()
    try:
        assert entered.wait(30)
        principal = checked_in_memory(tokens, token)  # the read runs: memory, not a thread
        assert principal is not None and principal.subject == "alice"
        assert checked_in_memory(tokens, minted) is None  # not in memory: looked up in the store
    finally:
        gate.set()
        reader.join(30)
        event.remove(store.engine, "engine_connect", slow)
