"""A request's output text, token by token, and its stop strings (vLLM's incremental
detokenizer: vllm/v1/engine/detokenizer.py, same rules).

    append(token text, ...) -> the stop string matched, or None
    take(finished)          -> the text not yet handed out (what one streamed chunk carries)

- Stop strings are searched only in new text (plus the length of the stop string less one
  before it, for a match that straddles tokens), and only once the output has more than
  `min_tokens` tokens: text of the first min_tokens tokens is never searched.
- The first stop string of the list that matches wins; the output is cut where it begins
  (or after it, with include_stop_str_in_output).
- While stop strings can still match, `take` holds back the last (longest stop - 1)
  characters unless the request finished: a streamed chunk never shows text that a stop
  string later takes back.
- A request ended by a stop token (EOS or stop_token_ids) does not show that token's text,
  unless include_stop_str_in_output.
"""

from __future__ import annotations


class Detokenizer:
    def __init__(self, stop: tuple[str, ...] = (), include_stop: bool = False,
                 min_tokens: int = 0) -> None:
        self.stop = stop
        self.include_stop = include_stop  # include_stop_str_in_output
        self.min_tokens = min_tokens
        # characters held back from streaming while a stop string may still match
        self.holdback = max(map(len, stop)) - 1 if stop and not include_stop else 0
        self.text = ""  # the output text, cut at a matched stop string
        self.num_tokens = 0  # output tokens appended
        self._sent = 0  # characters of text handed out by take()

    def append(self, piece: str, stop_token: bool = False) -> str | None:
        """Add one output token's text; `stop_token`: the token ended the request (its
        text is dropped unless include_stop). Returns the stop string matched, or None."""
        self.num_tokens += 1
        if stop_token and not self.include_stop:
            return None
        before = len(self.text)
        self.text += piece
        if not self.stop or self.num_tokens <= self.min_tokens:
            return None
        return self._match(len(self.text) - before)

    def _match(self, new_chars: int) -> str | None:
        for stop in self.stop:
            start = max(0, len(self.text) - new_chars - len(stop) + 1)
            at = self.text.find(stop, start)
            if at < 0:
                continue
            end = at + len(stop) if self.include_stop else at
            self.text = self.text[:end]
            return stop
        return None

    def take(self, finished: bool) -> str:
        """The text not handed out yet, less the holdback while unfinished."""
        end = len(self.text) if finished else max(self._sent, len(self.text) - self.holdback)
        piece = self.text[self._sent:end]
        self._sent = end
        return piece
