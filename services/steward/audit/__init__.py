"""The audit trail: verification of the hash chain, signed Merkle checkpoints and proofs, exports,
replay of the policy over the log, projection rebuilds and time travel."""
