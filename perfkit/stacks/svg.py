"""Folded stacks -> a standalone SVG flame graph (no scripts, no external fonts).

Layout (the classic flame graph): the root "all" at the bottom, callees
stacked above their caller, each frame a rectangle whose width is its share of
all samples; siblings sorted by name, so x has no meaning beyond grouping.
Frames narrower than MIN_WIDTH_PX are left out with their callees (as
flamegraph.pl does); each drawn frame is one `<g class="frame">` holding a
`<title>` tooltip (frame, samples, share), a `<rect>` and, when wide enough, a label.
Colours: perfkit components get fixed hues (legend at the top), other code a warm hue.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from perfkit.stacks.folded import Folded, component_of_file, parse_frame, split_stack

WIDTH_PX = 1200
FRAME_H_PX = 16
PAD_PX = 10
TOP_PX = 48  # title + legend
FONT_PX = 11
CHAR_PX = 6.6  # monospace advance at FONT_PX, for label fitting
MIN_WIDTH_PX = 0.1

COMPONENT_COLORS = {
    "scheduler": "rgb(92,140,220)",
    "block pool": "rgb(80,180,120)",
    "attention": "rgb(170,110,210)",
    "sampling": "rgb(60,170,190)",  # the token sampler (engine/layers/sampler.py)
    "model": "rgb(235,150,60)",
    "guard": "rgb(200,120,150)",
    "samplers": "rgb(160,160,160)",
    "other": "rgb(220,200,80)",  # perfkit code outside the components above
}


@dataclass
class Node:
    name: str  # the frame, "name (file:line)"
    count: int = 0  # samples at or below this frame
    children: dict[str, Node] = field(default_factory=dict)


def build_tree(stacks: Folded) -> Node:
    root = Node("all")
    for stack, n in stacks.items():
        root.count += n
        node = root
        for frame in split_stack(stack):
            node = node.children.setdefault(frame, Node(frame))
            node.count += n
    return root


def depth_of(node: Node) -> int:
    return 1 + max((depth_of(c) for c in node.children.values()), default=0)


def color_of(frame: str) -> str:
    component = component_of_file(parse_frame(frame).file)
    if component is not None:
        return COMPONENT_COLORS[component]
    h = zlib.crc32(frame.encode())  # stable across runs, unlike hash()
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 110},{40 + (h >> 16) % 40})"


def _label(name: str, width_px: float) -> str:
    fits = int((width_px - 6) / CHAR_PX)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


def _frame_svg(node: Node, x: float, y: float, w: float, total: int) -> str:
    share = 100.0 * node.count / total if total else 0.0
    title = f"{node.name} - {node.count} samples ({share:.2f}%)"
    fill = "rgb(200,200,200)" if node.name == "all" else color_of(node.name)
    parts = [
        '<g class="frame">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{FRAME_H_PX - 1}" '
        f'fill="{fill}" rx="2"/>',
    ]
    label = _label(node.name, w)
    if label:
        parts.append(f'<text x="{x + 3:.2f}" y="{y + FRAME_H_PX - 4:.1f}">{escape(label)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _frames(root: Node, height: int) -> list[str]:
    """Depth-first, children by name; (node, x offset in samples, depth) on a stack."""
    total = root.count
    scale = (WIDTH_PX - 2 * PAD_PX) / total if total else 0.0
    out: list[str] = []
    todo: list[tuple[Node, int, int]] = [(root, 0, 0)]
    while todo:
        node, offset, depth = todo.pop()
        w = node.count * scale
        if w < MIN_WIDTH_PX:
            continue
        y = height - PAD_PX - (depth + 1) * FRAME_H_PX
        out.append(_frame_svg(node, PAD_PX + offset * scale, y, w, total))
        child_offset = offset
        kids = []
        for name in sorted(node.children):
            kids.append((node.children[name], child_offset, depth + 1))
            child_offset += node.children[name].count
        todo.extend(reversed(kids))
    return out


def _legend() -> str:
    items, x = [], PAD_PX
    for name, fill in COMPONENT_COLORS.items():
        items.append(f'<rect x="{x}" y="30" width="10" height="10" fill="{fill}"/>'
                     f'<text x="{x + 14}" y="39">{escape(name)}</text>')
        x += 14 + int(len(name) * CHAR_PX) + 18
    return "".join(items)


def render_svg(stacks: Folded, title: str) -> str:
    root = build_tree(stacks)
    height = TOP_PX + depth_of(root) * FRAME_H_PX + 2 * PAD_PX
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH_PX}" '
        f'height="{height}" viewBox="0 0 {WIDTH_PX} {height}" '
        f'font-family="monospace" font-size="{FONT_PX}">'
    )
    caption = f"{title} ({root.count} samples)"
    body = [
        head,
        f'<rect class="background" x="0" y="0" width="{WIDTH_PX}" height="{height}" '
        'fill="rgb(250,250,245)"/>',
        f'<text x="{WIDTH_PX // 2}" y="18" text-anchor="middle" font-size="14">'
        f"{escape(caption)}</text>",
        _legend(),
        *_frames(root, height),
        "</svg>\n",
    ]
    return "\n".join(body)


def write_svg(path: Path, stacks: Folded, title: str) -> None:
    from perfkit.files import atomic_write_text

    atomic_write_text(Path(path), render_svg(stacks, title))

