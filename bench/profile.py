"""Where the host's CPU goes per unit of work: the real host under ``cProfile``.

Run ``python -m bench.profile SCENARIO [--persist] [--top N]``, SCENARIO one of
``short-turns`` (per turn), ``tokens`` (per delta), ``paced`` (per word, each
its own wake-up, as in ``bench.capacity``) or ``dispatch`` (per round trip). It starts the real host
as ``python -m cProfile -o FILE -m ahp_server serve`` (the same host and
config as ``python -m bench``), drives it with the suite's own client code,
stops it with SIGTERM (the profile is written on the host's orderly exit) —
twice, a small and a large run — and subtracts the small profile from the
large one. What is left is the **marginal** cost: start-up, imports and
connection setup cancel out, and each function's calls and time are divided
by the extra units of work. Calls per unit are exact and repeatable (they
are what a change removes); times are inflated several-fold by the profiler
and vary with the machine: read their shares. ``docs/performance.md`` says
where the time goes per turn, delta and round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pstats
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import suite

__all__ = ["SCENARIOS", "Scenario", "main", "marginal"]


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """A suite workload and how much of it a small and a large run do."""

    unit: str
    drive: Callable[[str, int, int], Any]  # (url, pid, size) -> figures
    small: int
    large: int
    units: Callable[[int], int]  # size -> units of work


SCENARIOS: dict[str, Scenario] = {
    # 50 sessions asking one-word turns (per session: size turns).
    "short-turns": Scenario(
        "turn",
        lambda url, pid, n: suite.host_short_turns(url, pid, 50, n),
        10,
        50,
        lambda n: 50 * n,
    ),
    # One client's drafts, each sent when the echo of the last came back
    # (dispatch-rtt's workload; n round trips after n // 10 of warm-up).
    "dispatch": Scenario(
        "round trip",
        lambda url, pid, n: suite.host_rtt(url, n),
        500,
        2500,
        lambda n: n + max(1, n // 10),
    ),
    # 50 chats streaming ``/slow 0`` words (a delta per word).
    "tokens": Scenario(
        "delta",
        lambda url, pid, n: suite.host_tokens(url, pid, 50, n),
        100,
        500,
        lambda n: 50 * n,
    ),
    # 50 chats streaming ``/slow 10`` words: each word its own wake-up of the
    # agent's clock and its own frame, as in ``bench.capacity`` (per word).
    "paced": Scenario(
        "word",
        lambda url, pid, n: suite.host_tokens(url, pid, 50, n, interval_ms=10),
        50,
        250,
        lambda n: 50 * n,
    ),
}

#: pstats' key of a function, and its (primitive calls, calls, own time, cumulative time).
_Func = tuple[str, int, str]
_Row = tuple[float, float, float, float]


def _io(pid: int) -> dict[str, int]:
    """The process's I/O counters (``wchar``: bytes written to files; sockets not counted)."""
    with open(f"/proc/{pid}/io", encoding="ascii") as io:
        return {key: int(value) for key, value in (line.split(":") for line in io)}


def _profiled(scenario: Scenario, size: int, persist: bool, out: Path) -> dict[_Func, _Row]:
    with suite.host_process(persist, profile=out) as (url, pid):
        asyncio.run(asyncio.wait_for(scenario.drive(url, pid, size), suite.JOB_TIMEOUT))
        io = _io(pid)
    raw: dict[_Func, tuple[int, int, float, float, Any]] = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    rows: dict[_Func, _Row] = {func: (cc, nc, tt, ct) for func, (cc, nc, tt, ct, _) in raw.items()}
    # File writes ride along as pseudo-functions (bytes and write calls), so
    # they are subtracted like the rest.
    rows[("~", 0, "<file bytes written>")] = (0, io["wchar"], 0.0, 0.0)
    rows[("~", 0, "<file write calls>")] = (0, io["syscw"], 0.0, 0.0)
    return rows


def _name(func: _Func) -> str:
    path, line, name = func
    if path == "~":
        return name  # a built-in
    return f"{Path(path).name}:{line}({name})"


def marginal(
    name: str, *, persist: bool, workdir: Path, sizes: tuple[int, int] | None = None
) -> list[tuple[str, float, float, float]]:
    """(function, calls, own µs, cumulative µs) per unit of work, large run minus small.

    ``sizes`` overrides the scenario's (small, large) sizes.
    """
    scenario = SCENARIOS[name]
    small_size, large_size = sizes or (scenario.small, scenario.large)
    small = _profiled(scenario, small_size, persist, workdir / "small.prof")
    large = _profiled(scenario, large_size, persist, workdir / "large.prof")
    units = scenario.units(large_size) - scenario.units(small_size)
    rows = []
    for func, (_, calls, own, cumulative) in large.items():
        if func[2].startswith("<file "):
            continue  # reported apart (see report)
        _, calls0, own0, cumulative0 = small.get(func, (0, 0, 0.0, 0.0))
        rows.append(
            (
                _name(func),
                (calls - calls0) / units,
                (own - own0) / units * 1e6,
                (cumulative - cumulative0) / units * 1e6,
            )
        )
    for key in ("<file bytes written>", "<file write calls>"):
        func = ("~", 0, key)
        rows.append((key, (large[func][1] - small[func][1]) / units, 0.0, 0.0))
    return rows


def report(name: str, rows: list[tuple[str, float, float, float]], persist: bool, top: int) -> str:
    unit = SCENARIOS[name].unit
    files = {r[0]: r[1] for r in rows if r[0].startswith("<file ")}
    rows = [r for r in rows if not r[0].startswith("<file ")]
    calls = sum(r[1] for r in rows)
    own = sum(r[2] for r in rows)
    lines = [
        f"{name} (persist {'on' if persist else 'off'}), marginal cost per {unit} under cProfile:",
        f"  {calls:,.1f} function calls, {own:,.0f} µs of profiled CPU",
        f"  {files['<file bytes written>']:,.0f} bytes written to files"
        f" in {files['<file write calls>']:,.1f} write calls",
        "",
        f"{'calls/' + unit:>12} {'own µs':>9} {'cum µs':>9}  function (top {top} by own time)",
    ]
    for fn, n, tt, ct in sorted(rows, key=lambda r: -r[2])[:top]:
        lines.append(f"{n:12.2f} {tt:9.2f} {ct:9.2f}  {fn}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--persist", action="store_true", help="SQLite data dir (default: off)")
    parser.add_argument("--top", type=int, default=40, help="functions listed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ahp-profile-") as tmp:
        rows = marginal(args.scenario, persist=args.persist, workdir=Path(tmp))
    print(report(args.scenario, rows, args.persist, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
