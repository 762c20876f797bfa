"""Build typed dataclasses from plain dicts (parsed TOML), rejecting anything unknown.

`build(cls, data, where)` walks the dataclass fields and checks every value
against its annotation: int, float, bool, str, Literal[...], X | None,
list[X], dict[str, X] and nested dataclasses. Unknown keys raise with the
closest valid key. Each dataclass may define `check(self) -> None` to
validate ranges after construction (raising `FieldError`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")
INT_LIMIT = 1 << 63  # TOML integers are 64-bit; beyond that no count makes sense


class FieldError(ValueError):
    """A value at a dotted path is wrong; `path` names it, the message says what was expected."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.detail = message


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp) if a is not type(None))
    if origin is list:
        return f"a list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        return f"a table of {_type_name(get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _describe(value: Any) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "table"}
    return f"{kind.get(type(value), type(value).__name__)} {value!r}"[:80]


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        tables = [arg for arg in options if dataclasses.is_dataclass(arg)]
        if isinstance(value, dict) and len(tables) == 1:  # `int | Dist`: the table's error
            return _convert(tables[0], value, where)
        for arg in options:
            try:
                return _convert(arg, value, where)
            except FieldError:
                if len(options) == 1:  # `float | None`: the one type's own message
                    raise
                continue
        raise FieldError(where, f"expected {_type_name(tp)}, got {_describe(value)}")
    if origin is Literal:
        if value in get_args(tp) and type(value) is not bool:
            return value
        raise FieldError(where, f"expected {_type_name(tp)}, got {_describe(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise FieldError(where, f"expected {_type_name(tp)}, got {_describe(value)}")
        (item,) = get_args(tp)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise FieldError(where, f"expected {_type_name(tp)}, got {_describe(value)}")
        _, item = get_args(tp)
        return {str(k): _convert(item, v, _join(where, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise FieldError(where, f"expected a table, got {_describe(value)}")
        return build(typing.cast(type, tp), value, where)
    return _scalar(tp, value, where)


def _scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if not -INT_LIMIT <= value < INT_LIMIT:
                raise FieldError(where, f"{str(value)[:40]} is out of range (a 64-bit integer)")
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not -INT_LIMIT <= value <= INT_LIMIT or not math.isfinite(value):
                raise FieldError(where, f"expected a finite number, got {str(value)[:40]}")
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is Any:
        return value
    raise FieldError(where, f"expected {_type_name(tp)}, got {_describe(value)}")


def build(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Construct `cls` from `data`; unknown keys and wrong types raise FieldError."""
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(typing.cast(Any, cls)) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            raise FieldError(_join(where, key), unknown_key_message(key, list(fields)))
        kwargs[key] = _convert(hints[key], value, _join(where, key))
    missing = [
        name
        for name, f in fields.items()
        if name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise FieldError(_join(where, missing[0]), "is required but missing")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        try:
            check()
        except FieldError as err:
            raise FieldError(_join(where, err.path), err.detail) from None
    return obj


def unknown_key_message(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown key '{key}'{hint} (valid keys: {', '.join(valid)})"


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict, dropping None values (TOML has no null)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = to_dict(getattr(obj, f.name))
            if value is not None:
                out[f.name] = value
        return out
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj
