"""The ledger's recording: a decided batch written in one transaction. The sequence of that transaction and
its SQLite and PostgreSQL adapters are the store's (`steward.store.recorder`); the adapter that runs it in
the PostgreSQL writer process (ADR 0025) is `writer`."""
