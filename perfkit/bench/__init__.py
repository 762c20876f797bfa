"""Microbenchmarks of engine parts (no CLI here): numbers against the machine's limits."""
