"""Named model shapes (no weights, ever): a dict of presets, looked up by name.

Sources: the models' published configs (Llama 3 8B/70B config.json; OPT-13B from
the OPT paper, whose ~800 KB of KV per token the PagedAttention paper uses).
OPT uses a ReLU MLP and learned positions; perfkit keeps its shape (layers,
hidden, heads, vocab) on a Llama-style block, which is what KV sizing needs.
"""

from __future__ import annotations

from typing import Any

MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # Small enough to sweep on two CPU cores in seconds.
    "tiny": dict(
        num_layers=2, hidden_size=128, num_heads=4, num_kv_heads=2, head_dim=32,
        intermediate_size=384, vocab_size=512, dtype="float32",
    ),
    # A CPU-sized model for the long-output ShareGPT-like profiles.
    "small": dict(
        num_layers=4, hidden_size=256, num_heads=8, num_kv_heads=2, head_dim=32,
        intermediate_size=768, vocab_size=2048, dtype="float32",
    ),
    "opt-13b": dict(
        num_layers=40, hidden_size=5120, num_heads=40, num_kv_heads=40, head_dim=128,
        intermediate_size=20480, vocab_size=50272, dtype="float16",
    ),
    "llama3-8b": dict(
        num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=14336, vocab_size=128256, dtype="bfloat16",
    ),
    "llama3-70b": dict(
        num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8, head_dim=128,
        intermediate_size=28672, vocab_size=128256, dtype="bfloat16",
    ),
}

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


# GPU memory presets for KV budgets (bytes of device memory).
GPU_MEMORY = {
    "h200": 141 * 10**9,
    "h100": 80 * 10**9,
    "a100-80g": 80 * 10**9,
    "a100-40g": 40 * 10**9,
}
