"""The serving engine: scheduler, block bookkeeping, KV cache tensors, paged attention, model."""
