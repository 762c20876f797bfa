"""Text prompts of an exact token count, for servers that take no token ids.

`--tokenizer DIR` loads DIR/tokenizer.json (a Hugging Face tokenizer, through the
`tokenizers` library) and renders each request's token ids as text that the tokenizer
encodes back to exactly as many tokens (special tokens replaced by ordinary ones; where
decode and encode do not round-trip, as with some BPE merges, the text is trimmed or
padded token by token until the count is exact). Without a tokenizer, chat prompts are
the words `t<id>`: perfkit serve and the tiny word-level tokenizer read them exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfkit.datasets.tokenizer import read_tokenizer
from perfkit.errors import PerfkitError

MAX_ROUNDS = 8  # trim/pad rounds before giving up on an exact count


def word_text(ids: tuple[int, ...]) -> str:
    return " ".join(f"t{i}" for i in ids)


class TextRenderer:
    """ids -> text of exactly len(ids) tokens under the tokenizer."""

    def __init__(self, tokenizer: Any, source: str) -> None:
        self.tok = tokenizer
        self.source = source
        specials = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
        self.vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self.specials = specials
        self.plain = [i for i in range(self.vocab_size) if i not in specials]
        if not self.plain:
            raise PerfkitError(f"--tokenizer {source}: the vocabulary has no ordinary tokens")

    def _ordinary(self, token: int) -> int:
        """The token itself where it is an ordinary one, else one picked by its value."""
        if token < self.vocab_size and token not in self.specials:
            return token
        return self.plain[token % len(self.plain)]

    def _count(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def render(self, ids: tuple[int, ...]) -> str:
        want = [self._ordinary(t) for t in ids]
        n, ids_now = len(want), want
        for _ in range(MAX_ROUNDS):
            text = self.tok.decode(ids_now, skip_special_tokens=True)
            got = self._count(text)
            if len(got) == n:
                return str(text)
            ids_now = got[:n] if len(got) > n else got + want[:n - len(got)]
        raise PerfkitError(f"--tokenizer {self.source}: cannot render {n} tokens as text "
                           "that encodes to exactly as many")


def load_renderer(path: Path) -> TextRenderer:
    return TextRenderer(read_tokenizer(path), str(path))
