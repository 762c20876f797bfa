"""Text <-> token ids for a model without a tokenizer. Deterministic and documented,
so any client can reproduce the ids:

- A prompt given as a list of ints is taken as token ids, unchanged (OpenAI's API
  allows it; perfkit's own client sends this, so a remote sweep computes exactly
  the ids, and hence the counts, of a local one).
- A prompt string is split on whitespace (`str.split()`); each word becomes one id:
  a word `t<N>` with 1 <= N < vocab_size is id N (so generated text maps back to
  the ids that produced it); any other word is
  `1 + int.from_bytes(blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
  % (vocab_size - 1)`, an id in [1, vocab_size). Id 0 is padding and never produced.
- Chat messages become one string, `<|role|> content` per message joined by a
  space, then ` <|assistant|>`; that string is tokenized as above.
- Output: each generated id renders as the word ` t<id>` (a leading space, one
  word per token). Tool-call requests render grammar tokens with their JSON texts
  instead, so their output is the tool call itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from perfkit.engine.guard.grammar import Vocabulary
from perfkit.engine.text import token_text

_WORD_ID = re.compile(r"t([1-9][0-9]*)")


def word_id(word: str, vocab_size: int) -> int:
    """One whitespace-free word -> a token id in [1, vocab_size)."""
    match = _WORD_ID.fullmatch(word)
    if match is not None and int(match.group(1)) < vocab_size:
        return int(match.group(1))
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return 1 + int.from_bytes(digest, "little") % (vocab_size - 1)


def tokenize(text: str, vocab_size: int) -> list[int]:
    return [word_id(word, vocab_size) for word in text.split()]


def chat_text(messages: Iterable[tuple[str, str]]) -> str:
    """(role, content) pairs -> the prompt string the model continues."""
    parts = [f"<|{role}|> {content}" for role, content in messages]
    return " ".join([*parts, "<|assistant|>"])


def render_token(token: int, grammar: Vocabulary | None = None) -> str:
    """` t<id>`; with the grammar (tool-call requests) its token text (e.g. `"name"`)."""
    return token_text(token, grammar)
