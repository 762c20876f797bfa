"""One JSON codec for every result type: dataclasses <-> JSON values, driven by type hints.

to_json: dataclasses become objects in field order, paths strings, NaN/inf null; a field
with metadata {"json": False} is left out, {"json": "name"} renames it.
from_json: the reverse, checked against the hints; a key missing from the data takes the
field's default; unknown keys are ignored (newer writers may add sections). A value of the
wrong type raises ResultError naming its path ("levels[0].counts.steps: ...").
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, Union

from perfkit.errors import PerfkitError

T = TypeVar("T")


class ResultError(PerfkitError):
    """A result document does not match the model."""


def json_name(f: dataclasses.Field[Any]) -> str | None:
    """The field's key in JSON; None when it is not written."""
    meta = f.metadata.get("json", True)
    if meta is False:
        return None
    return meta if isinstance(meta, str) else f.name


def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            name = json_name(f)
            if name is not None:
                out[name] = to_json(getattr(value, f.name))
        return out
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


@cache
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(cls: type[T], data: Any, where: str = "") -> T:
    """`data` (parsed JSON) as an instance of dataclass `cls`."""
    return typing.cast(T, _decode(cls, data, where or cls.__name__))


def _fail(where: str, expected: str, got: Any) -> ResultError:
    shown = repr(got)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ResultError(f"{where}: expected {expected}, got {shown}")


def _decode(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _decode(inner[0], data, where)
        raise _fail(where, str(tp), data)  # pragma: no cover - the model has no such union
    if origin is typing.Literal:
        if data not in typing.get_args(tp):
            raise _fail(where, " or ".join(map(repr, typing.get_args(tp))), data)
        return data
    if origin is list:
        if not isinstance(data, list):
            raise _fail(where, "a list", data)
        (item,) = typing.get_args(tp) or (Any,)
        return [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise _fail(where, "an object", data)
        _, item = typing.get_args(tp) or (str, Any)
        return {k: _decode(item, v, f"{where}.{k}") for k, v in data.items()}
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    return _decode_scalar(tp, data, where)


def _decode_scalar(tp: Any, data: Any, where: str) -> Any:
    if tp is bool:
        if not isinstance(data, bool):
            raise _fail(where, "true or false", data)
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise _fail(where, "an integer", data)
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _fail(where, "a number", data)
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise _fail(where, "a string", data)
        return data
    if tp is Path:
        if not isinstance(data, str):
            raise _fail(where, "a path", data)
        return Path(data)
    raise _fail(where, f"a {tp!r} (no decoder)", data)  # pragma: no cover


def _decode_dataclass(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise _fail(where, f"an object ({cls.__name__})", data)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        name = json_name(f)
        if name is None or name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ResultError(f"{where}: missing {name or f.name!r}")
            continue
        kwargs[f.name] = _decode(hints(cls)[f.name], data[name], f"{where}.{name}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ResultError(f"{where}: {err}") from None
