"""The documented text <-> ids mapping: pinned values, so clients can rely on it."""

from __future__ import annotations

import hashlib

from perfkit.engine.guard.grammar import Vocabulary
from perfkit.serve.tokens import chat_text, render_token, tokenize, word_id


def test_pinned_ids() -> None:
    # `t<N>` with 1 <= N < vocab is N; anything else (t0, t512 at vocab 512, T7) is hashed
    assert tokenize("hello world t7 t0 t512 T7", 512) == [480, 26, 7, 221, 236, 91]
    assert tokenize("  hello\n\tworld ", 512) == [480, 26]


def test_hash_is_blake2b_of_the_word() -> None:
    digest = hashlib.blake2b("héllo".encode(), digest_size=8).digest()
    assert word_id("héllo", 1000) == 1 + int.from_bytes(digest, "little") % 999


def test_chat_text_and_rendering_round_trip() -> None:
    assert chat_text([("system", "be brief"), ("user", "hi")]) == \
        "<|system|> be brief <|user|> hi <|assistant|>"
    ids = [5, 300, 511]
    assert tokenize("".join(render_token(t) for t in ids), 512) == ids
    grammar = Vocabulary(512)
    assert render_token(grammar.id('"name"'), grammar) == '"name"'
