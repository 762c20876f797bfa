"""Write plain dicts (str/int/float/bool/list/dict) as TOML.

Scalars and lists of scalars first, then sub-tables; lists of tables become
arrays of tables. JSON string escapes are a subset of TOML basic-string escapes.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_scalar(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum()
    return key if bare and key.isascii() else json.dumps(key)


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def dumps(data: dict[str, Any], prefix: str = "") -> str:
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) or _is_table_list(value):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_scalar(value)}")
    out = "\n".join(lines)
    for key, value in tables:
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        if isinstance(value, dict):
            body = dumps(value, name)
            out += f"\n\n[{name}]\n{body}" if body.strip() else f"\n\n[{name}]"
        else:
            for item in value:
                out += f"\n\n[[{name}]]\n" + dumps(item, name)
    return out.strip("\n") + ("\n" if not prefix else "")
