"""The engine's tensor math: model, paged attention, KV cache."""
