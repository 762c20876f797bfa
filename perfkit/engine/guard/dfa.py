"""Compile the tool-call grammar (toolcall_grammar.py) into a token-level DFA.

The DFA is built directly (no regex, no NFA): one state per position in the
grammar, edges labelled with grammar tokens. Invariants (tested):
  - deterministic: at most one edge per (state, token); -1 = illegal;
  - acyclic, so the language is finite: every walk accepts within `max_len` tokens;
  - every state reaches the single accepting state, which has no outgoing edge;
  - `min_to_accept[s]` is the fewest tokens from s to accept (0 at accept), so a
    walk that only takes tokens with min_to_accept[next] < remaining budget
    always accepts within the budget (the guard's budget-aware mask).
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass

from perfkit.engine.guard.grammar import (
    BOOLEANS,
    CHUNKS,
    DIGITS,
    MAX_CHUNKS,
    MAX_DIGITS,
    TOKEN_TEXTS,
    TOOLS,
    Param,
    Tool,
    Vocabulary,
)

INF = 1 << 30  # min_to_accept of a state that cannot accept (never built)


@dataclass(frozen=True)
class ToolCallDFA:
    vocab: Vocabulary
    next_state: tuple[tuple[int, ...], ...]  # [num_states][num_grammar_tokens], -1 = illegal
    min_to_accept: tuple[int, ...]  # [num_states] fewest tokens from the state to accept
    start: int
    accept: int
    max_len: int  # longest accepted token string

    @property
    def num_states(self) -> int:
        return len(self.next_state)

    def step(self, state: int, token_id: int) -> int:
        """Next state after vocab id `token_id`; -1 if illegal (non-grammar ids too)."""
        k = token_id - self.vocab.base
        return self.next_state[state][k] if k >= 0 else -1

    def walk(self, token_ids: list[int]) -> int:
        state = self.start
        for t in token_ids:
            state = self.step(state, t) if state >= 0 else -1
        return state


class _Builder:
    def __init__(self) -> None:
        self.edges: list[dict[int, int]] = []  # per state: grammar token index -> next state

    def new(self) -> int:
        self.edges.append({})
        return len(self.edges) - 1

    def edge(self, src: int, text: str, dst: int) -> None:
        k = TOKEN_TEXTS.index(text)
        assert k not in self.edges[src], f"nondeterministic edge {text!r} from {src}"
        self.edges[src][k] = dst

    def chain(self, src: int, texts: list[str]) -> int:
        for text in texts:
            dst = self.new()
            self.edge(src, text, dst)
            src = dst
        return src

    # -- values: each returns the states where the value may end --------------------
    def value(self, src: int, p: Param) -> list[int]:
        if p.type == "string":
            return self._string(src)
        if p.type == "integer":
            return self._integer(src)
        end = self.new()
        for text in BOOLEANS if p.type == "boolean" else tuple(f'"{v}"' for v in p.values):
            self.edge(src, text, end)
        return [end]

    def _string(self, src: int) -> list[int]:
        prev, end = self.chain(src, ['"']), self.new()
        for _ in range(MAX_CHUNKS):  # after chunk i: another chunk (if room) or the close quote
            cur = self.new()
            for c in CHUNKS:
                self.edge(prev, c, cur)
            self.edge(cur, '"', end)
            prev = cur
        return [end]

    def _integer(self, src: int) -> list[int]:
        zero, prev = self.new(), self.new()
        self.edge(src, "0", zero)  # no leading zeros: "0" ends the number
        for d in DIGITS[1:]:
            self.edge(src, d, prev)
        exits = [zero, prev]
        for _ in range(MAX_DIGITS - 1):
            cur = self.new()
            for d in DIGITS:
                self.edge(prev, d, cur)
            exits.append(cur)
            prev = cur
        return exits

    # -- the arguments object of one tool --------------------------------------------
    def arguments(self, open_state: int, tool: Tool, close_to: int) -> None:
        """From just after `{`: keys in declared order (optional ones skippable), then `}`
        to `close_to`."""
        params = tool.params
        n = len(params)

        def skippable(i: int, j: int) -> bool:  # params[i:j] are all optional
            return all(not p.required for p in params[i:j])

        value_start = []  # per param: (state after "key", state after ":")
        for _ in params:
            key_state = self.new()
            value_start.append((key_state, self.chain(key_state, [":"])))
        exits = [self.value(start, p) for (_, start), p in zip(value_start, params)]

        def keys_from(src: int, i: int) -> None:
            for j in range(i, n):
                if skippable(i, j):
                    self.edge(src, f'"{params[j].key}"', value_start[j][0])
        keys_from(open_state, 0)
        if skippable(0, n):
            self.edge(open_state, "}", close_to)
        for j in range(n):
            comma = self.new() if j + 1 < n else -1  # after `,`: a later key, never `}`
            if comma >= 0:
                keys_from(comma, j + 1)
            for e in exits[j]:
                if comma >= 0:
                    self.edge(e, ",", comma)
                if skippable(j + 1, n):
                    self.edge(e, "}", close_to)


def _min_to_accept(edges: list[dict[int, int]], accept: int) -> list[int]:
    """BFS backwards from accept: fewest tokens from each state to accept."""
    back: list[list[int]] = [[] for _ in edges]
    for src, out in enumerate(edges):
        for dst in out.values():
            back[dst].append(src)
    return steps_to(back, [accept], INF)


def steps_to(back: list[list[int]], targets: list[int], inf: int) -> list[int]:
    """Fewest edges from each state to any of `targets` (BFS over the reversed edges
    `back[dst] = [src, ...]`); `inf` where none is reachable."""
    dist = [inf] * len(back)
    for t in targets:
        dist[t] = 0
    queue = deque(targets)
    while queue:
        s = queue.popleft()
        for src in back[s]:
            if dist[src] == inf:
                dist[src] = dist[s] + 1
                queue.append(src)
    return dist


def _max_len(edges: list[dict[int, int]], start: int) -> int:
    """Longest path from start (the graph is acyclic: memoized DFS)."""
    memo: dict[int, int] = {}

    def longest(s: int) -> int:
        if s not in memo:
            memo[s] = max((1 + longest(d) for d in edges[s].values()), default=0)
        return memo[s]

    return longest(start)


@functools.lru_cache(maxsize=8)
def compile_dfa(vocab_size: int) -> ToolCallDFA:
    """The tool-call DFA over the top grammar ids of a `vocab_size` vocabulary."""
    vocab = Vocabulary(vocab_size)
    if vocab.base < 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no room for {vocab.num_tokens} "
                         "grammar tokens")
    b = _Builder()
    start = b.new()
    pick_tool = b.chain(start, ["{", '"name"', ":"])
    after_args, accept = b.new(), b.new()
    b.edge(after_args, "}", accept)
    for tool in TOOLS:
        named = b.new()
        b.edge(pick_tool, f'"{tool.name}"', named)
        b.arguments(b.chain(named, [",", '"arguments"', ":", "{"]), tool, after_args)
    table = tuple(
        tuple(out.get(k, -1) for k in range(vocab.num_tokens)) for out in b.edges
    )
    dist = _min_to_accept(b.edges, accept)
    assert max(dist) < INF, "every state reaches accept"
    return ToolCallDFA(vocab, table, tuple(dist), start, accept, _max_len(b.edges, start))
