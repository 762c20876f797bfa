"""Patterns (automaton.py) of compact JSON text: strings, numbers, integer ranges, lists
and object members, knowing nothing of JSON Schema; json_schema.py picks among them by a
schema's keywords.

The text is what the grammar writes: no whitespace, ASCII only (`compact`), strings of
printable ASCII without `"` or `\\`, integers without leading zeros.
"""

from __future__ import annotations

import json
from typing import Any

from perfkit.engine.guard.automaton import Alt, Chars, Lit, Pattern, Repeat, Seq

STRING_CHARS = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}
DIGITS = frozenset("0123456789")


def compact(value: Any) -> str:
    """A JSON value as the grammar writes it (ASCII, no whitespace)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def seq(*parts: Pattern) -> Pattern:
    return Seq(tuple(parts))


def alt(options: list[Pattern]) -> Pattern:
    return options[0] if len(options) == 1 else Alt(tuple(options))


def quoted_string(lo: int, hi: int | None) -> Pattern:
    """A quoted string of lo..hi characters (hi None: unbounded)."""
    return seq(Lit('"'), Repeat(Chars(STRING_CHARS), lo, hi), Lit('"'))


def any_number(integer: bool) -> Pattern:
    """Any JSON number, or any integer (`integer`): no bounds."""
    whole = seq(Repeat(Lit("-"), 0, 1), _natural())
    if integer:
        return whole
    fraction = Repeat(seq(Lit("."), Repeat(Chars(DIGITS), 1, None)), 0, 1)
    exponent = Repeat(seq(Chars(frozenset("eE")), Repeat(Chars(frozenset("+-")), 0, 1),
                          Repeat(Chars(DIGITS), 1, None)), 0, 1)
    return seq(whole, fraction, exponent)


def comma_list(item: Pattern, lo: int, hi: int | None) -> Pattern:
    """lo..hi copies of `item` with commas between (hi None: unbounded), no brackets."""
    more = seq(Lit(","), item)
    if hi == 0:
        return Lit("")
    some = seq(item, Repeat(more, max(lo - 1, 0), None if hi is None else hi - 1))
    return some if lo >= 1 else Alt((Lit(""), some))


def object_members(entries: list[tuple[str, Pattern, bool]]) -> Pattern:
    """An object's (key, value, required) members without braces: keys in order, required
    ones present, optional ones skippable, commas between."""
    def member(i: int) -> Pattern:
        key, value, _ = entries[i]
        return seq(Lit(compact(key) + ":"), value)

    # after[i]: the members from i on, each preceded by a comma, the required ones
    # present (an optional one is a Repeat 0..1: the rest is shared, not copied)
    after: list[Pattern] = [Lit("")] * (len(entries) + 1)
    for i in range(len(entries) - 1, -1, -1):
        one = seq(Lit(","), member(i))
        after[i] = seq(one if entries[i][2] else Repeat(one, 0, 1), after[i + 1])
    # the first member written has no comma before it
    first: list[Pattern] = []
    for i in range(len(entries)):
        first.append(seq(member(i), after[i + 1]))
        if entries[i][2]:
            break
    else:
        first.append(Lit(""))  # every member optional: {} is valid
    return alt(first)


def _natural() -> Pattern:
    return Alt((Lit("0"), seq(Chars(DIGITS - {"0"}), Repeat(Chars(DIGITS), 0, None))))


def int_range(lo: int | None, hi: int | None) -> Pattern:
    """Decimal integers n with lo <= n <= hi (None: unbounded), no leading zeros."""
    options: list[Pattern] = []
    if lo is None or lo < 0:  # negatives: "-" and a magnitude in [max(1, -hi), -lo]
        top = None if lo is None else -lo
        options.append(seq(Lit("-"), _natural_range(max(1, -hi if hi is not None else 1),
                                                     top)))
    if hi is None or hi >= 0:
        options.append(_natural_range(max(0, lo if lo is not None else 0), hi))
    return alt(options)


def _natural_range(lo: int, hi: int | None) -> Pattern:
    """Naturals lo..hi (hi None: unbounded) without leading zeros, by digit count."""
    if hi is not None and lo > hi:
        return Alt(())
    options: list[Pattern] = []
    width = len(str(lo))
    last = len(str(hi)) if hi is not None else width
    for n in range(width, last + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = min(hi, 10 ** n - 1) if hi is not None else 10 ** n - 1
        if a <= b:
            options.append(_fixed(str(a).zfill(n), str(b).zfill(n)))
    if hi is None:  # every longer number
        options.append(seq(Chars(DIGITS - {"0"}), Repeat(Chars(DIGITS), last, None)))
    return alt(options)


def _fixed(a: str, b: str) -> Pattern:
    """Strings of len(a) digits between a and b (same length), digit by digit."""
    if not a:
        return Lit("")
    if a[0] == b[0]:
        return seq(Lit(a[0]), _fixed(a[1:], b[1:]))
    n = len(a) - 1
    lowest, highest = "0" * n, "9" * n
    options = [seq(Lit(a[0]), _fixed(a[1:], highest))]
    middle = frozenset(str(d) for d in range(int(a[0]) + 1, int(b[0])))
    if middle:
        options.append(seq(Chars(middle), Repeat(Chars(DIGITS), n, n)))
    options.append(seq(Lit(b[0]), _fixed(lowest, b[1:])))
    return Alt(tuple(options))
