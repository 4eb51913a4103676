"""The import contracts (``[tool.importlinter]`` in pyproject.toml) hold, and catch breaches.

``.ci/run`` runs ``lint-imports`` on the tree; here it also runs on a copy of
the package with one forbidden import added, to show each kind of breach fails.
What ``serve`` imports is checked too: the agent SDKs only for the agents
configured, and nothing outside the core dependencies (no extra installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(project / "pyproject.toml")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # A cycle through a function-local import, the kind that used to dodge one.
        (
            "host/turns.py",
            "def _dodge() -> None:\n    from ahp_server.host import actors  # noqa\n",
            "No import cycle anywhere",
        ),
        # A cycle hidden under TYPE_CHECKING.
        (
            "host/actors.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ahp_server.host.host import Host  # noqa\n",
            "No import cycle anywhere",
        ),
        ("protocol/codec.py", "import ahp_server.host.host  # noqa\n", "Layers"),
        ("agents/echo.py", "import ahp_server.store.sqlite  # noqa\n", "Layers"),
        ("protocol/codec.py", "import asyncio  # noqa\n", "The protocol is pure"),
        ("client/state.py", "import ahp_server.host.core.fanout  # noqa\n", "The client depends"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    shutil.copytree(ROOT / "ahp_server", tmp_path / "ahp_server")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "ahp_server" / module
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line, encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout


# -- what a host imports ------------------------------------------------------------------

_IMPORTS = """
import sys
from ahp_server.cli import main  # everything `ahp-server serve` imports
from ahp_server.app import providers_from
from ahp_server.config import AgentConfig, Settings
agents = tuple(AgentConfig(name=kind, kind=kind, command="x", model="m") for kind in sys.argv[1:])
providers_from(Settings(agents=agents))
print(" ".join(sorted({"acp", "openai"} & set(sys.modules))))
"""


@pytest.mark.parametrize(
    ("kinds", "imported"),
    [((), ""), (("openai",), "openai"), (("acp",), "acp"), (("acp", "openai"), "acp openai")],
)
def test_agent_sdks_are_imported_only_for_the_agents_configured(
    kinds: tuple[str, ...], imported: str
) -> None:
    # Their pydantic models cost about a second of CPU each to import: a host
    # with no such agent starts without them (app.providers_from).
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS, *kinds],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == imported


_SERVE_IMPORTS = """
import builtins
import sys
# Every module our own code imports (a library's own imports, optional ones among them,
# are its business): an import statement in an ahp_server module goes through here.
direct = set()
real_import = builtins.__import__
def spy(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and str((globals or {}).get("__name__", "")).startswith("ahp_server"):
        direct.add(name.split(".")[0])
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = spy
from ahp_server.cli import main  # everything `ahp-server serve` imports
from ahp_server.app import providers_from
from ahp_server.config import AgentConfig, Settings
agents = tuple(AgentConfig(name=k, kind=k, command="x", model="m") for k in ("acp", "openai"))
providers_from(Settings(agents=agents))
print(" ".join(sorted(direct)))
"""


def _core_distributions() -> set[str]:
    """ahp-server's dependencies with no extra, and theirs, as installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: set[str] = set()
    todo = [("ahp-server", "")]
    seen: set[tuple[str, str]] = set()
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        for text in metadata.requires(name) or ():
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is not None and not marker.evaluate({"extra": extra}):
                continue
            dependency = canonicalize_name(requirement.name)
            found.add(dependency)
            todo += [(dependency, "")] + [(dependency, wanted) for wanted in requirement.extras]
    return found


def test_serve_imports_only_the_core_dependencies() -> None:
    # The README's first command installs no extra: a module-level import of an
    # optional driver (nats-py once broke `ahp-server serve` so) or of a test
    # tool would fail there. Every package our modules import on serve's way,
    # both agent SDKs' included, must come from the core dependencies' closure.
    from importlib import metadata

    from packaging.utils import canonicalize_name

    result = subprocess.run(
        [sys.executable, "-c", _SERVE_IMPORTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    owners = metadata.packages_distributions()
    imported = {
        canonicalize_name(distribution)
        for module in result.stdout.split()
        for distribution in owners.get(module, ())
    }
    assert "msgspec" in imported  # the mapping found the installed packages
    assert imported - {"ahp-server"} - _core_distributions() == set()
