"""One choice of a response: the engine's events of one output -> OpenAI choice parts.

A choice is one output of one prompt of a (batched) completion or of the chat: with n > 1
(or beam search) the prompt's one engine request streams several outputs, told apart by
their events' `index`, and each has a choice of its own. It keeps the
text the engine released (stop strings already cut, engine/detokenizer.py), the token
count for usage, logprobs in the endpoint's shape, and, for tool calls, the stream of
`tool_calls` deltas (tool_calls.py).
"""

from __future__ import annotations

from perfkit.engine.async_engine import RequestStream
from perfkit.engine.engine import Engine, TokenEvent
from perfkit.engine.sequence import TokenLogprobs
from perfkit.serve.logprobs import CompletionLogprobs, chat_logprobs, prompt_logprobs
from perfkit.serve.protocol import GenerateRequest, Prompt
from perfkit.serve.responses import Choice, Usage
from perfkit.serve.state import finish_reason
from perfkit.serve.tokens import render_token
from perfkit.serve.tool_calls import ToolCallStream, whole_calls


class ChoiceState:
    def __init__(self, index: int, gen: GenerateRequest, prompt: Prompt, stream: RequestStream,
                 engine: Engine, output: int = 0) -> None:
        self.index = index
        self.output = output  # which of the request's outputs this choice shows (n > 1)
        self.seq = stream.seq  # that output's sequence (a group member once it streams)
        self.ended = False  # the output's last token came
        self.gen = gen
        self.prompt = prompt
        self.stream = stream
        self.engine = engine
        self.num_tokens = 0
        self.text = ""  # released so far
        self.items: list[tuple[int, TokenLogprobs | None]] = []  # output tokens, logprobs
        # text offsets of output tokens start after an echoed prompt
        self.completion_lp = CompletionLogprobs(len(prompt.text) if gen.echo else 0)
        self.tools: ToolCallStream | None = None

    def render(self, token: int) -> str:
        return self.engine.token_text(self.seq, token)

    def tool_mode(self) -> bool:
        """Tool calls come back as tool_calls: a tools grammar the model stayed in."""
        s = self.gen.structured
        return self.gen.chat and s is not None and s.kind in ("tools", "function") \
            and (not s.optional or self.seq.grammar is not None)

    def usage(self) -> Usage:
        """This output's tokens; the prompt's (and its cached ones) on output 0 only."""
        head = self.output == 0
        return Usage(len(self.prompt.ids) if head else 0, self.num_tokens,
                     self.stream.seq.num_cached_tokens if head else 0)

    def finish(self) -> str:
        """The engine's reason; auto tool calls that completed end with "tool_calls"."""
        if self.stream.seq.group is None:
            reason = finish_reason(self.stream)
        else:  # one output of several: its own reason once its last token came
            own = self.seq.finish_reason if self.ended else None
            reason = "abort" if own in (None, "cancelled") else own
        s = self.gen.structured
        if reason == "stop" and s is not None and s.optional and self.tool_mode():
            return "tool_calls"
        return reason

    # -- streaming ----------------------------------------------------------------------
    def on_event(self, event: TokenEvent) -> Choice:
        first = self.num_tokens == 0
        self.num_tokens += 1
        self.seq, self.ended = event.seq, event.ends_output
        piece = event.text if event.text is not None else self.render(event.token)
        self.text += piece
        finish = self.finish() if self.ended else None
        stop_reason = self.seq.stop_reason if self.ended else None
        logprobs = self._chunk_logprobs(event, first)
        if first and self.gen.echo:
            piece = self.prompt.text + piece
        if self.tool_mode():
            self.tools = self.tools or ToolCallStream(self.gen.structured.function
                                                      if self.gen.structured else None)
            return Choice(self.index, None, finish, stop_reason, logprobs,
                          self.tools.feed(piece), first)
        return Choice(self.index, piece, finish, stop_reason, logprobs, None, first)

    def _chunk_logprobs(self, event: TokenEvent, first: bool) -> dict[str, object] | None:
        if self.stream.seq.params.logprobs is None:
            return None
        items: list[tuple[int, TokenLogprobs | None]] = [(event.token, event.logprobs)]
        if self.gen.chat:
            return chat_logprobs(items, self.render)
        return self._completion_logprobs(items, echo=first and self.gen.echo)

    def closing(self) -> Choice:
        """The empty chunk of a choice cut short (shutdown, engine failure)."""
        tools: list[dict[str, object]] | None = [] if self.tool_mode() else None
        return Choice(self.index, "", "abort", None, None, tools, self.num_tokens == 0)

    # -- whole ----------------------------------------------------------------------------
    def collect(self, event: TokenEvent) -> None:
        self.num_tokens += 1
        self.seq, self.ended = event.seq, event.ends_output
        self.text += event.text if event.text is not None else self.render(event.token)
        self.items.append((event.token, event.logprobs))

    def whole(self) -> Choice:
        finish = self.finish()
        text: str | None = self.prompt.text + self.text if self.gen.echo else self.text
        tool_calls = None
        s = self.gen.structured
        if self.tool_mode() and finish in ("stop", "tool_calls") and s is not None:
            tool_calls, text = whole_calls(self.text, s.function), None
        logprobs = None
        if self.stream.seq.params.logprobs is not None:
            if self.gen.chat:
                logprobs = chat_logprobs(self.items, self.render)
            else:
                logprobs = self._completion_logprobs(self.items, echo=self.gen.echo)
        return Choice(self.index, text, finish, self.seq.stop_reason, logprobs,
                      tool_calls, prompt_logprobs=self.prompt_logprobs())

    def prompt_logprobs(self) -> list[object] | None:
        found = self.stream.seq.prompt_logprobs
        return None if found is None else prompt_logprobs(found, render_token)

    def _prompt_items(self) -> list[tuple[int, TokenLogprobs | None]]:
        found = self.stream.seq.prompt_logprobs or []
        return [(t, found[i] if i < len(found) else None)
                for i, t in enumerate(self.prompt.ids)]

    def _completion_logprobs(self, items: list[tuple[int, TokenLogprobs | None]],
                             echo: bool) -> dict[str, object]:
        """Output tokens' entries; with echo the prompt's first (rendered as text)."""
        out = self.completion_lp.entries(items, self.render)
        if not echo:
            return out
        prompt_lp = CompletionLogprobs(0).entries(self._prompt_items(), render_token)
        return {k: prompt_lp[k] + out[k] for k in out}
