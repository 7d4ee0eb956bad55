"""The ledger's deciding: each message of a batch opened, vouched for, decided and folded (`steps`), and
every refused message turned into events of the chain (`refusals`). No IO."""
