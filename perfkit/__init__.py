"""perfkit: benchmark and diagnose LLM serving with a paged KV cache."""

__version__ = "0.1.0"
