"""Pure functions over recorded requests: latency distributions, throughput, goodput, knee."""
