#!/usr/bin/env python3
"""Generate ``docs/configuration.md``, the configuration reference, from the settings model.

Usage: ``python .ci/gen_config_docs.py [--check]`` from the project root, with
the project installed. ``--check`` exits 1 when the committed file differs from
what the model produces (the test suite runs it:
``tests/test_project.py::test_the_configuration_reference_is_current``).

Sources, all in ``ahp_server/config.py``:

* ``_KEYS``: every TOML key, its table (the part before the dot) and its kind
  (what ``_check`` accepts), described by ``KINDS`` below;
* the ``Settings`` field each key sets: its default, and its ``#:`` comment. A
  field without a comment of its own, written on the line right after another
  field, shares that field's comment (``ping_interval`` and ``ping_timeout``);
* ``ENVIRONMENT``: the ``AHP_SERVER_*`` variable of a key, if it has one;
* ``_AGENT_FIELDS`` and ``AgentConfig`` for ``[[agents]]``, alike.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ahp_server import config  # noqa: E402 - after the project's root is on the path

OUT = ROOT / "docs" / "configuration.md"
SOURCE = Path(config.__file__)

#: A kind of ``_KEYS`` / ``_AGENT_FIELDS`` -> what the value must be, for a reader.
KINDS = {
    "str": "string",
    "anystr": "string (may be empty)",
    "optstr": "string (empty: not set)",
    "port": "integer, 0 to 65535",
    "posint": "integer ≥ 1",
    "nonnegint": "integer ≥ 0",
    "posfloat": "number > 0",
    "optposfloat": "number > 0 (0: not set)",
    "nonnegfloat": "number ≥ 0",
    "bool": "boolean",
    "strlist": "list of strings",
    "rootlist": "list of absolute paths (`~` expanded)",
    "netlist": "list of IP addresses or networks",
    "storeurl": "`postgres://` URL (empty: SQLite)",
    "busurl": "`nats://` or `tls://` URL (empty: one process)",
    "secret": "string, secret (never logged)",
    "secretfile": "path of a file holding the secret",
    "nodeid": "1 to 64 letters, digits, `_` or `-`",
    "durability": '`"normal"` or `"full"`',
    "clustermode": '`"primary"` or `"sharded"`',
    "placement": '`"least-loaded"` or `"local"`',
    "eventloop": '`"auto"`, `"uvloop"` or `"asyncio"`',
    "logformat": '`"console"`, `"json"` or `"auto"`',
    "loglevel": '`"debug"`, `"info"`, `"warning"` or `"error"`',
    "agentname": "lower-case letters, digits, `-` and `_`",
    "agentkind": '`"acp"` or `"openai"`',
    "url": "`http://` or `https://` URL",
    "envname": "name of an environment variable",
    "process": '`"session"` or `"chat"`',
    "strtable": "table of strings",
}

#: Tables in the order the shipped ``config/ahp-server.toml`` has them, with a line each.
TABLES = {
    "server": "Listening, the door, the WebSocket connection.",
    "storage": "Where sessions and chats are kept ([durability](durability.md)).",
    "limits": "Limits at the door and per connection ([reliability](reliability.md)).",
    "providers": "Agents in general; each agent is an `[[agents]]` table (below).",
    "workspace": "Working directories, files, terminals ([workspace](workspace.md)).",
    "cluster": "Several nodes on one store ([scale-out](scale-out.md)).",
    "logging": "What the host logs, and how.",
}


def comments(class_name: str) -> dict[str, str]:
    """Each field of ``class_name`` -> its ``#:`` comment, or ``@first`` naming the field
    whose comment it shares."""
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    (cls,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    found: dict[str, str] = {}
    shared, previous_end = "", -1
    first_field = ""
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        first = node.lineno - 1  # 0-based
        above: list[str] = []
        while lines[first - 1 - len(above)].strip().startswith("#:"):
            above.insert(0, lines[first - 1 - len(above)].strip().removeprefix("#:").strip())
        if above:
            shared, first_field = " ".join(above), node.target.id
            found[node.target.id] = shared
        elif previous_end == first and shared:
            found[node.target.id] = "@" + first_field
        else:
            shared = ""
        previous_end = node.end_lineno or node.lineno
    return found


def markdown(text: str) -> str:
    """A ``#:`` comment (reStructuredText literals) as a table cell; ``None`` is "not set"."""
    text = re.sub(r"(^|\. )``None``", r"\1Not set", text).replace("``None``", "not set")
    return text.replace("``", "`").replace("|", "\\|")


