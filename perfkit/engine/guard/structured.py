"""Structured output: a request's own grammar (tools, a JSON schema, a choice) as a token DFA
the guard walks and masks, beside the seed's fixed tool-call grammar (dfa.py).

Vocabulary. Structured output writes with the printable ASCII characters and the seed's
grammar tokens (grammar.TOKEN_TEXTS: `"name"`, `"arguments"`, `paris`, ...): the
characters not among those take the ids just below the seed's, so both keep their ids:

    [0, first_id)                          text tokens (` t<id>`), never inside a grammar
    [first_id, base)                       one printable ASCII character each
    [base, vocab_size)                     the seed's grammar tokens (grammar.Vocabulary)

A multi-character token moves the DFA by its whole text (automaton.token_dfa), so a
grammar can take `"name"` in one token or in six.

Grammar (compile_grammar, cached by the pattern): the TokenDfa plus what the guard needs
per request: the start, min_to_accept (the budget rule: a token is allowed only when the
DFA can still accept in the tokens left after it), and `final` states (accepting, nothing
more allowed), where the request ends with "stop". A state that accepts but could go on
(a number's digits) ends only by its budget, still valid.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from perfkit.engine.guard.automaton import Pattern, TokenDfa, token_dfa
from perfkit.engine.guard.grammar import TOKEN_TEXTS

CHAR_TEXTS = tuple(chr(c) for c in range(0x20, 0x7F) if chr(c) not in TOKEN_TEXTS)
STRUCTURED_TEXTS = CHAR_TEXTS + TOKEN_TEXTS  # grammar token k has id first_id + k
MAX_STATES = 20000  # a grammar's token DFA; beyond it the request is refused
MIN_TEXT_TOKENS = 16  # text tokens a vocabulary must keep below the grammar's


@dataclass(frozen=True)
class StructuredVocab:
    vocab_size: int

    @property
    def first_id(self) -> int:
        return self.vocab_size - len(STRUCTURED_TEXTS)

    def detokenize(self, ids: Iterable[int]) -> str:
        first = self.first_id
        return "".join(STRUCTURED_TEXTS[i - first] if i >= first else f"<{i}>" for i in ids)


def vocab_problem(vocab_size: int) -> str | None:
    """Why this vocabulary cannot hold structured output, or None."""
    need = len(STRUCTURED_TEXTS) + MIN_TEXT_TOKENS
    if vocab_size < need:
        return (f"the model's vocabulary ({vocab_size} tokens) is too small for structured "
                f"output: it needs {need} ({len(STRUCTURED_TEXTS)} grammar tokens)")
    return None


@dataclass(frozen=True, eq=False)
class Grammar:
    """One compiled grammar; shared by every request that asks for the same pattern."""

    dfa: TokenDfa
    vocab: StructuredVocab
    name: str  # what it constrains to, for messages ("tools", "json_schema", ...)

    @property
    def first_id(self) -> int:
        return self.vocab.first_id

    @property
    def num_tokens(self) -> int:
        return len(STRUCTURED_TEXTS)


@functools.lru_cache(maxsize=64)
def compile_grammar(pattern: Pattern, vocab_size: int, name: str) -> Grammar:
    """The pattern's grammar over this vocabulary (cached: patterns are frozen, hashable).
    Raises automaton.TooLarge or ValueError (no token string matches)."""
    problem = vocab_problem(vocab_size)
    if problem is not None:
        raise ValueError(problem)
    dfa = token_dfa(pattern, STRUCTURED_TEXTS, MAX_STATES)
    return Grammar(dfa, StructuredVocab(vocab_size), name)
