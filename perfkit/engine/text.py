"""The text of a token of perfkit's synthetic vocabulary (the model has no tokenizer):
` t<id>` (a leading space, one word per token), or, for a request whose output the guard
constrains, the grammar token's own text (grammar.Vocabulary). serve/tokens.py is the
other half (text -> ids); perfkit serve and the engine's stop strings both read this."""

from __future__ import annotations

from perfkit.engine.guard.grammar import Vocabulary
from perfkit.engine.guard.structured import StructuredVocab


def token_text(token: int, grammar: Vocabulary | StructuredVocab | None = None) -> str:
    return f" t{token}" if grammar is None else grammar.detokenize((token,))
