"""Predicted latency: a step-time model calibrated from a live run, and the engine (null
executor, no tensors) on a virtual clock that advances by the model's step time."""
