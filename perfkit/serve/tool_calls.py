"""A constrained output's text -> OpenAI `tool_calls`, whole or as streamed deltas.

The grammar (structured.py) fixes the text's shape, with no whitespace:
    tools      [{"name":"N","arguments":{...}},{"name":"M","arguments":{...}}]
    function   {...}   (the named function's arguments)
so the stream is cut by position, never guessed: a call's header (index, id, name) goes
out once its name is complete, then its arguments character by character as they come.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

_HEAD = re.compile(r'[\[,]\{"name":("(?:[^"\\]|\\.)*"),"arguments":')


def call_id() -> str:
    return f"chatcmpl-tool-{uuid.uuid4().hex[:24]}"


def whole_calls(text: str, function: str | None) -> list[dict[str, Any]]:
    """Every call in a finished output (text that parses: the guard accepted it)."""
    if function is not None:
        calls = [(function, json.loads(text))]
    else:
        calls = [(c["name"], c["arguments"]) for c in json.loads(text)]
    return [{"id": call_id(), "type": "function",
             "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))}}
            for name, args in calls]


class ToolCallStream:
    """Feed the text as it is released; each feed returns the tool_calls deltas it makes."""

    def __init__(self, function: str | None) -> None:
        self.function = function  # named: the text is its arguments, nothing to find
        self.text = ""
        self.pos = 0  # characters consumed
        self.index = -1  # the call being streamed
        self.in_args = False
        self.depth = 0  # brackets open inside the arguments
        self.in_string = False
        self.escaped = False

    def feed(self, piece: str) -> list[dict[str, Any]]:
        self.text += piece
        if self.function is not None:
            return self._named(piece)
        deltas: list[dict[str, Any]] = []
        while True:
            if not self.in_args:
                head = _HEAD.match(self.text, self.pos)
                if head is None:
                    return deltas
                self.index += 1
                self.pos, self.in_args = head.end(), True
                deltas.append({"index": self.index, "id": call_id(), "type": "function",
                               "function": {"name": json.loads(head.group(1)),
                                            "arguments": ""}})
            args = self._scan_arguments()
            if args:
                deltas.append({"index": self.index, "function": {"arguments": args}})
            if self.in_args:
                return deltas
            self.pos += 1  # the call object's closing brace

    def _named(self, piece: str) -> list[dict[str, Any]]:
        if self.index < 0:
            self.index = 0
            return [{"index": 0, "id": call_id(), "type": "function",
                     "function": {"name": self.function, "arguments": piece}}]
        return [{"index": 0, "function": {"arguments": piece}}] if piece else []

    def _scan_arguments(self) -> str:
        """Consume argument characters up to the end of the arguments object (or of the
        text so far); returns them."""
        start = self.pos
        while self.pos < len(self.text) and self.in_args:
            c = self.text[self.pos]
            self.pos += 1
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]":
                self.depth -= 1
                self.in_args = self.depth > 0
        return self.text[start:self.pos]
