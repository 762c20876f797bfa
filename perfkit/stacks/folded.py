"""Folded stacks: the one artifact every stack output is rendered from.

A folded file has one line per distinct stack: frames root -> leaf joined by
`;`, a space, an integer sample count (`main (app.py:3);work (app.py:9) 42`).
It is what py-spy's `--format raw` writes and what flamegraph.pl, inferno and
speedscope read. In memory it is a `dict[str, int]` (stack -> count); parse,
summarize and every renderer take that dict.

A frame is `name (file:line)` (py-spy's naming; the in-process sampler writes
the same), so frames from either sampler group the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

Folded = dict[str, int]  # "root;...;leaf" -> number of samples (positive)

# flamegraph.pl's rule for a line (with integer counts only: speedscope rejects others).
LINE_RE = re.compile(r"^(.*)\s+(\d+)$")
FRAME_RE = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")

# Perfkit components, by the module a frame's code lives in (first match wins).
COMPONENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("scheduler", re.compile(r"(^|/)perfkit/engine/(scheduler|kv_manager|sequence)\.py$")),
    ("block pool", re.compile(r"(^|/)perfkit/engine/blocks\.py$")),
    ("attention", re.compile(r"(^|/)perfkit/engine/layers/(attention|metadata|workspace|kv_cache)"
                             r"\.py$")),
    ("sampling", re.compile(r"(^|/)perfkit/engine/(layers/sampler|sampling_params)\.py$")),
    ("model", re.compile(r"(^|/)perfkit/engine/layers/(model|model_executor)\.py$")),
    ("guard", re.compile(r"(^|/)perfkit/engine/guard/")),
    ("samplers", re.compile(r"(^|/)perfkit/(measure|stacks)/")),
)
COMPONENTS = (*(name for name, _ in COMPONENT_RULES), "other")
_PERFKIT_RE = re.compile(r"(^|/)perfkit/")


@dataclass(frozen=True)
class Frame:
    name: str  # function (qualified where the sampler knows it)
    file: str  # "" when the frame carries no location
    line: int  # 0 when unknown


@dataclass(frozen=True)
class FrameShare:
    frame: str  # "name (file)": a function, all its lines together
    samples: int  # samples in which it is the leaf (self) or anywhere (inclusive)
    share: float  # samples / all samples, 0..1


@dataclass(frozen=True)
class StackSummary:
    total: int  # all samples
    top_self: list[FrameShare]  # by samples as the leaf frame, largest first
    top_inclusive: list[FrameShare]  # by samples anywhere on the stack, largest first
    components: list[FrameShare]  # perfkit component -> samples, in COMPONENTS order


def parse_folded(text: str) -> Folded:
    """Folded text -> {stack: count}; repeated stacks add up; blank lines, empty stacks
    and zero counts are skipped; any other line that breaks the rule is an error."""
    stacks: Counter[str] = Counter()
    for num, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        match = LINE_RE.match(line)
        if match is None:
            raise ValueError(f"folded line {num}: expected 'frame;frame COUNT', got {line!r}")
        stack, count = match.group(1).strip(), int(match.group(2))
        if stack and count > 0:  # py-spy writes ' N' for samples with no Python frame
            stacks[stack] += count
    return dict(stacks)


def format_folded(stacks: Folded) -> str:
    """One line per stack, sorted (stable diffs); counts must be positive integers."""
    lines = []
    for stack in sorted(stacks):
        count = stacks[stack]
        if not isinstance(count, int) or count <= 0:
            raise ValueError(f"folded count for {stack!r} must be a positive int, got {count!r}")
        lines.append(f"{stack} {count}\n")
    return "".join(lines)


def read_folded(path: Path) -> Folded:
    return parse_folded(Path(path).read_text(encoding="utf-8", errors="replace"))


def write_folded(path: Path, stacks: Folded) -> None:
    from perfkit.files import atomic_write_text

    atomic_write_text(Path(path), format_folded(stacks))


def split_stack(stack: str) -> list[str]:
    return stack.split(";")


def parse_frame(frame: str) -> Frame:
    match = FRAME_RE.match(frame)
    if match is None:
        return Frame(frame, "", 0)
    return Frame(match["name"], match["file"], int(match["line"]))


def function_key(frame: str) -> str:
    """'f (a.py:12)' -> 'f (a.py)': one function, whatever line it was on."""
    parsed = parse_frame(frame)
    return f"{parsed.name} ({parsed.file})" if parsed.file else parsed.name


def component_of_file(file: str) -> str | None:
    """The perfkit component a source file belongs to; 'other' for the rest of perfkit;
    None outside perfkit (torch, stdlib)."""
    for name, pattern in COMPONENT_RULES:
        if pattern.search(file):
            return name
    return "other" if _PERFKIT_RE.search(file) else None


def has_perfkit_frames(stacks: Folded) -> bool:
    return any(_PERFKIT_RE.search(parse_frame(frame).file)
               for stack in stacks for frame in split_stack(stack))


def component_of_stack(stack: str) -> str:
    """The innermost perfkit frame decides: torch code called from model.py is 'model',
    a stack with no perfkit frame (the interpreter, a foreign program) is 'other'."""
    for frame in reversed(split_stack(stack)):
        component = component_of_file(parse_frame(frame).file)
        if component is not None:
            return component
    return "other"


def _shares(counts: Counter[str], total: int, top: int) -> list[FrameShare]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [FrameShare(key, n, n / total if total else 0.0) for key, n in ranked]


def self_counts(stacks: Folded) -> Counter[str]:
    counts: Counter[str] = Counter()
    for stack, n in stacks.items():
        counts[function_key(split_stack(stack)[-1])] += n
    return counts


def inclusive_counts(stacks: Folded) -> Counter[str]:
    """Each function counted once per sample, however deep it recurses."""
    counts: Counter[str] = Counter()
    for stack, n in stacks.items():
        for key in {function_key(frame) for frame in split_stack(stack)}:
            counts[key] += n
    return counts


def component_counts(stacks: Folded) -> Counter[str]:
    counts: Counter[str] = Counter({name: 0 for name in COMPONENTS})
    for stack, n in stacks.items():
        counts[component_of_stack(stack)] += n
    return counts


def summarize(stacks: Folded, top: int = 10) -> StackSummary:
    total = sum(stacks.values())
    comps = component_counts(stacks)
    return StackSummary(
        total=total,
        top_self=_shares(self_counts(stacks), total, top),
        top_inclusive=_shares(inclusive_counts(stacks), total, top),
        components=[FrameShare(c, comps[c], comps[c] / total if total else 0.0)
                    for c in COMPONENTS],
    )
