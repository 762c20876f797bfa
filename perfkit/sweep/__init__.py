"""Concurrency and rate sweeps over the engine: load generation, results, files."""
