#!/usr/bin/env python3
# ruff: noqa: E501
"""Generate ``ahp_server/protocol/types.py`` from the AHP JSON Schemas.

Usage: ``python .ci/gen_types.py [--check]`` from the project root, with the
spec at ``../shared/spec`` (or ``AHP_SPEC_DIR``). ``--check`` exits 1 when the
committed file differs from what the schemas produce (the test suite runs it).

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
SPEC = Path(os.environ.get("AHP_SPEC_DIR", ROOT.parent / "shared" / "spec"))
OUT = ROOT / "ahp_server" / "protocol" / "types.py"
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


def load_defs() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name in SCHEMAS:
        data = json.loads((SPEC / "schema" / f"{name}.schema.json").read_text())
        for key, value in data["$defs"].items():
            defs.setdefault(key, value)
    for (owner, prop), fix in SCHEMA_FIXES.items():
        defs[owner]["properties"][prop] = fix
    return defs


def load_markdown() -> tuple[dict[str, list[tuple[str, str]]], set[tuple[str, str]]]:
    """Enum member tables and ``T | undefined`` fields from the reference pages."""
    enums: dict[str, list[tuple[str, str]]] = {}
    undefined: set[tuple[str, str]] = set()
    for page in sorted((SPEC / "docs" / "reference").glob("*.md")):
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
    def __init__(self) -> None:
        self.defs = load_defs()
        self.md_enums, undefined = load_markdown()
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
            if name in SKIP or name in ALIASES:
                continue
            self.classify(name, schema)
        self.structs["MarkdownString"] = (
            self.defs["StringOrMarkdown"]["oneOf"][1],
            "The object form of StringOrMarkdown: rendered with Markdown formatting.",
        )
        state_action = self.unions["StateAction"]
        for union, prefix in CHANNEL_UNIONS.items():
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
                name in PARTIAL or (name, wire) in self.undefined or (name, wire) in NULLABLE_FIELDS
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
            '"""AHP wire types, generated from the protocol\'s JSON Schemas. Do not edit.',
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
                    pairs = [(pascal(str(v)), v) for v in values]
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
        out.append("StringOrMarkdown: TypeAlias = str | MarkdownString")
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
            set(rendered)
            | set(self.unions)
            | set(self.any_aliases)
            | {"URI", "JsonPrimitive", "StringOrMarkdown"}
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
    text = Generator().render()
    if "--check" in sys.argv:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python .ci/gen_types.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
