"""Where the conformance fixtures live: ``$AHP_FIXTURES_DIR`` or ``../shared/fixtures``.

The folder holds ``reducers/`` and ``round-trips/``; tests read the files in
place (they are never copied into the project).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures"


def fixtures_dir() -> Path:
    configured = os.environ.get("AHP_FIXTURES_DIR")
    return Path(configured) if configured else DEFAULT_FIXTURES


def fixture_files(kind: str) -> list[Path]:
    """Every ``*.json`` case under ``<fixtures>/<kind>``, in lexicographic order."""
    folder = fixtures_dir() / kind
    if not folder.is_dir():
        raise FileNotFoundError(
            f"fixture folder {folder} is missing: set AHP_FIXTURES_DIR or check out ../shared"
        )
    return sorted(folder.glob("*.json"))


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
