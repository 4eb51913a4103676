"""The configuration recipes of docs/agents.md ("Recipes"), as tests take them from the page.

Each recipe is a ```toml block whose first line is ``# recipe: NAME``. A test takes
the block as written, changes only what it names (and each change must find its
text, so an edit of the page cannot silently skip one), writes it to a file and
loads it through the real configuration loader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ahp_server.config import Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent
AGENTS_DOC = ROOT / "docs" / "agents.md"

_BLOCK = re.compile(r"^```toml\n# recipe: (?P<name>[\w.-]+)\n(?P<body>.*?)^```$", re.M | re.S)


def recipes() -> dict[str, str]:
    """Every recipe on the page, by name: the block's text, its marker line included."""
    found: dict[str, str] = {}
    for match in _BLOCK.finditer(AGENTS_DOC.read_text(encoding="utf-8")):
        name = match["name"]
        assert name not in found, f"two recipes named {name!r} in docs/agents.md"
        found[name] = f"# recipe: {name}\n{match['body']}"
    return found


def recipe(name: str, replace: Mapping[str, str] | None = None) -> str:
    """The recipe ``name``, with each ``old`` text (found exactly once) replaced by ``new``."""
    text = recipes()[name]
    for old, new in (replace or {}).items():
        assert text.count(old) == 1, f"the {name} recipe no longer has {old!r} once"
        text = text.replace(old, new)
    return text


def load_recipe(text: str, folder: Path) -> tuple[Settings, Path]:
    """The settings the recipe makes, through the real loader (no ``AHP_SERVER_*`` variables),
    and the file it was written to."""
    path = folder / "recipe.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ={}), path
