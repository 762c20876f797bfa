"""JSON Schema -> a pattern (automaton.py) of compact JSON that validates against it:
the schema's keywords, references and composition read here, into the patterns of
JSON text that json_syntax.py builds.

What is written: no whitespace; object keys in `properties` order, required ones always,
optional ones skippable, no other keys; strings of printable ASCII without `"` or `\\`
(every token of the grammar is printable ASCII); integers in decimal, within minimum /
maximum (exclusive ones too) exactly; numbers as JSON numbers (integers only when bounded,
which is still a valid number); arrays within minItems / maxItems. A schema with no type
(or `{}`) is any JSON value, containers nested at most ANY_DEPTH deep.

Honoured: type (one or a list), properties, required, additionalProperties (nothing
extra is written, so any value holds), items, minItems, maxItems, minLength, maxLength,
enum, const, anyOf, oneOf (branches of different types only: the output must match
exactly one), allOf of one schema, $ref to #/$defs or #/definitions (not recursive),
minimum, maximum, exclusiveMinimum, exclusiveMaximum. Annotations are ignored (title,
description, default, examples, format, ...). Any other keyword (pattern, multipleOf,
uniqueItems, ...) is refused with SchemaError naming where it is: the output could not
be promised to validate.
"""

from __future__ import annotations

import math
from typing import Any

from perfkit.engine.guard.automaton import Alt, Lit, Pattern
from perfkit.engine.guard.json_syntax import (
    alt,
    any_number,
    comma_list,
    compact,
    int_range,
    object_members,
    quoted_string,
    seq,
)

ANY_DEPTH = 2  # containers in a schema-less value: {"a": [1, {"b": 2}]} is depth 2
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "format", "contentMediaType", "contentEncoding",
    "$defs", "definitions", "additionalProperties", "patternProperties",
    "unevaluatedProperties", "strict", "discriminator", "nullable",
})
HANDLED = frozenset({
    "type", "properties", "required", "items", "minItems", "maxItems", "minLength",
    "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum",
})
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


