"""A real JSON Schema validator for wire values, over a spec folder's schemas.

``validator(spec_dir, "StateAction")`` gives a Draft 2020-12 validator (the
``jsonschema`` library) for one ``$defs`` type of the five schema files in
``<spec_dir>/schema``, with every ``#/$defs/…`` reference resolved. One
correction, the schema limitation both spec READMEs name: ``SessionStatus`` is
a bitset, but its ``enum`` lists single flags only, so a combined value such as
``InProgress | IsRead`` (40) would not validate; it is checked as a
non-negative integer instead.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = ("state", "actions", "commands", "notifications", "errors")
PROJECT = Path(__file__).resolve().parent.parent
SPEC_0_7 = PROJECT.parent / "shared" / "spec"
SPEC_1_0 = PROJECT.parent / "shared" / "spec-1.0"


@functools.cache
def _defs(spec_dir: Path) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name in SCHEMAS:
        data = json.loads((spec_dir / "schema" / f"{name}.schema.json").read_text())
        for key, value in data["$defs"].items():
            defs.setdefault(key, value)
    defs["SessionStatus"] = {"type": "integer", "minimum": 0}
    return defs


def definition(spec_dir: Path, type_name: str) -> dict[str, Any]:
    """The schema of ``type_name`` under ``spec_dir`` (its ``description`` among it)."""
    value: dict[str, Any] = _defs(spec_dir)[type_name]
    return value


@functools.cache
def validator(spec_dir: Path, type_name: str) -> Draft202012Validator:
    """A validator for ``type_name`` of the schemas under ``spec_dir``."""
    defs = _defs(spec_dir)
    if type_name not in defs:
        raise KeyError(f"{spec_dir} defines no type {type_name!r}")
    return Draft202012Validator({"$ref": f"#/$defs/{type_name}", "$defs": defs})


def errors(spec_dir: Path, type_name: str, value: Any) -> list[str]:
    """Every way ``value`` is not a valid ``type_name`` (empty when it is)."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}"
        for e in validator(spec_dir, type_name).iter_errors(value)
    ]
