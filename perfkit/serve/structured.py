"""tools / tool_choice / response_format (and vLLM's guided_json, guided_choice,
structured_outputs) -> a grammar the guard enforces (engine/guard/structured.py).

    tool_choice "required"   a JSON list of calls, [{"name":N,"arguments":{...}},...],
                             each call's arguments its function's parameters schema
                             (one call when parallel_tool_calls is false)
    tool_choice {"function"} the named function's arguments object
    tool_choice "auto"       the same grammar as "required", but the first token may be
                             text instead: the model chooses (default with tools)
    tool_choice "none"       no grammar: tools are only described
    response_format          json_object (any object) or json_schema's schema

Every function's parameters are compiled (json_schema.py); what could not be promised to
validate is a 400 naming the keyword (`tools[0].function.parameters.properties.x.pattern`).
Compiled grammars are cached by their pattern, so a client repeating its tools pays once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from perfkit.engine.guard.automaton import Alt, Lit, Pattern, Repeat, Seq, TooLarge
from perfkit.engine.guard.json_schema import SchemaError, schema_pattern
from perfkit.engine.guard.json_syntax import compact
from perfkit.engine.guard.structured import Grammar, compile_grammar
from perfkit.serve.bounds import shown
from perfkit.serve.errors import invalid

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's function names
PRINTABLE = re.compile(r"[\x20-\x7e]*")

Kind = Literal["tools", "function", "json", "choice"]


@dataclass(frozen=True)
class Structured:
    kind: Kind  # tools: a list of calls; function: one named function's arguments
    grammar: Grammar
    optional: bool = False  # tool_choice auto: the first token may choose text
    function: str | None = None  # kind "function": its name


def _function(tool: Any, i: int) -> tuple[str, Any]:
    where = f"tools[{i}]"
    if not isinstance(tool, dict) or tool.get("type", "function") != "function" \
            or not isinstance(tool.get("function"), dict):
        raise invalid(where, 'expected {"type": "function", "function": {"name": ...}}')
    fn = tool["function"]
    name = fn.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise invalid(f"{where}.function.name", "expected 1-64 letters, digits, _ or -, got "
                      f"{shown(name)}")
    return name, fn.get("parameters")


def _arguments(params: Any, where: str) -> Pattern:
    if params is None:
        return Lit("{}")  # a function without parameters takes an empty object
    if not isinstance(params, dict) or params.get("type", "object") != "object":
        raise invalid(where, 'must describe an object ({"type": "object", ...})')
    try:
        return schema_pattern(params)
    except SchemaError as err:
        path = f"{where}.{err.path}" if err.path else where
        raise invalid(path, str(err).removeprefix(f"{err.path}: ")) from None


def _compile(pattern: Pattern, vocab_size: int, name: str, param: str) -> Grammar:
    try:
        return compile_grammar(pattern, vocab_size, name)
    except TooLarge as err:
        raise invalid(param, f"the grammar is too large for perfkit's guard ({err})") from None
    except ValueError as err:
        raise invalid(param, str(err)) from None


def _tools(body: dict[str, Any], vocab_size: int) -> Structured | None:
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not tools:
        if choice not in (None, "none"):
            raise invalid("tool_choice", "needs tools")
        return None
    functions = [_function(t, i) for i, t in enumerate(tools)]
    names = [n for n, _ in functions]
    if len(set(names)) != len(names):
        raise invalid("tools", "function names must be unique")
    choice = "auto" if choice is None else choice
    if choice == "none":
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if choice.get("type") == \
            "function" else None
        if name not in names:
            raise invalid("tool_choice", f"expected {{\"type\": \"function\", \"function\": "
                          f"{{\"name\": one of {names}}}}}, got {shown(choice)}")
        params = functions[names.index(name)][1]
        pattern = _arguments(params, f"tools[{names.index(name)}].function.parameters")
        return Structured("function", _compile(pattern, vocab_size, "tool arguments", "tools"),
                          function=name)
    if choice not in ("auto", "required"):
        raise invalid("tool_choice", f'expected "none", "auto", "required" or a named '
                      f"function, got {shown(choice)}")
    calls = [Seq((Lit('{"name":' + compact(n) + ',"arguments":'),
                  _arguments(p, f"tools[{i}].function.parameters"), Lit("}")))
             for i, (n, p) in enumerate(functions)]
    call: Pattern = calls[0] if len(calls) == 1 else Alt(tuple(calls))
    more = 0 if body.get("parallel_tool_calls") is False else None
    pattern = Seq((Lit("["), call, Repeat(Seq((Lit(","), call)), 0, more), Lit("]")))
    return Structured("tools", _compile(pattern, vocab_size, "tool calls", "tools"),
                      optional=choice == "auto")


def _schema_of(value: Any, param: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise invalid(param, f"not JSON: {err.msg}") from None
    return value


def _json(schema: Any, vocab_size: int, param: str) -> Structured:
    try:
        pattern = schema_pattern(schema)
    except SchemaError as err:
        raise invalid(f"{param}.{err.path}" if err.path else param,
                      str(err).removeprefix(f"{err.path}: ")) from None
    return Structured("json", _compile(pattern, vocab_size, "json", param))


def _choice(choices: Any, vocab_size: int, param: str) -> Structured:
    if not isinstance(choices, list) or not choices or not all(
            isinstance(c, str) and c and PRINTABLE.fullmatch(c) for c in choices):
        raise invalid(param, "expected a non-empty list of non-empty printable ASCII strings")
    pattern = Alt(tuple(Lit(c) for c in dict.fromkeys(choices)))
    return Structured("choice", _compile(pattern, vocab_size, "choice", param))


def _response_format(body: dict[str, Any], vocab_size: int) -> Structured | None:
    fmt = body.get("response_format")
    if fmt is None or fmt.get("type") == "text":
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return _json({"type": "object"}, vocab_size, "response_format")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise invalid("response_format.json_schema", 'expected {"name": ..., "schema": '
                          "{...}}")
        return _json(spec["schema"], vocab_size, "response_format.json_schema.schema")
    raise invalid("response_format.type", 'expected "text", "json_object" or "json_schema", '
                  f"got {shown(kind)}")


def _guided(body: dict[str, Any], vocab_size: int) -> Structured | None:
    if body.get("guided_json") is not None:
        return _json(_schema_of(body["guided_json"], "guided_json"), vocab_size, "guided_json")
    if body.get("guided_choice") is not None:
        return _choice(body["guided_choice"], vocab_size, "guided_choice")
    outputs = body.get("structured_outputs")
    if outputs is None:
        return None
    unknown = sorted(set(outputs) - {"json", "choice", "json_object"})
    if unknown:
        raise invalid(f"structured_outputs.{unknown[0]}", "not supported (json, choice and "
                      "json_object only)", "unsupported_value")
    if outputs.get("json") is not None:
        return _json(_schema_of(outputs["json"], "structured_outputs.json"), vocab_size,
                     "structured_outputs.json")
    if outputs.get("choice") is not None:
        return _choice(outputs["choice"], vocab_size, "structured_outputs.choice")
    if outputs.get("json_object"):
        return _json({"type": "object"}, vocab_size, "structured_outputs.json_object")
    return None


def parse_structured(body: dict[str, Any], chat: bool, vocab_size: int) -> Structured | None:
    """The request's grammar, or None; at most one way of asking for one."""
    found = [s for s in ((_tools(body, vocab_size) if chat else None),
                         _response_format(body, vocab_size), _guided(body, vocab_size))
             if s is not None]
    if len(found) > 1:
        raise invalid("response_format", "only one of tools (with tool_choice other than "
                      "none), response_format and guided output per request")
    return found[0] if found else None
