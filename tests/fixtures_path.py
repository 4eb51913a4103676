"""Where the conformance fixtures live.

0.7: ``$AHP_FIXTURES_DIR`` or ``../shared/fixtures`` (``reducers/`` and
``round-trips/``), read in place, never copied into the project. 1.0:
``$AHP_FIXTURES_1_0_DIR`` or the project's own ``tests/data/fixtures-1.0``
(``reducers/``, same layout), so an independent 1.0 corpus can be run against
the host by pointing the variable at it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures"
DEFAULT_FIXTURES_1_0 = PROJECT_ROOT / "tests" / "data" / "fixtures-1.0"


def fixtures_dir() -> Path:
    configured = os.environ.get("AHP_FIXTURES_DIR")
    return Path(configured) if configured else DEFAULT_FIXTURES


def fixtures_1_0_dir() -> Path:
    configured = os.environ.get("AHP_FIXTURES_1_0_DIR")
    return Path(configured) if configured else DEFAULT_FIXTURES_1_0


def fixture_files(kind: str, version: str = "0.7") -> list[Path]:
    """Every ``*.json`` case under ``<fixtures>/<kind>``, in lexicographic order."""
    root, variable = (
        (fixtures_1_0_dir(), "AHP_FIXTURES_1_0_DIR")
        if version == "1.0"
        else (fixtures_dir(), "AHP_FIXTURES_DIR")
    )
    folder = root / kind
    if not folder.is_dir():
        raise FileNotFoundError(
            f"fixture folder {folder} is missing: set {variable} or check out ../shared"
        )
    return sorted(folder.glob("*.json"))


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
