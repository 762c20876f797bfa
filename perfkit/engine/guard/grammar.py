"""The tool-call grammar over the synthetic vocabulary: tokens, tools, detokenize, validate.

Vocabulary. The model's vocab is `vocab_size` ids with no text. The top
`len(TOKEN_TEXTS)` ids are reserved for the grammar: grammar token k is vocab id
`base + k`, `base = vocab_size - len(TOKEN_TEXTS)` (512 -> base 467). Their texts,
in order:

    {  }  :  ,  "                              structure ("  opens/closes a free string)
    "name"  "arguments"                        top-level keys
    "get_weather"  "search"  "set_timer"       tool names (the allowed set)
    "city" "unit" "days" "query" ...           argument keys (each once)
    "celsius"  "fahrenheit"                    enum members
    true  false                                booleans
    0 1 2 ... 9                                digits
    paris tokyo lima ...                       string chunks (no quote, no backslash)

Every other id renders as `<id>` and is never legal inside a tool call.

A tool call is, with no whitespace and the keys in this order:

    {"name":TOOL,"arguments":{"k1":v1,"k2":v2}}

where the argument keys follow the tool's declared order, required ones always
present, optional ones skippable. Values by type: string = `"` 1..MAX_CHUNKS
chunks `"`; integer = `0` or [1-9][0-9]* of at most MAX_DIGITS digits; boolean =
true|false; enum = one member token. `validate` checks a detokenized call with
`json.loads` and the tool schemas, independently of the DFA (toolcall_dfa.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

ParamType = Literal["string", "integer", "boolean", "enum"]

MAX_CHUNKS = 4  # chunk tokens per string value
MAX_DIGITS = 4  # digit tokens per integer value (0 .. 9999)


@dataclass(frozen=True)
class Param:
    key: str
    type: ParamType
    required: bool = True
    values: tuple[str, ...] = ()  # enum members


@dataclass(frozen=True)
class Tool:
    name: str
    params: tuple[Param, ...]  # the order the grammar emits them in


TOOLS: tuple[Tool, ...] = (
    Tool("get_weather", (
        Param("city", "string"),
        Param("unit", "enum", required=False, values=("celsius", "fahrenheit")),
        Param("days", "integer", required=False),
    )),
    Tool("search", (
        Param("query", "string"),
        Param("limit", "integer", required=False),
        Param("safe", "boolean", required=False),
    )),
    Tool("set_timer", (
        Param("seconds", "integer"),
        Param("label", "string", required=False),
    )),
)

STRUCTURE = ("{", "}", ":", ",", '"')
DIGITS = tuple(str(d) for d in range(10))
BOOLEANS = ("true", "false")
CHUNKS = ("paris", "tokyo", "lima", " ", "news", "rain", "cat", "tea")


def _quoted(words: Iterable[str]) -> tuple[str, ...]:
    return tuple(json.dumps(w) for w in dict.fromkeys(words))  # dedupe, keep order


def _token_texts() -> tuple[str, ...]:
    params = [p for tool in TOOLS for p in tool.params]
    return (
        STRUCTURE
        + _quoted(("name", "arguments"))
        + _quoted(t.name for t in TOOLS)
        + _quoted(p.key for p in params)
        + _quoted(v for p in params for v in p.values)
        + BOOLEANS + DIGITS + CHUNKS
    )


TOKEN_TEXTS = _token_texts()  # grammar token k's text
assert len(set(TOKEN_TEXTS)) == len(TOKEN_TEXTS)
assert all('"' not in c and "\\" not in c for c in CHUNKS)


@dataclass(frozen=True)
class Vocabulary:
    """Grammar token k <-> vocab id base + k, the top len(TOKEN_TEXTS) ids of the model's vocab."""

    vocab_size: int

    @property
    def num_tokens(self) -> int:
        return len(TOKEN_TEXTS)

    @property
    def base(self) -> int:
        return self.vocab_size - len(TOKEN_TEXTS)

    def id(self, text: str) -> int:
        return self.base + TOKEN_TEXTS.index(text)

    def ids(self, texts: Iterable[str]) -> list[int]:
        return [self.id(t) for t in texts]

    def detokenize(self, ids: Iterable[int]) -> str:
        base = self.base
        return "".join(TOKEN_TEXTS[i - base] if i >= base else f"<{i}>" for i in ids)


def _check_value(param: Param, value: Any) -> str | None:
    ok = {
        "string": isinstance(value, str) and value != "",
        "integer": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "boolean": isinstance(value, bool),
        "enum": value in param.values,
    }[param.type]
    return None if ok else f"{param.key}: expected {param.type}, got {value!r}"


def _check_arguments(tool: Tool, args: Any) -> str | None:
    if not isinstance(args, dict):
        return "arguments: expected an object"
    params = {p.key: p for p in tool.params}
    unknown = [k for k in args if k not in params]
    if unknown:
        return f"{tool.name}: unknown argument {unknown[0]!r}"
    missing = [p.key for p in tool.params if p.required and p.key not in args]
    if missing:
        return f"{tool.name}: missing argument {missing[0]!r}"
    for key, value in args.items():
        err = _check_value(params[key], value)
        if err:
            return err
    return None


def validate(text: str) -> str | None:
    """Why `text` is not a valid tool call (JSON + schema), or None when it is."""
    try:
        call = json.loads(text)
    except json.JSONDecodeError as err:
        return f"not JSON: {err.msg} at {err.pos}"
    if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
        return "expected an object with exactly 'name' and 'arguments'"
    tool = next((t for t in TOOLS if t.name == call["name"]), None)
    if tool is None:
        return f"unknown tool {call['name']!r}"
    return _check_arguments(tool, call["arguments"])
