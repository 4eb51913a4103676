"""docs/protocol.md "Every 1.0 action" holds to the code.

Layer: tests (documentation). One row per 1.0 action type; the mechanical
columns — who may dispatch it, what 0.9 and 0.7 clients get — are what
``protocol/dispatch_rules.py``, ``protocol/versions.py`` and
``protocol/views/v0_7.py`` decide; "host" and "never sent" agree with whether
the host, agents or workspace construct the action anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from ahp_server.protocol import types
from ahp_server.protocol.dispatch_rules import CLIENT_DISPATCHABLE, NOT_SERVED
from ahp_server.protocol.types import ActionType
from ahp_server.protocol.versions import ACTION_INTRODUCED_IN, blocked_action_types
from ahp_server.protocol.views import v0_7

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "protocol.md"
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


def table() -> dict[str, tuple[str, str, str, str]]:
    text = DOC.read_text()
    section = text[text.index("### Every 1.0 action") :]
    section = section[: section.index("\n## ")]
    rows: dict[str, tuple[str, str, str, str]] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            action, since, here, nine, seven = (g.strip() for g in match.groups())
            assert action not in rows, f"two rows for {action}"
            rows[action] = (since, here, nine, seven)
    return rows


def classes_of(action_type: str) -> list[str]:
    """The generated classes whose ``type`` is ``action_type``."""
    names = []
    for name in dir(types):
        value = getattr(types, name)
        if isinstance(value, type) and issubclass(value, msgspec.Struct):
            fields = value.__struct_fields__
            if "type" in fields and name.endswith("Action"):
                defaults = value.__struct_defaults__
                index = fields.index("type") - (len(fields) - len(defaults))
                if index >= 0 and defaults[index] == action_type:
                    names.append(name)
    return names


def emitted(action_type: str) -> bool:
    """Whether the host, the agents or the workspace build this action anywhere."""
    source = "".join(
        path.read_text()
        for folder in ("host", "agents", "workspace")
        for path in (ROOT / "ahp_server" / folder).rglob("*.py")
    )
    return any(re.search(rf"\b{name}\(", source) for name in classes_of(action_type))


def test_every_action_has_one_row() -> None:
    assert set(table()) == {t.value for t in ActionType}


@pytest.mark.parametrize("action_type", [t.value for t in ActionType])
def test_each_row_says_what_the_code_does(action_type: str) -> None:
    since, here, nine, seven = table()[action_type]
    assert since == ACTION_INTRODUCED_IN[action_type]
    assert ("client" in here) == (action_type in CLIENT_DISPATCHABLE)
    assert here.startswith("refused") == (action_type in NOT_SERVED)
    if here == "host" or here == "client; host too":
        assert emitted(action_type), f"{action_type}: nothing here emits it"
    if here == "never sent" or here.startswith("refused"):
        assert not emitted(action_type), f"{action_type}: something emits it"
    withheld_from_0_9 = action_type in blocked_action_types("0.9.0")
    assert nine == ("withheld" if withheld_from_0_9 else "as 1.0")
    if action_type in v0_7.IDENTITY_ACTIONS:
        assert seven == "same bytes"
    elif action_type in v0_7.TRANSFORMED_ACTIONS:
        assert seven == "projected"
    else:
        assert action_type in v0_7.DROPPED_ACTIONS
        assert seven == "withheld"
