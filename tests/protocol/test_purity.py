"""``ahp_server.protocol`` is pure: no I/O, and nothing from the rest of the package.

Checked two ways: statically (every import in the package is on an allow-list)
and dynamically (importing every protocol module in a fresh interpreter loads
no I/O or framework module).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "ahp_server" / "protocol"

ALLOWED_TOP_LEVEL = {
    "__future__",
    "abc",
    "base64",
    "binascii",
    "collections",
    "dataclasses",
    "datetime",
    "difflib",
    "enum",
    "functools",
    "re",
    "typing",
    "msgspec",
}
FORBIDDEN_AT_RUNTIME = {
    "asyncio",
    "socket",
    "ssl",
    "selectors",
    "subprocess",
    "threading",
    "sqlite3",
    "logging",
    "http",
    "websockets",
    "structlog",
    "anyio",
}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append("." * node.level + (node.module or ""))
    return names


def test_protocol_imports_only_pure_modules() -> None:
    files = sorted(PROTOCOL.rglob("*.py"))
    assert files
    offenders = []
    for path in files:
        for name in imports_of(path):
            top = name.split(".")[0]
            if name.startswith("."):
                offenders.append(f"{path.name}: relative import {name}")
            elif top == "ahp_server":
                if not name.startswith("ahp_server.protocol"):
                    offenders.append(f"{path.name}: imports {name}")
            elif top not in ALLOWED_TOP_LEVEL:
                offenders.append(f"{path.name}: imports {name}")
    assert offenders == []


def test_importing_protocol_loads_no_io_module() -> None:
    modules = [
        "ahp_server.protocol." + ".".join(p.relative_to(PROTOCOL).with_suffix("").parts)
        for p in sorted(PROTOCOL.rglob("*.py"))
        if p.name != "__init__.py"
    ]
    code = (
        "import json, sys\n"
        f"for name in {modules!r}: __import__(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    assert loaded & FORBIDDEN_AT_RUNTIME == set()
    assert not any(
        name.startswith("ahp_server.") and "protocol" not in name for name in json.loads(out)
    )