def default(value: object, kind: str) -> str:
    """A default as TOML would spell it."""
    if kind == "strtable":  # pairs
        pairs = value if isinstance(value, tuple) else ()
        return "`{ " + ", ".join(f'{k} = "{v}"' for k, v in pairs) + " }`" if pairs else "`{}`"
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value}`"


def rows(
    keys: dict[str, tuple[str, str]],
    model: object,
    notes: dict[str, str],
    defaults: dict[str, str] | None = None,
) -> list[str]:
    """One table row per key: name, type, default (``defaults`` first), description."""
    described = comments(type(model).__name__)
    out = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, (field, kind) in keys.items():
        if kind not in KINDS:
            raise SystemExit(f"gen_config_docs: kind {kind!r} of {key} has no description in KINDS")
        text = described.get(field, "")
        if text.startswith("@"):  # shares the comment of a field above
            sharer = next(k for k, (f, _) in keys.items() if f == text[1:])
            text = f"See `{sharer.rsplit('.', 1)[-1]}` above."
        text = markdown(text)
        if key in notes:
            text = f"{text} {notes[key]}".strip()
        value = "not set" if kind == "secretfile" else default(getattr(model, field), kind)
        value = (defaults or {}).get(key, value)
        name = key.rsplit(".", 1)[-1]
        out.append(f"| `{name}` | {KINDS[kind]} | {value} | {text} |")
    return out


def render() -> str:
    variables = {key: name for name, key in config.ENVIRONMENT.items()}
    notes = {key: f"Environment: `{name}`." for key, name in variables.items()}
    for key, file_key in config._SECRET_FILES.items():
        notes[key] = f"{notes.get(key, '')} Or `{file_key.rsplit('.', 1)[-1]}`.".strip()
        notes[file_key] = f"{notes.get(file_key, '')} Instead of `{key.rsplit('.', 1)[-1]}`."
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by .ci/gen_config_docs.py from ahp_server/config.py: do not edit. -->",
        "",
        "Every setting of `ahp-server`, by TOML table. Settings come from, later ones",
        "winning: these defaults, a TOML file (`--config FILE`;",
        "[`config/ahp-server.toml`](../config/ahp-server.toml) holds every key with its",
        "default), `AHP_SERVER_*` environment variables, and command-line flags.",
        "`ahp-server check-config --config FILE` validates a file, naming the key of",
        "any error, and checks that its agents' programs and workspace roots exist",
        "([deploy](deploy.md#checking-a-configuration)).",
        "",
    ]
    tables: dict[str, dict[str, tuple[str, str]]] = {name: {} for name in TABLES}
    for key, target in config._KEYS.items():
        table = key.split(".", 1)[0]
        if table not in tables:
            raise SystemExit(f"gen_config_docs: table [{table}] of {key} is not in TABLES")
        tables[table][key] = target
    for table, keys in tables.items():
        lines += [f"## `[{table}]`", "", TABLES[table], ""]
        lines += rows(keys, config.Settings(), notes)
        lines.append("")
    agent = config.AgentConfig(name="")
    lines += [
        "## `[[agents]]`",
        "",
        "One table per agent, offered beside the built-in echo agent",
        "([agents](agents.md)). A field can also be set by",
        "`AHP_SERVER_AGENTS_<NAME>_<FIELD>` (`ARGS` split like a shell, `ENV` as",
        "`K=V,…`, `PASS_ENV` by commas); such a variable alone makes an agent.",
        "",
    ]
    required = {"name": "required", "command": 'required (`kind = "acp"`)'}
    required |= {key: 'required (`kind = "openai"`)' for key in ("base_url", "model")}
    lines += rows(config._AGENT_FIELDS, agent, {}, required)
    lines += [
        "",
        "## `[[users]]`",
        "",
        "Multi-user mode: one table per user, each with a token of its own, instead of",
        "`server.token` ([deploy](deploy.md#identity-and-ownership)).",
        "",
        "| Key | Type | Default | Description |",
        "|---|---|---|---|",
        "| `name` | letters, digits, `_ . @ -` (at most 64) | required | Unique. |",
        "| `token_env` | name of an environment variable | | The variable holding the "
        "user's token (at least 16 characters). One of `token_env`, `token_file`. |",
        "| `token_file` | path | | A file holding the user's token. |",
        "| `admin` | boolean | `false` | " + markdown(comments("UserConfig")["admin"]) + " |",
        "| `roots` | list of absolute paths | not set | "
        + markdown(comments("UserConfig")["roots"])
        + " |",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python .ci/gen_config_docs.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
