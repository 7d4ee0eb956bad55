"""Benchmarks: each module `steward.bench.NAME` exposes `run(**options) -> dict` and is reached as
`steward bench NAME`; they print JSON, they never assert on time."""
