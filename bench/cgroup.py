"""A CPU budget for one benchmark process: a cgroup with a CFS quota (Linux, root).

Layer: benchmarks (outside the package; needs write access to the cgroup tree).

``bench.scaleout --node-cpu F`` gives each node process ``F`` of one core, so
"1 node vs 2 nodes, each with the same CPU" can be measured on a machine whose
cores are too few to give each node one of its own and still run the load
generator, PostgreSQL and NATS (docs/scale-out.md "Measured: the spread").

The quota is enforced per period; a short period (10 ms) keeps the throttled
stretches short, so a node that is out of budget waits milliseconds, not the
default 100 ms period's tens of them. Both cgroup layouts are handled: v1
(``/sys/fs/cgroup/cpu/``, ``cpu.cfs_quota_us``) and v2 (``cpu.max``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["CpuBudget", "available"]

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
PERIOD_US = int(os.environ.get("AHP_BENCH_CPU_PERIOD_US", "10000"))


def _root() -> tuple[Path, int] | None:
    """Where to make groups and which layout (1 or 2), or ``None`` if we cannot."""
    if (_V1 / "cpu.cfs_quota_us").exists() and os.access(_V1, os.W_OK):
        return _V1, 1
    controllers = _V2 / "cgroup.controllers"
    cpu = controllers.exists() and "cpu" in controllers.read_text().split()
    if cpu and os.access(_V2, os.W_OK):
        return _V2, 2
    return None


def available() -> bool:
    """Whether this process may make CPU-limited cgroups."""
    return _root() is not None


class CpuBudget:
    """A cgroup holding at most ``cores`` of CPU time (``cores`` × the period per period)."""

    def __init__(self, name: str, cores: float) -> None:
        found = _root()
        if found is None:
            raise RuntimeError("no writable cgroup cpu controller (needs root on Linux)")
        if not 0.01 <= cores <= (os.cpu_count() or 1):
            raise ValueError(f"cores must be within 0.01..{os.cpu_count()}, not {cores}")
        root, self.version = found
        self.path = root / name
        self.path.mkdir(exist_ok=True)
        quota = int(cores * PERIOD_US)
        if self.version == 1:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")

    def add(self, pid: int) -> None:
        """Move process ``pid`` (every thread; its later children follow) into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled_s(self) -> float:
        """Seconds the group has been held back by its quota so far."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_time":  # v1: nanoseconds
                return int(value) / 1e9
            if key == "throttled_usec":  # v2
                return int(value) / 1e6
        return 0.0

    def close(self) -> None:
        """Remove the group once its processes are gone (retried briefly while they exit)."""
        for _ in range(50):
            with contextlib.suppress(FileNotFoundError):
                try:
                    self.path.rmdir()
                except OSError:
                    time.sleep(0.1)
                    continue
            return
