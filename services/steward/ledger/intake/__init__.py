"""The ledger's intake: batches of raw messages from the command topics (`fetch`, a process of its own),
read straight from Kafka's record batches (`records`, `recordbatch`)."""
