"""Tool-call guard: grammar, DFA mask, loop detection."""
