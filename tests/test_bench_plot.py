"""bench/plot.py: the capacity curve drawn from bench.capacity's JSON, in memory.

The picture is checked as data: one line per series in the JSON's order, a
point per measured N (those with a finite p99 only), every coordinate inside
the picture, a lateness above the axis drawn at its top and one below 1 ms (a
negative p99) on the axis, the knee in the legend, and the same JSON giving the
same bytes. A real run's JSON goes through it in tests/test_bench_smoke.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from bench.plot import BOTTOM, HEIGHT, TOP, WIDTH, capacity_svg, main

SVG = "{http://www.w3.org/2000/svg}"


def point(n: int, p99: float) -> dict[str, Any]:
    # p99* (never negative) differs: the picture draws p99, the knee's measure
    return {"n": n, "p99_ms": p99, "p99_anchored_ms": abs(p99) + 40.0}


def results() -> dict[str, Any]:
    return {
        "machine": {"cpu_count": 2, "date": "2026-12-07T13:00:00+00:00"},
        "config": {"words": 400, "ms": 25.0, "bound_ms": 100.0},
        "series": {
            "floor-1": [point(100, 3.0), point(200, 5.0), point(400, 9.0)],
            "memory-1": [point(100, 2.0), point(200, 80.0), point(400, 50_000.0)],
            "sqlite-3": [point(100, -20.0), point(200, math.nan)],
        },
        "knees": {"floor-1": {"knee": 400}, "memory-1": {"knee": 200}},
    }


def coordinates(line: ElementTree.Element) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.attrib["points"].split())]


def test_one_line_per_series_a_point_per_finite_measure_inside_the_picture() -> None:
    root = ElementTree.fromstring(capacity_svg(results()))
    lines = root.findall(f"{SVG}polyline")
    assert [line.findtext(f"{SVG}title") for line in lines] == [
        "floor-1",
        "memory-1",
        "sqlite-3",
    ]
    counts = [len(coordinates(line)) for line in lines]
    assert counts == [3, 3, 1]  # sqlite-3's NaN at N = 200 is left out
    for line in lines:
        for x, y in coordinates(line):
            assert 0 <= x <= WIDTH
            assert TOP <= y <= HEIGHT
    memory = coordinates(lines[1])
    # x grows with N; later lateness is higher (a smaller row); 50 s is drawn at the top
    assert memory[0][0] < memory[1][0] < memory[2][0]
    assert memory[0][1] > memory[1][1] > memory[2][1]
    assert memory[2][1] == TOP
    assert coordinates(lines[2])[0][1] == HEIGHT - BOTTOM  # p99 -20 ms: on the axis
    # floors dashed, hosts not
    assert "stroke-dasharray" in lines[0].attrib
    assert "stroke-dasharray" not in lines[1].attrib


def test_the_legend_names_each_knee_and_the_bound_is_drawn() -> None:
    texts = [t.text for t in ElementTree.fromstring(capacity_svg(results())).iter(f"{SVG}text")]
    assert "floor-1: knee 400" in texts
    assert "memory-1: knee 200" in texts
    assert "sqlite-3" in texts  # no knee in the JSON: its name alone
    assert "bound 100 ms" in texts


def test_the_same_json_gives_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "capacity.json"
    source.write_text(json.dumps(results()), encoding="utf-8")
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    assert main([str(source), "--out", str(first)]) == 0
    assert main([str(source), "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    ElementTree.fromstring(first.read_text(encoding="utf-8"))
