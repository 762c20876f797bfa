"""Patterns -> a character DFA -> a token DFA: the machinery under structured output
(json_schema.py writes the patterns; structured.py keeps the compiled grammars).

A pattern is a small regular-expression tree: Lit (a string), Chars (one character of a
set), Seq, Alt, Repeat (lo..hi copies, hi None = unbounded). It is instantiated into an
NFA (Thompson's construction, epsilon edges), made deterministic by the subset
construction over characters, then lifted to tokens: a token's edge from a state is the
walk of its text through the character DFA (-1 when a character is illegal), as
outlines and xgrammar lift theirs. Last, `min_to_accept` (BFS backwards over token edges)
and dead states (no way to accept) removed, so every state left can finish.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfkit.engine.guard.dfa import steps_to


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Chars:
    chars: frozenset[str]


@dataclass(frozen=True)
class Seq:
    parts: tuple[Pattern, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Pattern, ...]


@dataclass(frozen=True)
class Repeat:
    item: Pattern
    lo: int
    hi: int | None  # None: unbounded


Pattern = Lit | Chars | Seq | Alt | Repeat
INF = np.iinfo(np.int32).max  # min_to_accept of a state that cannot accept


class TooLarge(ValueError):
    """The automaton would exceed the state limit."""


class _Nfa:
    def __init__(self, limit: int) -> None:
        self.chars: list[list[tuple[str, int]]] = []
        self.eps: list[list[int]] = []
        self.limit = limit

    def new(self) -> int:
        if len(self.chars) >= self.limit:
            raise TooLarge(f"more than {self.limit} automaton states")
        self.chars.append([])
        self.eps.append([])
        return len(self.chars) - 1

    def build(self, p: Pattern, src: int) -> int:
        """Add `p` from state src; returns its end state."""
        if isinstance(p, Lit):
            for c in p.text:
                dst = self.new()
                self.chars[src].append((c, dst))
                src = dst
            return src
        if isinstance(p, Chars):
            dst = self.new()
            self.chars[src].extend((c, dst) for c in sorted(p.chars))
            return dst
        if isinstance(p, Seq):
            for part in p.parts:
                src = self.build(part, src)
            return src
        if isinstance(p, Alt):
            end = self.new()
            for option in p.options:
                self.eps[self.build(option, src)].append(end)
            return end
        return self._repeat(p, src)

    def _repeat(self, p: Repeat, src: int) -> int:
        for _ in range(p.lo):
            src = self.build(p.item, src)
        end = self.new()
        self.eps[src].append(end)
        if p.hi is None:  # a loop: src -item-> back to src
            self.eps[self.build(p.item, src)].append(src)
            return end
        for _ in range(p.hi - p.lo):
            src = self.build(p.item, src)
            self.eps[src].append(end)
        return end


def _closure(nfa: _Nfa, states: frozenset[int]) -> frozenset[int]:
    stack, seen = list(states), set(states)
    while stack:
        for nxt in nfa.eps[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return frozenset(seen)


def char_dfa(pattern: Pattern, limit: int) -> tuple[list[dict[str, int]], list[bool]]:
    """(edges per state: char -> state, accepting per state); state 0 is the start."""
    nfa = _Nfa(limit * 8)
    end = nfa.build(pattern, nfa.new())
    start = _closure(nfa, frozenset({0}))
    index = {start: 0}
    edges: list[dict[str, int]] = [{}]
    accepting = [end in start]
    queue: deque[frozenset[int]] = deque([start])
    while queue:
        current = queue.popleft()
        moves: dict[str, set[int]] = {}
        for s in current:
            for c, dst in nfa.chars[s]:
                moves.setdefault(c, set()).add(dst)
        for c, dsts in moves.items():
            target = _closure(nfa, frozenset(dsts))
            if target not in index:
                if len(index) >= limit:
                    raise TooLarge(f"more than {limit} automaton states")
                index[target] = len(edges)
                edges.append({})
                accepting.append(end in target)
                queue.append(target)
            edges[index[current]][c] = index[target]
    return edges, accepting


@dataclass(frozen=True, eq=False)
class TokenDfa:
    """A token-level DFA over `texts` (token k has text texts[k]), every state live."""

    next_state: np.ndarray  # [num_states, num_tokens] int32, -1 = illegal
    min_to_accept: np.ndarray  # [num_states] int32: fewest tokens to an accepting state
    accepting: np.ndarray  # [num_states] bool
    final: np.ndarray  # [num_states] bool: accepting and no legal token left
    start: int

    @property
    def num_states(self) -> int:
        return int(self.next_state.shape[0])


def _walk(edges: list[dict[str, int]], state: int, text: str) -> int:
    for c in text:
        state = edges[state].get(c, -1)
        if state < 0:
            return -1
    return state


def _min_to_accept(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    back: list[list[int]] = [[] for _ in range(len(table))]
    for src, dst in zip(*np.nonzero(table >= 0)):
        back[table[src, dst]].append(int(src))
    targets = [int(s) for s in np.nonzero(accepting)[0]]
    return np.array(steps_to(back, targets, int(INF)), dtype=np.int32)


def token_dfa(pattern: Pattern, texts: Sequence[str], limit: int = 20000) -> TokenDfa:
    """The pattern's language over tokens: a string of tokens is accepted when the
    concatenation of their texts is. Raises TooLarge past `limit` states, ValueError when
    the tokens cannot spell any accepted string."""
    edges, accept = char_dfa(pattern, limit)
    table = np.array([[_walk(edges, s, t) for t in texts] for s in range(len(edges))],
                     dtype=np.int32).reshape(len(edges), len(texts))
    accepting = np.array(accept, dtype=bool)
    dist = _min_to_accept(table, accepting)
    if dist[0] == INF:
        raise ValueError("no string of the vocabulary's tokens matches")
    live = dist < INF  # keep live states, renumbered in order (the start stays 0)
    renumber = np.full(len(table) + 1, -1, dtype=np.int32)
    renumber[np.nonzero(live)[0]] = np.arange(int(live.sum()), dtype=np.int32)
    table = renumber[table[live]]  # an edge into a dead state (or -1) becomes -1
    accepting, dist = accepting[live], dist[live]
    return TokenDfa(table, dist, accepting, accepting & (table < 0).all(axis=1), 0)
