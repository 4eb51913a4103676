"""The capacity curve as an SVG picture, drawn from ``bench.capacity``'s JSON.

Layer: benchmarks (a tool beside ``bench/capacity.py``; imports nothing of the server).

``python -m bench.plot docs/capacity.json --out docs/capacity.svg`` draws, per
series, the p99 lateness (y, logarithmic) against N (chats streaming at once,
x), the bound the knee is judged by as a line across, floors dashed. A p99 of
1 ms or less (it is negative when a stream's first word came late) is drawn on
the axis. Plain SVG written here (no plotting library to install); the same
JSON gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["capacity_svg", "main"]

WIDTH, HEIGHT = 760, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 40, 52
Y_MIN_MS, Y_MAX_MS = 1.0, 10_000.0
#: Host series take these in turn (Okabe-Ito: told apart with colour-blindness
#: too); floors are black and dashed.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#56B4E9", "#CC79A7", "#F0E442")
FLOOR = "#000000"


def _y(ms: float) -> float:
    """Pixel row of ``ms`` on the log axis (clamped to the plot)."""
    clamped = min(max(ms, Y_MIN_MS), Y_MAX_MS)
    span = math.log10(Y_MAX_MS) - math.log10(Y_MIN_MS)
    frac = (math.log10(clamped) - math.log10(Y_MIN_MS)) / span
    return TOP + (1 - frac) * (HEIGHT - TOP - BOTTOM)


def capacity_svg(results: dict[str, Any]) -> str:
    """The SVG text for a ``bench.capacity`` result (its ``--out`` JSON)."""
    series: dict[str, list[dict[str, Any]]] = results["series"]
    bound = float(results["config"]["bound_ms"])
    ns = sorted({int(p["n"]) for points in series.values() for p in points})
    x_max = max(ns) if ns else 1
    plot_w = WIDTH - LEFT - RIGHT

    def x(n: float) -> float:
        return LEFT + n / x_max * plot_w

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    machine = results.get("machine", {})
    title = (
        f"p99 lateness against chats streaming at once ({results['config']['words']} words, "
        f"one per {results['config']['ms']:g} ms); {machine.get('cpu_count', '?')} vCPU, "
        f"{str(machine.get('date', ''))[:10]}"
    )
    out.append(f'<text x="{LEFT}" y="22" font-size="13">{escape(title)}</text>')
    # Axes, grid and labels.
    bottom = HEIGHT - BOTTOM
    out.append(
        f'<line x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}" stroke="#444"/>'
    )
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#444"/>')
    ms = Y_MIN_MS
    while ms <= Y_MAX_MS:
        row = _y(ms)
        out.append(
            f'<line x1="{LEFT}" y1="{row:.1f}" x2="{LEFT + plot_w}" y2="{row:.1f}" stroke="#ddd"/>'
        )
        label = f"≤ {ms:,.0f}" if ms == Y_MIN_MS else f"{ms:,.0f}"
        out.append(f'<text x="{LEFT - 6}" y="{row + 4:.1f}" text-anchor="end">{label}</text>')
        ms *= 10
    for n in ns:
        out.append(f'<text x="{x(n):.1f}" y="{bottom + 16}" text-anchor="middle">{n}</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">'
        "N (chats streaming at once)</text>"
    )
    out.append(
        f'<text x="16" y="{(TOP + bottom) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(TOP + bottom) / 2:.1f})">p99 lateness, ms (log)</text>'
    )
    row = _y(bound)
    out.append(
        f'<line x1="{LEFT}" y1="{row:.1f}" x2="{LEFT + plot_w}" y2="{row:.1f}" '
        'stroke="#999" stroke-dasharray="2 3"/>'
    )
    out.append(
        f'<text x="{LEFT + plot_w - 4}" y="{row - 4:.1f}" text-anchor="end" fill="#666">'
        f"bound {bound:g} ms</text>"
    )
    # One line per series, its knee in the legend.
    knees = results.get("knees", {})
    hosts = [name for name in series if not name.startswith("floor")]
    for i, (name, points) in enumerate(series.items()):
        colour = FLOOR if name not in hosts else PALETTE[hosts.index(name) % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if name.startswith("floor") else ""
        width = "2.5" if name.endswith("-3") else "1.5"
        coords = " ".join(
            f"{x(p['n']):.1f},{_y(float(p['p99_ms'])):.1f}"
            for p in sorted(points, key=lambda p: p["n"])
            if math.isfinite(float(p["p99_ms"]))
        )
        out.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}"{dash}><title>{escape(name)}</title></polyline>'
        )
        knee = knees.get(name, {}).get("knee")
        label = name if knee is None else f"{name}: knee {knee}"
        legend_y = TOP + 8 + i * 20
        legend_x = LEFT + plot_w + 16
        out.append(
            f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 24}" y2="{legend_y}" '
            f'stroke="{colour}" stroke-width="{width}"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 30}" y="{legend_y + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plot", description=__doc__)
    parser.add_argument("results", type=Path, help="bench.capacity's JSON (its --out)")
    parser.add_argument("--out", type=Path, required=True, help="the SVG to write")
    args = parser.parse_args(argv)
    args.out.write_text(capacity_svg(json.loads(args.results.read_text())), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
