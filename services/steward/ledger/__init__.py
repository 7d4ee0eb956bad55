"""The ledger: the single writer of the event store (DESIGN: "one transaction").

A batch of commands goes one way through it:

- `intake/`: the messages come in from the command topics (a fetch process of its own, ADR 0019, 0024);
- `deciding/`: each message is opened, checked against its sender, decided on the state and folded
  (`steps`, compiled), refusals join the chain (`refusals`);
- `recording/`: the decided batch is written in one transaction (the sequence is the store's,
  `steward.store.recorder`; the PostgreSQL writer process, ADR 0025, is in `recording.writer`).

`ledger.Ledger` runs one batch through deciding and recording; `service` runs the ledger against Kafka
(pipelined, ADR 0015), with the outbox relay and the auditor; `processes` starts the helper processes and
is the wire to them; `memory` keeps the cyclic collector out of the deciding thread's way (ADR 0027).
"""