class SchemaError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path  # where in the schema, dotted ("properties.city.pattern")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: list[str] = []  # $ref chain being expanded (recursion check)

    def schema(self, s: Any, path: str, depth: int = ANY_DEPTH) -> Pattern:
        if s is True or s == {}:
            return self.any_value(depth)
        if not isinstance(s, dict):
            raise SchemaError(path, f"expected a schema object, got {compact(s)[:40]}")
        unknown = sorted(set(s) - HANDLED - ANNOTATIONS)
        if unknown:
            raise SchemaError(_join(path, unknown[0]), "not supported by perfkit's guard "
                              "(the output could not be promised to validate)")
        if "$ref" in s:
            return self._ref(s, path, depth)
        if "const" in s:
            return Lit(compact(s["const"]))
        if "enum" in s:
            return self._enum(s["enum"], path)
        if "anyOf" in s or "oneOf" in s or "allOf" in s:
            return self._composition(s, path, depth)
        kind = s.get("type")
        if kind is None:
            return self.any_value(depth)
        kinds = kind if isinstance(kind, list) else [kind]
        if not kinds or any(k not in TYPES for k in kinds):
            raise SchemaError(_join(path, "type"), f"expected one of {', '.join(TYPES)}")
        return alt([self.typed(k, s, path, depth) for k in dict.fromkeys(kinds)])

    def typed(self, kind: str, s: dict[str, Any], path: str, depth: int) -> Pattern:
        if kind == "object":
            return self.object(s, path, depth)
        if kind == "array":
            return self.array(s, path, depth)
        if kind == "string":
            return self.string(s, path)
        if kind in ("integer", "number"):
            return self.number(s, path, integer=kind == "integer")
        return Alt((Lit("true"), Lit("false"))) if kind == "boolean" else Lit("null")

    # -- composition and references --------------------------------------------------
    def _ref(self, s: dict[str, Any], path: str, depth: int) -> Pattern:
        ref = s["$ref"]
        parts = ref.split("/") if isinstance(ref, str) else []
        if len(parts) != 3 or parts[0] != "#" or parts[1] not in ("$defs", "definitions"):
            raise SchemaError(_join(path, "$ref"), "only #/$defs/NAME or #/definitions/NAME")
        if ref in self.refs:
            raise SchemaError(_join(path, "$ref"), f"recursive reference {ref} is not "
                              "supported (the grammar is finite-state)")
        target = self.root.get(parts[1], {}).get(parts[2])
        if target is None:
            raise SchemaError(_join(path, "$ref"), f"{ref} is not defined")
        self.refs.append(ref)
        try:
            return self.schema(target, f"{parts[1]}.{parts[2]}", depth)
        finally:
            self.refs.pop()

    def _enum(self, values: Any, path: str) -> Pattern:
        if not isinstance(values, list) or not values:
            raise SchemaError(_join(path, "enum"), "expected a non-empty list")
        return alt([Lit(text) for text in dict.fromkeys(compact(v) for v in values)])

    def _composition(self, s: dict[str, Any], path: str, depth: int) -> Pattern:
        key = next(k for k in ("anyOf", "oneOf", "allOf") if k in s)
        branches = s[key]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(_join(path, key), "expected a non-empty list of schemas")
        if key == "allOf":
            if len(branches) != 1:
                raise SchemaError(_join(path, key), "only one schema is supported")
            return self.schema(branches[0], _join(path, "allOf[0]"), depth)
        if key == "oneOf":
            self._distinct_types(branches, _join(path, key))
        rest = {k: v for k, v in s.items() if k != key}
        return alt([self.schema({**rest, **b} if isinstance(b, dict) else b,
                                 f"{_join(path, key)}[{i}]", depth)
                     for i, b in enumerate(branches)])

    @staticmethod
    def _distinct_types(branches: list[Any], path: str) -> None:
        """oneOf: written as anyOf, which holds only when no value matches two branches."""
        seen: set[str] = set()
        for b in branches:
            kind = b.get("type") if isinstance(b, dict) else None
            group = {"integer": "number"}.get(kind, kind) if isinstance(kind, str) else None
            if group is None or group in seen:
                raise SchemaError(path, "branches must each have a different single type "
                                  "(integer and number count as one); use anyOf")
            seen.add(group)

    # -- containers ------------------------------------------------------------------
    def object(self, s: dict[str, Any], path: str, depth: int) -> Pattern:
        props = s.get("properties")
        required = s.get("required", [])
        if props is None and not required:
            return self._any_object(depth)
        if not isinstance(props or {}, dict) or not isinstance(required, list):
            raise SchemaError(path, "properties must be an object and required a list")
        props = dict(props or {})
        for key in required:
            props.setdefault(key, {})  # required but not described: any value
        entries = [(k, self.schema(v, _join(_join(path, "properties"), k), depth - 1),
                    k in required) for k, v in props.items()]
        return seq(Lit("{"), object_members(entries), Lit("}"))

    def array(self, s: dict[str, Any], path: str, depth: int) -> Pattern:
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        if not isinstance(lo, int) or (hi is not None and (not isinstance(hi, int) or hi < lo)):
            raise SchemaError(_join(path, "maxItems"), "minItems <= maxItems, integers")
        item = self.schema(s.get("items", {}), _join(path, "items"), depth - 1)
        return seq(Lit("["), comma_list(item, lo, hi), Lit("]"))

    # -- scalars ---------------------------------------------------------------------
    def string(self, s: dict[str, Any], path: str) -> Pattern:
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        if not isinstance(lo, int) or (hi is not None and (not isinstance(hi, int) or hi < lo)):
            raise SchemaError(_join(path, "maxLength"), "minLength <= maxLength, integers")
        return quoted_string(lo, hi)

    def number(self, s: dict[str, Any], path: str, integer: bool) -> Pattern:
        lo, hi = _bounds(s, path)
        return any_number(integer) if lo is None and hi is None else int_range(lo, hi)

    # -- values without a schema -----------------------------------------------------
    def any_value(self, depth: int) -> Pattern:
        scalars: list[Pattern] = [
            self.string({}, ""), self.number({}, "", integer=False),
            Lit("true"), Lit("false"), Lit("null")]
        if depth <= 0:
            return alt(scalars)
        return alt([*scalars, self._any_object(depth), seq(
            Lit("["), comma_list(self.any_value(depth - 1), 0, None), Lit("]"))])

    def _any_object(self, depth: int) -> Pattern:
        if depth <= 0:
            return Lit("{}")
        pair = seq(self.string({}, ""), Lit(":"), self.any_value(depth - 1))
        return seq(Lit("{"), comma_list(pair, 0, None), Lit("}"))


def _bounds(s: dict[str, Any], path: str) -> tuple[int | None, int | None]:
    """Integer bounds [lo, hi] from minimum / maximum / exclusive* (None: unbounded)."""
    lo: int | None = None
    hi: int | None = None
    for key, is_lo, exclusive in (("minimum", True, False), ("exclusiveMinimum", True, True),
                                  ("maximum", False, False), ("exclusiveMaximum", False, True)):
        value = s.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise SchemaError(_join(path, key), "expected a number")
        if is_lo:
            bound = math.floor(value) + 1 if exclusive else math.ceil(value)
            lo = bound if lo is None else max(lo, bound)
        else:
            bound = math.ceil(value) - 1 if exclusive else math.floor(value)
            hi = bound if hi is None else min(hi, bound)
    if lo is not None and hi is not None and lo > hi:
        raise SchemaError(path, f"no integer lies in [{lo}, {hi}]")
    return lo, hi


def schema_pattern(schema: Any, path: str = "") -> Pattern:
    """The pattern of `schema`; SchemaError naming the keyword perfkit cannot honour."""
    root = schema if isinstance(schema, dict) else {}
    return _Compiler(root).schema(schema, path)
