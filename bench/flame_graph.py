"""A flame graph as a standalone SVG, from collapsed stacks (root first, one count each).

Each box is a frame; its width is the share of samples whose stack passes through it, its
children stand on it. A box narrower than `min_px` is left out (its samples stay in its
parent's width), which keeps a long run's file small. Hovering a box shows its full name, its
samples and its share.
"""

from __future__ import annotations

import html
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

WIDTH = 1200
ROW = 16
CHAR_PX = 6.6


@dataclass
class _Node:
    samples: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(stacks: Iterable[tuple[list[str], int]]) -> _Node:
    root = _Node()
    for frames, count in stacks:
        root.samples += count
        node = root
        for frame in frames:
            node = node.children.setdefault(frame, _Node())
            node.samples += count
    return root


def _depth(node: _Node) -> int:
    # Iterative: a recording's stacks go 512 frames deep, past Python's recursion limit.
    deepest, todo = 0, [(node, 1)]
    while todo:
        current, depth = todo.pop()
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in current.children.values())
    return deepest


def _color(frame: str) -> str:
    # Warm colours, stable per package, so the same library looks the same in every graph.
    package = frame.rsplit(".", 2)[0] if "(" not in frame else frame.split("(")[-1].rsplit("/", 1)[0]
    h = zlib.crc32(package.encode())
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 130},{(h >> 16) % 60})"


def _label(frame: str, px: float) -> str:
    short = frame.rsplit(".", 2)[-2] + "." + frame.rsplit(".", 1)[-1] if "(" not in frame and frame.count(".") > 1 \
        else frame
    fits = int((px - 6) / CHAR_PX)
    return short if len(short) <= fits else (short[:fits - 2] + ".." if fits > 3 else "")


def flame_graph_svg(stacks: Iterable[tuple[list[str], int]], title: str, min_px: float = 1.0) -> str:
    root = _tree(stacks)
    rows = _depth(root)
    height = (rows + 2) * ROW + 10
    total = max(root.samples, 1)
    scale = WIDTH / total
    boxes: list[str] = []

    # Depth first, children in name order, without recursion (see `_depth`).
    todo: list[tuple[str, _Node, float, int]] = [("all", root, 0.0, 0)]
    while todo:
        name, node, x, level = todo.pop()
        width = node.samples * scale
        if width < min_px:
            continue
        y = height - (level + 1) * ROW - 4
        tip = html.escape(f"{name} ({node.samples:,} samples, {100 * node.samples / total:.2f}%)")
        text = html.escape(_label(name, width))
        boxes.append(f'<g><title>{tip}</title><rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW - 1}" '
                     f'fill="{_color(name)}" rx="2"/>'
                     + (f'<text x="{x + 3:.1f}" y="{y + ROW - 4}">{text}</text>' if text else "") + "</g>")
        children, child_x = [], x
        for child_name, child in sorted(node.children.items()):
            children.append((child_name, child, child_x, level + 1))
            child_x += child.samples * scale
        todo.extend(reversed(children))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="monospace" font-size="11">'
            f'<rect width="100%" height="100%" fill="#fdfdf8"/>'
            f'<text x="4" y="16" font-size="13">{html.escape(title)} ({root.samples:,} samples)</text>'
            + "".join(boxes) + "</svg>\n")
