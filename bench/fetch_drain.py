"""The ledger's fetch stage alone (ADR 0019, ADR 0024): drain a topic through the real `FetchStage` and print
the fetch process's CPU and the receiving side's CPU per 1,000 records as JSON.

    PYTHONPATH=services:workflows .venv/bin/python bench/fetch_drain.py produce TOPIC N   # once: N bench commands
    PYTHONPATH=services:workflows .venv/bin/python bench/fetch_drain.py drain TOPIC N [--pace-ms MS] [--digest]

`drain` reads the topic from the beginning in batches of 2,000, as the ledger asks for them, sleeping `--pace-ms`
after each batch (the ledger deciding and recording it). `--digest` adds a digest of every partition's
`(source, value)` sequence, to check that two versions hand over the same records in the same order. Needs the
stack's Kafka (`STEWARD_KAFKA_BOOTSTRAP`). Run it alternately from two worktrees, each with its own `PYTHONPATH`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time

from steward.config import Settings


def produce(settings: Settings, topic: str, n: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    from steward.bench.ingest import commands
    from steward.bench.ingest import produce as send
    from steward.bus.kafka import client_options

    admin = KafkaAdminClient(**client_options(settings))
    try:
        admin.create_topics([NewTopic(topic, 6, 1)])
    finally:
        admin.close()
    send(settings, topic, commands(n))


def drain(settings: Settings, topic: str, n: int, pace_s: float, digest: bool) -> dict[str, object]:
    from steward.ledger.intake.fetch import FetchStage

    stage = FetchStage(settings, topic, f"drain-{topic}-{time.time_ns()}", 2000)
    digests: dict[str, hashlib._Hash] = {}
    got = batches = 0
    receive_cpu = 0.0
    started: float | None = None
    try:
        stage.wait_ready(threading.Event())
        stage.seek({})
        while got < n:
            cpu = time.thread_time()
            fetched = stage.poll(0.5)
            if fetched is None:
                continue
            receive_cpu += time.thread_time() - cpu
            started = started or time.perf_counter()
            got += len(fetched.messages)
            batches += 1
            if digest:
                for source, raw in fetched.messages:
                    part = source.rpartition("@")[0]
                    digests.setdefault(part, hashlib.sha256()).update(source.encode() + b"|" + (raw or b"-"))
            if pace_s:
                time.sleep(pace_s)
        wall = time.perf_counter() - (started or time.perf_counter())
    finally:
        stage.close()
    result: dict[str, object] = {
        "records": got, "batches": batches,
        "fetch_cpu_ms_per_1k": round(stage.cpu_s / got * 1e6, 3),
        "receive_cpu_ms_per_1k": round(receive_cpu / got * 1e6, 3),
        "records_per_s": round(got / wall) if wall > 0 else None,
    }
    if digest:
        text = "".join(k + d.hexdigest() for k, d in sorted(digests.items()))
        result["digest"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["produce", "drain"])
    parser.add_argument("topic")
    parser.add_argument("records", type=int)
    parser.add_argument("--pace-ms", type=float, default=0.0)
    parser.add_argument("--digest", action="store_true")
    args = parser.parse_args()
    settings = Settings()
    if args.mode == "produce":
        produce(settings, args.topic, args.records)
    else:
        print(json.dumps(drain(settings, args.topic, args.records, args.pace_ms / 1000, args.digest)))


if __name__ == "__main__":
    main()
