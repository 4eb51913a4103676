#!/usr/bin/env python3
# ruff: noqa: E501
"""Generate the AHP wire-type modules from the protocol's JSON Schemas.

Two modules, one per protocol version the host knows:

* ``ahp_server/protocol/types.py`` from ``../shared/spec-1.0`` (1.0.0, the
  host's canonical shape; or ``AHP_SPEC_1_0_DIR``), with the changes its README
  lists (below, "1.0");
* ``ahp_server/protocol/v0_7/types.py`` from ``../shared/spec`` (0.7.0, or
  ``AHP_SPEC_DIR``): what a 0.7 peer speaks.

Usage: ``python .ci/gen_types.py [--check]`` from the project root. ``--check``
exits 1 when a committed file differs from what the schemas produce (the test
suite runs it).

Sources and the corrections applied to them (docs/protocol.md lists them too):

* ``schema/*.json`` ``$defs``: every struct, union and enum. The first file that
  defines a name wins (they agree except for a broken ``StateAction`` entry).
* The reference pages' ``| Member | Value |`` tables: enum member names.
* WIRE-SUMMARY §13: the schemas mark ``T | undefined`` fields as required; the
  reference tables show them as ``… \\| undefined``. Those fields are generated
  as optional and nullable.
* ``ChatToolCallApprovedAction.approved`` / ``ChatToolCallDeniedAction.approved``
  are typed ``{}`` in the schema; the TypeScript types say ``true`` / ``false``.
* Inline object types get names: ``Partial<ChatSummary>`` and
  ``Partial<SessionSummary>`` become ``PartialChatSummary`` /
  ``PartialSessionSummary`` (all fields nullable: ``null`` clears), the rest
  ``<Parent><Property>`` or ``<Union><Tag>``.

1.0 (``shared/spec-1.0/README.md``, "Notes for the type generator"):

* It has no reference pages. Enum member names come from the 0.7 pages where
  the value is the same (so both modules spell ``SessionStatus.InProgress``
  alike), else from the value. Its optional members that peers send as
  explicit ``null`` are listed in ``NULLABLE_FIELDS_1_0``.
* ``ToolInput`` (inline string or ``ContentRef``) is an alias, as
  ``StringOrMarkdown`` is.
* The automation and canvas channels get their action unions too, and upstream
  now names ``FileEditDiffStats`` and ``FileEditCollection`` itself.
* ``ResponsePartKind`` (no schema ``$def``) gains ``Error``.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC_0_7 = Path(os.environ.get("AHP_SPEC_DIR", ROOT.parent / "shared" / "spec"))
SPEC_1_0 = Path(os.environ.get("AHP_SPEC_1_0_DIR", ROOT.parent / "shared" / "spec-1.0"))
OUT_0_7 = ROOT / "ahp_server" / "protocol" / "v0_7" / "types.py"
OUT_1_0 = ROOT / "ahp_server" / "protocol" / "types.py"
SCHEMAS = ["state", "actions", "commands", "notifications", "errors"]

SKIP = {"AhpErrorDetailsMap", "ProtocolNotification", "ChildCustomizationType"}
ALIASES = {
    "URI": "str",
    "JsonPrimitive": "str | int | float | bool | None",
    "StringOrMarkdown": "str | MarkdownString",
}
INLINE_NAMES = {
    ("SessionChatUpdatedAction", "changes"): "PartialChatSummary",
    ("SessionSummaryChangedParams", "changes"): "PartialSessionSummary",
    ("StringOrMarkdown", "markdown"): "MarkdownString",
}
PARTIAL = {"PartialChatSummary", "PartialSessionSummary"}
# Set-or-clear action fields: a JavaScript peer may send `null` to clear
# (fixtures 134, 224); the reducers treat `null` like absent.
NULLABLE_FIELDS = {
    ("ChatActivityChangedAction", "activity"),
    ("ChatDraftChangedAction", "draft"),
    ("SessionDefaultChatChangedAction", "defaultChat"),
    ("SessionMcpServerStateChangedAction", "channel"),
    ("ChatTurnsLoadedAction", "turnsNextCursor"),
}
# 1.0: optional members that JavaScript peers send as explicit `null` (the
# 0.8-dev fixtures do; spec-1.0 README), accepted like absent. The README also
# lists ChatState/SessionState members: those nulls are in fixture states,
# where null means absent anyway; a state is what a host writes, and ours has
# no null in it (as at 0.7).
NULLABLE_FIELDS_1_0 = NULLABLE_FIELDS | {
    ("SessionActivityChangedAction", "activity"),
    ("SessionChangesetsChangedAction", "changesets"),
    ("ChangesetOperationsChangedAction", "operations"),
    ("Turn", "usage"),
    ("ActiveTurn", "usage"),
    ("ChatChangesetsChangedAction", "changesets"),
    ("ChatCanvasesChangedAction", "canvases"),
}
ALIASES_1_0 = {**ALIASES, "ToolInput": "str | ContentRef"}
# Inline shapes used in several places get one shared name.
SHARED_INLINE = {
    "ToolCallResultError": "ToolCallError",
    "ToolCallCompletedStateError": "ToolCallError",
    "ToolCallPendingResultConfirmationStateError": "ToolCallError",
    "ChatToolCallReadyActionEdits": "ToolCallEdits",
    "ToolCallPendingConfirmationStateEdits": "ToolCallEdits",
    "FileEditBefore": "FileEditSide",
    "FileEditAfter": "FileEditSide",
    "ToolResultFileEditContentBefore": "FileEditSide",
    "ToolResultFileEditContentAfter": "FileEditSide",
    "ToolResultFileEditContentDiff": "FileEditDiff",
    "CreateResourceWatchParamsExcludes": "PatternList",
    "CreateResourceWatchParamsIncludes": "PatternList",
    "ResourceWatchStateExcludes": "PatternList",
    "ResourceWatchStateIncludes": "PatternList",
    "AhpMcpUiHostCapabilitiesServerTools": "ListChangedCapability",
    "AhpMcpUiHostCapabilitiesServerResources": "ListChangedCapability",
    "ToolDefinitionInputSchema": "ToolSchema",
    "ToolDefinitionOutputSchema": "ToolSchema",
}
SCHEMA_FIXES: dict[tuple[str, str], dict[str, Any]] = {
    ("ChatToolCallApprovedAction", "approved"): {"const": True},
    ("ChatToolCallDeniedAction", "approved"): {"const": False},
}
DISCRIMINATOR_KEYS = ("type", "kind", "status", "state", "approved")
# Per-channel action unions, split out of StateAction by type prefix.
CHANNEL_UNIONS = {
    "RootAction": "root/",
    "SessionAction": "session/",
    "ChatAction": "chat/",
    "TerminalAction": "terminal/",
    "ChangesetAction": "changeset/",
    "AnnotationsAction": "annotations/",
    "ResourceWatchAction": "resourceWatch/",
}
CHANNEL_UNIONS_1_0 = {
    **CHANNEL_UNIONS,
    "AutomationAction": "automation/",
    "AutomationRunAction": "automationRun/",
    "CanvasAction": "canvas/",
}


class Target:
    """One generated module: where its schemas are, where it goes, its corrections."""

    def __init__(
        self,
        version: str,
        spec: Path,
        out: Path,
        *,
        aliases: dict[str, str],
        nullable: set[tuple[str, str]],
        channel_unions: dict[str, str],
        names_from: Path | None = None,
        extra_members: dict[str, list[tuple[str, str]]] | None = None,
    ) -> None:
        self.version = version
        self.spec = spec
        self.out = out
        self.aliases = aliases
        self.nullable = nullable
        self.channel_unions = channel_unions
        #: Reference pages giving enum member names when ``spec`` has none.
        self.names_from = names_from
        #: Members of enums that only the (older) pages define, added since.
        self.extra_members = extra_members or {}


TARGETS = [
    Target(
        "0.7.0",
        SPEC_0_7,
        OUT_0_7,
        aliases=ALIASES,
        nullable=NULLABLE_FIELDS,
        channel_unions=CHANNEL_UNIONS,
    ),
    Target(
        "1.0.0",
        SPEC_1_0,
        OUT_1_0,
        aliases=ALIASES_1_0,
        nullable=NULLABLE_FIELDS_1_0,
        channel_unions=CHANNEL_UNIONS_1_0,
        names_from=SPEC_0_7,
        # ResponsePartKind is a TypeScript enum with no schema $def; 0.9.0
        # added the error part (ErrorResponsePart.kind).
        extra_members={"ResponsePartKind": [("Error", "'error'")]},
    ),
]


def load_defs(spec: Path) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name in SCHEMAS:
        data = json.loads((spec / "schema" / f"{name}.schema.json").read_text())
        for key, value in data["$defs"].items():
            defs.setdefault(key, value)
    for (owner, prop), fix in SCHEMA_FIXES.items():
        defs[owner]["properties"][prop] = fix
    return defs


def load_markdown(spec: Path) -> tuple[dict[str, list[tuple[str, str]]], set[tuple[str, str]]]:
    """Enum member tables and ``T | undefined`` fields from the reference pages."""
    enums: dict[str, list[tuple[str, str]]] = {}
    undefined: set[tuple[str, str]] = set()
    for page in sorted((spec / "docs" / "reference").glob("*.md")):
        current = None
        in_enum = False
        for line in page.read_text().splitlines():
            heading = re.match(r"^###\s+`([A-Za-z0-9_/]+)`\s*$", line)
            if heading:
                current, in_enum = heading.group(1), False
                continue
            if line.startswith("## "):
                current, in_enum = None, False
                continue
            if current is None:
                continue
            if line.startswith("| Member | Value"):
                in_enum = True
                enums[current] = []
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if len(cells) < 2 or not re.fullmatch(r"`[^`]+`", cells[0]):
                continue
            field = cells[0].strip("`")
            if in_enum:
                enums[current].append((field, cells[1].strip("`")))
            elif "\\| undefined" in cells[1]:
                undefined.add((current, field))
    return enums, undefined


def enum_value(raw: str) -> str | int:
    if raw.startswith("'") and raw.endswith("'"):
        return raw[1:-1]
    expr = raw.replace("\\|", "|")
    if not re.fullmatch(r"[0-9()<| \-]+", expr):
        raise ValueError(f"unexpected enum value {raw!r}")
    return int(eval(expr))  # digits, shifts and ors only (checked above)


def snake(name: str) -> str:
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name.lstrip("_")).lower()
    if keyword.iskeyword(out) or out in {"meta_"}:
        out += "_"
    return out


def pascal(value: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", value)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def doc(text: str | None) -> str:
    if not text:
        return ""
    para = text.strip().split("\n\n")[0].replace("\n", " ")
    link = r"\{@link ([^}|]+?)(?:\s*\|\s*([^}]+))?\}"
    para = re.sub(link, lambda m: m.group(2) or m.group(1), para)
    para = re.sub(r"\s+", " ", para.replace("\\", "\\\\").replace('"', "'")).strip()
    return para


class Generator:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.defs = load_defs(target.spec)
        self.md_enums, undefined = load_markdown(target.spec)
        if target.names_from is not None:
            # Member names by value from the older pages (values the newer
            # version added are named after themselves, see render()).
            older, _ = load_markdown(target.names_from)
            for name, members in older.items():
                self.md_enums.setdefault(name, members)
        for name, members in target.extra_members.items():
            self.md_enums[name] = [*self.md_enums.get(name, []), *members]
        # Action sections are headed by their tag (`session/activityChanged`).
        by_tag = {
            schema["properties"]["type"]["const"]: name
            for name, schema in self.defs.items()
            if "const" in schema.get("properties", {}).get("type", {})
        }
        self.undefined = {(by_tag.get(owner, owner), field) for owner, field in undefined}
        self.structs: dict[str, tuple[Any, str]] = {}  # name -> (schema, description)
        self.unions: dict[str, list[str]] = {}  # name -> member names (structs or unions)
        self.union_docs: dict[str, str] = {}
        self.str_enums: dict[str, list[str]] = {}
        self.int_enums: dict[str, list[int]] = {}
        self.any_aliases: dict[str, str] = {}
        for name, schema in sorted(self.defs.items()):
            if name in SKIP or name in target.aliases:
                continue
            self.classify(name, schema)
        self.structs["MarkdownString"] = (
            self.defs["StringOrMarkdown"]["oneOf"][1],
            "The object form of StringOrMarkdown: rendered with Markdown formatting.",
        )
        state_action = self.unions["StateAction"]
        for union, prefix in target.channel_unions.items():
            members = [m for m in state_action if self.type_values(m, "type")[0].startswith(prefix)]
            self.unions[union] = members
            self.union_docs[union] = f"Every action of the `{prefix}` channel family."

    # -- classification -------------------------------------------------------------
    def classify(self, name: str, schema: dict[str, Any]) -> None:
        if "enum" in schema:
            if schema.get("type") == "number" or all(isinstance(v, int) for v in schema["enum"]):
                self.int_enums[name] = schema["enum"]
            else:
                self.str_enums[name] = schema["enum"]
            return
        if "oneOf" in schema:
            members: list[str] = []
            for i, variant in enumerate(schema["oneOf"]):
                if "$ref" in variant:
                    ref = variant["$ref"].split("/")[-1]
                    if ref:
                        members.append(ref)
                elif variant.get("type") == "object":
                    tag = self.const_of(variant)
                    sub = f"{name}{pascal(str(tag))}" if tag is not None else f"{name}{i}"
                    self.structs[sub] = (variant, f"The `{tag}` form of {name}.")
                    members.append(sub)
            self.unions[name] = members
            self.union_docs[name] = doc(schema.get("description"))
            return
        if schema.get("type") == "object" and "properties" in schema:
            self.structs[name] = (schema, doc(schema.get("description")))
            return
        self.any_aliases[name] = self.ann(schema, name, "")

    @staticmethod
    def const_of(schema: dict[str, Any]) -> Any:
        for key in DISCRIMINATOR_KEYS:
            prop = schema.get("properties", {}).get(key)
            if prop and "const" in prop:
                return prop["const"]
        return None

    def prop_values(self, schema: dict[str, Any], key: str) -> list[Any] | None:
        prop = schema.get("properties", {}).get(key)
        if prop is None:
            return None
        if "const" in prop:
            return [prop["const"]]
        if "oneOf" in prop and all("const" in v for v in prop["oneOf"]):
            return [v["const"] for v in prop["oneOf"]]
        if "enum" in prop and len(prop["enum"]) == 1:
            return list(prop["enum"])
        return None

    def type_values(self, member: str, key: str) -> list[Any]:
        if member in self.unions:
            out: list[Any] = []
            for sub in self.unions[member]:
                vals = self.type_values(sub, key)
                if not vals:
                    return []
                out.extend(vals)
            return out
        schema = self.structs[member][0] if member in self.structs else self.defs[member]
        return self.prop_values(schema, key) or []

    def discriminator(self, union: str) -> str | None:
        members = self.unions[union]
        for key in DISCRIMINATOR_KEYS:
            seen: set[Any] = set()
            ok = True
            for member in members:
                vals = self.type_values(member, key)
                if not vals or seen.intersection(vals):
                    ok = False
                    break
                seen.update(vals)
            if ok:
                return key
        return None

    # -- annotations ----------------------------------------------------------------
    def ann(self, schema: dict[str, Any], owner: str, prop: str, *, literal: bool = False) -> str:
        if "$ref" in schema:
            ref = schema["$ref"].split("/")[-1]
            if ref in self.str_enums:
                return "str"
            if ref in self.int_enums:
                return "int"
            if ref == "ChildCustomizationType":
                return "str"
            return ref
        if "const" in schema:
            return f"Literal[{schema['const']!r}]" if literal else self.scalar(schema["const"])
        if "enum" in schema:
            if literal and len(schema["enum"]) == 1:
                return f"Literal[{schema['enum'][0]!r}]"
            return "int" if schema.get("type") == "number" else "str"
        if "oneOf" in schema:
            if all("const" in v for v in schema["oneOf"]):
                if literal:
                    return "Literal[" + ", ".join(repr(v["const"]) for v in schema["oneOf"]) + "]"
                return self.scalar(schema["oneOf"][0]["const"])
            if all("$ref" in v for v in schema["oneOf"]):
                refs = [v["$ref"].split("/")[-1] for v in schema["oneOf"]]
                if sum(r in self.structs for r in refs) > 1:
                    name = f"{owner}{pascal(prop)}"
                    self.unions[name] = refs
                    self.union_docs[name] = doc(schema.get("description"))
                    return name
            parts = [self.ann(v, owner, prop) for v in schema["oneOf"]]
            return " | ".join(dict.fromkeys(parts))
        kind = schema.get("type")
        if kind == "string":
            return "str"
        if kind == "number":
            # Sequence numbers are integers (64-bit on the wire, WIRE-SUMMARY §1).
            return "int" if prop.endswith("Seq") else "int | float"
        if kind == "integer":
            return "int"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "None"
        if kind == "array":
            return f"tuple[{self.ann(schema.get('items', {}), owner, prop)}, ...]"
        if kind == "object":
            if "properties" in schema:
                name = INLINE_NAMES.get((owner, prop), f"{owner}{pascal(prop)}")
                name = SHARED_INLINE.get(name, name)
                if name not in self.structs:
                    self.structs[name] = (schema, doc(schema.get("description")))
                return name
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return f"dict[str, {self.ann(extra, owner, prop)}]"
            return "dict[str, Any]"
        return "Any"

    @staticmethod
    def scalar(value: Any) -> str:
        return {bool: "bool", int: "int", float: "float", str: "str"}[type(value)]

    # -- emit -----------------------------------------------------------------------
    def struct_source(self, name: str) -> list[str]:
        schema, description = self.structs[name]
        required = set(schema.get("required", []))
        lines = [f"class {name}(ProtocolStruct, kw_only=True, frozen=True):"]
        if description:
            lines.append(f'    """{description}"""')
            lines.append("")
        taken: set[str] = set()
        body: list[str] = []
        for wire, prop in schema["properties"].items():
            attr = snake(wire)
            if attr in taken:
                raise SystemExit(f"{name}: two fields map to {attr}")
            taken.add(attr)
            is_tag = wire in DISCRIMINATOR_KEYS and self.prop_values(schema, wire) is not None
            annotation = self.ann(prop, name, wire, literal=is_tag)
            nullable = (
                name in PARTIAL
                or (name, wire) in self.undefined
                or (name, wire) in self.target.nullable
            )
            optional = wire not in required or nullable
            default: str | None = None
            if is_tag and len(self.prop_values(schema, wire) or []) == 1 and wire in required:
                default = repr(self.prop_values(schema, wire)[0])  # type: ignore[index]
            parts = [p for p in annotation.split(" | ") if p != "None"]
            if optional:
                parts.append("UnsetType")
                default = "UNSET"
            if nullable or "None" in annotation.split(" | "):
                parts.append("None")
            annotation = " | ".join(parts)
            args = []
            if attr != wire:
                args.append(f"name={wire!r}")
            if default is not None:
                args.append(f"default={default}")
            value = f"msgspec.field({', '.join(args)})" if attr != wire else default
            line = f"    {attr}: {annotation}" + (f" = {value}" if value is not None else "")
            comment = doc(prop.get("description"))
            if comment:
                body.append(f"    #: {comment[:180].rstrip()}")
            body.append(line)
        if not body:
            body.append("    pass")
        return lines + body

    def union_source(self, name: str) -> tuple[str, str]:
        members = self.unions[name]
        flat = " | ".join([*members, "UnknownVariant"])
        key = self.discriminator(name)
        if key is None:
            shape = self.shape(name)
            pairs = ", ".join(f"({k!r}, {m})" for k, m in shape)
            return typing_line_for(
                name, flat
            ), f"    {name} = shape_union(\n        {name!r}, ({pairs},)\n    )"
        mapping: dict[str, str] = {}
        for member in members:
            for value in self.type_values(member, key):
                mapping.setdefault(repr(value), member)
        entries = "".join(f"            {v}: {m},\n" for v, m in mapping.items())
        runtime = f"    {name} = open_union(\n        {name!r},\n        {key!r},\n        {{\n{entries}        }},\n    )"
        return typing_line_for(name, flat), runtime

    def shape(self, union: str) -> list[tuple[str, str]]:
        """(key, member) pairs for a union without a discriminator: unique required keys first."""
        members = self.unions[union]
        props = {m: set(self.structs[m][0]["properties"]) for m in members}
        first: list[tuple[str, str]] = []
        last: list[tuple[str, str]] = []
        for member in members:
            required = self.structs[member][0].get("required", [])
            others = set().union(*(props[o] for o in members if o != member))
            unique = [k for k in required if k not in others]
            if unique:
                first.append((unique[0], member))
            elif required:
                last.append((required[0], member))
            else:
                raise SystemExit(f"union {union}: cannot tell {member} apart")
        return first + last

    def union_order(self) -> list[str]:
        order: list[str] = []

        def visit(name: str) -> None:
            if name in order:
                return
            for member in self.unions[name]:
                if member in self.unions:
                    visit(member)
            order.append(name)

        for name in sorted(self.unions):
            visit(name)
        return order

    def render(self) -> str:
        out = [
            f'"""AHP {self.target.version} wire types, generated from the protocol\'s JSON Schemas. Do not edit.',
            "",
            "Layer: protocol (pure). Regenerate with ``python .ci/gen_types.py``; the",
            "rules (optional vs nullable fields, open unions, naming) are in",
            ":mod:`ahp_server.protocol._base` and the generator's docstring.",
            '"""',
            "",
            "# ruff: noqa: E501",
            "from __future__ import annotations",
            "",
            "from enum import IntEnum, StrEnum",
            "from typing import TYPE_CHECKING, Any, Literal, TypeAlias",
            "",
            "import msgspec",
            "from msgspec import UNSET, UnsetType",
            "",
            "from ahp_server.protocol._base import ProtocolStruct, UnknownVariant, open_union, shape_union",
            "",
            "URI: TypeAlias = str",
            "JsonPrimitive: TypeAlias = str | int | float | bool | None",
            "",
        ]
        # enums: member names from the reference tables where present
        enum_names = sorted(set(self.md_enums) | set(self.str_enums) | set(self.int_enums))
        for name in enum_names:
            members = self.md_enums.get(name)
            values = self.str_enums.get(name) or self.int_enums.get(name)
            if members:
                pairs = [(m, enum_value(v)) for m, v in members]
                if values is not None and sorted(map(str, values)) != sorted(
                    str(v) for _, v in pairs
                ):
                    # The schema's values win; a value the table names keeps
                    # its name (SessionStatus.InProgress in both modules).
                    known = {str(v): m for m, v in pairs}
                    pairs = [(known.get(str(v)) or pascal(str(v)), v) for v in values]
            elif values is not None:
                pairs = [(pascal(str(v)), v) for v in values]
            else:
                continue
            if name == "ActionType" or name in self.structs or name in self.unions:
                continue
            if not all(m.isidentifier() for m, _ in pairs):
                continue  # numeric codes without member names: see protocol/errors.py
            base = "IntEnum" if all(isinstance(v, int) for _, v in pairs) else "StrEnum"
            out.append("")
            out.append(f"class {name}({base}):")
            out.extend(f"    {m} = {v!r}" for m, v in pairs)
            out.append("")
        # ActionType: every action type tag
        out.append("")
        out.append("class ActionType(StrEnum):")
        out.append(
            '    """Discriminant values for all state actions (the `type` of each action)."""'
        )
        out.append("")
        for member in self.unions["StateAction"]:
            for value in dict.fromkeys(self.type_values(member, "type")):
                out.append(f"    {pascal(str(value))} = {value!r}")
        out.append("")
        # structs (inline ones get discovered while rendering, so loop until stable)
        rendered: dict[str, list[str]] = {}
        while len(rendered) < len(self.structs):
            for name in sorted(self.structs):
                if name not in rendered:
                    rendered[name] = self.struct_source(name)
        for name in sorted(rendered):
            out.append("")
            out.extend(rendered[name])
            out.append("")
        out.append("")
        order = self.union_order()
        typing_lines = []
        runtime_lines = []
        for name in order:
            t, r = self.union_source(name)
            typing_lines.append(t)
            runtime_lines.append(r)
        for alias, value in self.target.aliases.items():
            if alias not in {"URI", "JsonPrimitive"}:
                out.append(f"{alias}: TypeAlias = {value}")
        out.append("")
        out.append("if TYPE_CHECKING:")
        out.extend(typing_lines)
        out.append("else:")
        out.extend(runtime_lines)
        out.append("")
        for name, ann in sorted(self.any_aliases.items()):
            out.append(f"{name}: TypeAlias = {ann}")
        out.append("")
        names = sorted(
            set(rendered) | set(self.unions) | set(self.any_aliases) | set(self.target.aliases)
        )
        out.append("#: Every named wire type, by its spec name (enums map to their wire type).")
        out.append("WIRE_TYPES: dict[str, Any] = {")
        for name in names:
            out.append(f"    {name!r}: {name},")
        for name in sorted(set(self.str_enums) | {"ChildCustomizationType"}):
            out.append(f"    {name!r}: str,")
        for name in sorted(self.int_enums):
            out.append(f"    {name!r}: int,")
        out.append("}")
        out.append("")
        return "\n".join(out)


def typing_line_for(name: str, flat: str) -> str:
    members = "\n        | ".join(flat.split(" | "))
    return f"    {name}: TypeAlias = (\n        {members}\n    )"


def main() -> int:
    stale = 0
    for target in TARGETS:
        text = Generator(target).render()
        if "--check" in sys.argv:
            current = target.out.read_text() if target.out.exists() else ""
            if current != text:
                print(f"{target.out} is out of date: run python .ci/gen_types.py", file=sys.stderr)
                stale = 1
            continue
        target.out.write_text(text)
        print(f"wrote {target.out}")
    return stale


if __name__ == "__main__":
    raise SystemExit(main())
