"""Differential flame graph: the tail's stacks drawn with the median's as the baseline.

As flamegraph.pl draws `difffolded.pl median tail | flamegraph.pl`: the layout (widths)
is the tail's; each frame's colour is the change of its share of all samples from the
median to the tail (both normalized, so a tail with fewer samples compares fairly):
red grows in the tail, blue shrinks, white about the same. The tooltip gives both shares.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from perfkit.stacks.folded import Folded, split_stack
from perfkit.stacks.svg import (
    FONT_PX,
    FRAME_H_PX,
    MIN_WIDTH_PX,
    PAD_PX,
    TOP_PX,
    WIDTH_PX,
    Node,
    _label,
    build_tree,
    depth_of,
)

FULL_SCALE = 0.2  # a share change of 20 points of all samples is full colour


def prefix_shares(stacks: Folded) -> dict[str, float]:
    """Stack prefix ("a;b") -> share of all samples at or below it."""
    total = sum(stacks.values())
    out: dict[str, float] = {}
    for stack, n in stacks.items():
        frames = split_stack(stack)
        for depth in range(1, len(frames) + 1):
            key = ";".join(frames[:depth])
            out[key] = out.get(key, 0.0) + n / total
    return out


def diff_color(delta: float) -> str:
    """delta > 0 (grows in the tail) red, < 0 blue; white at 0."""
    k = min(abs(delta) / FULL_SCALE, 1.0)
    fade = int(255 - 200 * k)
    return f"rgb(255,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},255)"


def _frame(node: Node, path: str, x: float, y: float, w: float, tail: dict[str, float],
           median: dict[str, float]) -> str:
    t, m = tail.get(path, 1.0 if path == "" else 0.0), median.get(path, 1.0 if path == "" else 0.0)
    title = f"{node.name} - tail {t:.1%}, median {m:.1%} ({t - m:+.1%})"
    parts = ['<g class="frame">', f"<title>{escape(title)}</title>",
             f'<rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{FRAME_H_PX - 1}" '
             f'fill="{diff_color(t - m)}" stroke="rgb(220,220,220)" rx="2"/>']
    label = _label(node.name, w)
    if label:
        parts.append(f'<text x="{x + 3:.2f}" y="{y + FRAME_H_PX - 4:.1f}">{escape(label)}</text>')
    parts.append("</g>")
    return "".join(parts)


def render_diff_svg(tail: Folded, median: Folded, title: str) -> str:
    root = build_tree(tail)
    height = TOP_PX + depth_of(root) * FRAME_H_PX + 2 * PAD_PX
    t_sh, m_sh = prefix_shares(tail) if tail else {}, prefix_shares(median) if median else {}
    scale = (WIDTH_PX - 2 * PAD_PX) / root.count if root.count else 0.0
    frames: list[str] = []
    todo: list[tuple[Node, str, int, int]] = [(root, "", 0, 0)]
    while todo:
        node, path, offset, depth = todo.pop()
        w = node.count * scale
        if w < MIN_WIDTH_PX:
            continue
        y = height - PAD_PX - (depth + 1) * FRAME_H_PX
        frames.append(_frame(node, path, PAD_PX + offset * scale, y, w, t_sh, m_sh))
        child = offset
        for name in sorted(node.children):
            kid = node.children[name]
            todo.append((kid, f"{path};{name}" if path else name, child, depth + 1))
            child += kid.count
    caption = (f"{title}: tail {sum(tail.values())} samples vs median "
               f"{sum(median.values())} (red grows in the tail, blue shrinks)")
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH_PX}" '
        f'height="{height}" viewBox="0 0 {WIDTH_PX} {height}" font-family="monospace" '
        f'font-size="{FONT_PX}">',
        f'<rect class="background" x="0" y="0" width="{WIDTH_PX}" height="{height}" '
        'fill="rgb(250,250,250)"/>',
        f'<text x="{WIDTH_PX // 2}" y="18" text-anchor="middle" font-size="14">'
        f"{escape(caption)}</text>",
        *frames, "</svg>\n"])


def write_diff_svg(path: Path, tail: Folded, median: Folded, title: str) -> None:
    from perfkit.files import atomic_write_text

    atomic_write_text(Path(path), render_diff_svg(tail, median, title))
