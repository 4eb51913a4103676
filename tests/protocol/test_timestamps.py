"""``add_milliseconds`` against JavaScript itself: ``modifiedAt`` at turn end (1.0).

Layer: tests (protocol, across a real process). REDUCER-CHANGES 11: a finished
turn's ``modifiedAt`` is ``startedAt`` plus the duration, formatted exactly as
``Date.prototype.toISOString()`` does, for any ISO-8601 ``startedAt``, offsets
included. Node (which CI installs for the page) computes the same sums here, so
the two are compared on a few hundred generated timestamps, not on examples we
wrote ourselves. Node runs with ``TZ=UTC``: a date-time without an offset is
local time to JavaScript, and we read it as UTC (docs/protocol.md).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

from ahp_server.protocol.reducers import add_milliseconds

NODE_PROGRAM = """
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map(([t, d]) => {
  const ms = Date.parse(t) + d;
  try { return new Date(ms).toISOString(); } catch (e) { return null; }
});
process.stdout.write(JSON.stringify(out));
"""


def generated(count: int) -> list[tuple[str, float]]:
    """ISO-8601 timestamps in the shapes peers send, with int and fractional durations."""
    rng = random.Random(20261204)  # fixed: a failure reproduces
    cases: list[tuple[str, float]] = []
    for _ in range(count):
        year = rng.choice([rng.randint(1000, 9999), rng.randint(1970, 2100)])
        date = f"{year:04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        shape = rng.randrange(4)
        if shape == 0:
            text = date  # date only: UTC midnight to both
        else:
            clock = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            digits = rng.choice([0, 1, 2, 3, 3, 3, 6])
            if digits:
                clock += "." + "".join(rng.choice("0123456789") for _ in range(digits))
            zone = {
                1: "Z",
                2: f"{rng.choice('+-')}{rng.randint(0, 14):02d}:{rng.choice([0, 30, 45]):02d}",
                3: "",
            }[shape]
            text = f"{date}T{clock}{zone}"
        duration = rng.choice([0, rng.randint(0, 10**9), rng.random() * 10**5, rng.randint(0, 999)])
        cases.append((text, duration))
    return cases


def javascript(cases: list[tuple[str, float]]) -> list[str | None]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: CI installs it for the page (.ci/run)")
    done = subprocess.run(
        [node, "-e", NODE_PROGRAM],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "TZ": "UTC"},
    )
    result: list[str | None] = json.loads(done.stdout)
    return result


def test_sums_are_what_javascript_prints() -> None:
    cases = generated(400)
    expected = javascript(cases)
    mismatches = [
        (text, duration, add_milliseconds(text, duration), js)
        for (text, duration), js in zip(cases, expected, strict=True)
        if add_milliseconds(text, duration) != js
    ]
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize(
    ("text", "duration", "expected"),
    [
        ("2026-01-01T00:00:00.000Z", 1500, "2026-01-01T00:00:01.500Z"),
        ("2026-01-01T02:00:00+02:00", 0, "2026-01-01T00:00:00.000Z"),
        ("2026-12-31T23:59:59.999Z", 1, "2027-01-01T00:00:00.000Z"),
        ("2026-01-01T00:00:00.9999Z", 0, "2026-01-01T00:00:00.999Z"),
        ("2026-01-01T00:00:00Z", 1.7, "2026-01-01T00:00:00.001Z"),
    ],
)
def test_examples(text: str, duration: float, expected: str) -> None:
    assert add_milliseconds(text, duration) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_where_javascript_throws_or_differs_the_caller_keeps_its_value(text: str) -> None:
    """Unparseable text, or a sum past year 9999 (JavaScript prints +010000): None."""
    assert add_milliseconds(text, 10**6) is None
