"""The import contracts (``[tool.importlinter]`` in pyproject.toml) hold, and catch breaches.

``.ci/run`` runs ``lint-imports`` on the tree; here it also runs on a copy of
the package with one forbidden import added, to show each kind of breach fails.
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
