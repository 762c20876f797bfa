"""Tool-call guard: grammar, DFA, loop detection (no torch); the logits mask (mask.py, torch)."""
