"""The JSON Schema of a sweep result, generated from the model's type hints.

`python -m perfkit.result.schema` prints it; the shipped perfkit/result/sweep.schema.json
is this output (a test keeps them equal)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Union

from perfkit.result.codec import hints, json_name
from perfkit.result.sweep import SCHEMA, SweepResult

SCHEMA_FILE = Path(__file__).with_name("sweep.schema.json")


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp is Any:
        return {}
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        return {"anyOf": [_schema(a, defs) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return {"type": "array", "items": _schema(item, defs)}
    if origin is dict:
        _, item = typing.get_args(tp) or (str, Any)
        return {"type": "object", "additionalProperties": _schema(item, defs)}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: recursion and sharing
            defs[name] = _object(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    scalar = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "string",
              type(None): "null"}
    return {"type": scalar[tp]}


def _object(cls: Any, defs: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        name = json_name(f)
        if name is None:
            continue
        props[name] = _schema(hints(cls)[f.name], defs)
        required.append(name)  # the writer writes every field
    return {"type": "object", "properties": props, "required": required}


def sweep_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    top = _object(SweepResult, defs)
    top["properties"]["schema"] = {"const": SCHEMA}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA, "title": "perfkit sweep result", **top, "$defs": defs}


def main() -> None:
    print(json.dumps(sweep_schema(), indent=1))


if __name__ == "__main__":
    main()
