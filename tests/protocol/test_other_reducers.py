"""Unit tests of the changeset, terminal, annotations and resource-watch reducers.

States and actions are written in wire shape (camelCase JSON) and decoded with
the project codec, so every case reads like the spec. :func:`fold` applies the
actions and checks that no input state was mutated; results are compared in
wire form (absent stays absent). Every action has an effect case and, where the
spec defines one, a no-op case; unknown actions must return the very same
state object. A hypothesis pass at the end throws random action sequences at
each reducer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.v0_7.reducers.annotations import reduce_annotations
from ahp_server.protocol.v0_7.reducers.changeset import reduce_changeset
from ahp_server.protocol.v0_7.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.v0_7.reducers.terminal import reduce_terminal
from ahp_server.protocol.v0_7.types import (
    AnnotationsAction,
    AnnotationsState,
    ChangesetAction,
    ChangesetState,
    ChatDraftChangedAction,
    ResourceWatchAction,
    ResourceWatchState,
    StateAction,
    TerminalAction,
    TerminalState,
)
from tests.strategies import roundtrip, strategy_for

Reducer = Callable[[Any, object, Callable[[], float]], Any]


def clock() -> float:
    return 9999.0


def action(payload: dict[str, Any]) -> Any:
    """A wire action payload decoded as the host would decode it."""
    return codec.convert(payload, StateAction)


def wire(value: Any) -> Any:
    """A struct in wire form (plain JSON values, absent fields omitted)."""
    return json.loads(codec.encode(value))


def fold(reducer: Reducer, state: Any, *payloads: dict[str, Any]) -> Any:
    """Apply each action in turn, checking that no input state is mutated."""
    result = state
    for payload in payloads:
        before = codec.encode(result)
        after = reducer(result, action(payload), clock)
        assert codec.encode(result) == before, f"{payload['type']} mutated its input"
        result = after
    return result


# -- changeset -------------------------------------------------------------------------------


def file_json(file_id: str, content: str = "content:/a", **extra: Any) -> dict[str, Any]:
    return {
        "id": file_id,
        "edit": {"after": {"uri": file_id, "content": {"uri": content}}, "diff": {"added": 1}},
        **extra,
    }


def operation_json(op_id: str, status: str = "idle", **extra: Any) -> dict[str, Any]:
    return {"id": op_id, "label": op_id.title(), "scopes": ["changeset"], "status": status, **extra}


ERROR = {"errorType": "git", "message": "fatal: not a git repository"}
OTHER_ERROR = {"errorType": "stale", "message": "old error"}
A = "file:///src/a.ts"
B = "file:///src/b.ts"
C = "file:///src/c.ts"


def changeset(**fields: Any) -> ChangesetState:
    return codec.convert({"status": "ready", "files": [], **fields}, ChangesetState)


def reduce_cs(state: ChangesetState, *payloads: dict[str, Any]) -> Any:
    return fold(reduce_changeset, state, *payloads)


class TestChangesetStatusChanged:
    def test_ready_clears_a_stale_error(self) -> None:
        state = changeset(status="computing", error=OTHER_ERROR)
        result = reduce_cs(state, {"type": "changeset/statusChanged", "status": "ready"})
        assert wire(result) == {"status": "ready", "files": []}

    def test_error_attaches_the_error(self) -> None:
        state = changeset(status="computing")
        result = reduce_cs(
            state, {"type": "changeset/statusChanged", "status": "error", "error": ERROR}
        )
        assert wire(result) == {"status": "error", "error": ERROR, "files": []}

    def test_error_without_payload_replaces_the_old_error_with_nothing(self) -> None:
        state = changeset(status="error", error=OTHER_ERROR)
        result = reduce_cs(state, {"type": "changeset/statusChanged", "status": "error"})
        assert wire(result) == {"status": "error", "files": []}

    def test_an_error_on_a_non_error_status_is_dropped(self) -> None:
        result = reduce_cs(
            changeset(), {"type": "changeset/statusChanged", "status": "computing", "error": ERROR}
        )
        assert wire(result) == {"status": "computing", "files": []}

    def test_files_and_operations_are_kept(self) -> None:
        state = changeset(files=[file_json(A)], operations=[operation_json("stage")])
        result = reduce_cs(state, {"type": "changeset/statusChanged", "status": "computing"})
        assert result.files == state.files
        assert result.operations == state.operations


class TestChangesetFileSet:
    def test_appends_a_new_file(self) -> None:
        state = changeset(files=[file_json(A)])
        result = reduce_cs(state, {"type": "changeset/fileSet", "file": file_json(B)})
        assert [f["id"] for f in wire(result)["files"]] == [A, B]

    def test_replaces_an_existing_file_whole_in_place(self) -> None:
        state = changeset(files=[file_json(A), file_json(B, reviewed=True, _meta={"k": 1})])
        new_b = file_json(B, "content:/b2")
        result = reduce_cs(state, {"type": "changeset/fileSet", "file": new_b})
        assert wire(result)["files"] == [file_json(A), new_b]  # reviewed and _meta are gone

    def test_replaces_only_the_first_duplicate(self) -> None:
        state = changeset(files=[file_json(A, "content:/1"), file_json(A, "content:/2")])
        result = reduce_cs(state, {"type": "changeset/fileSet", "file": file_json(A, "content:/3")})
        assert [f["edit"]["after"]["content"]["uri"] for f in wire(result)["files"]] == [
            "content:/3",
            "content:/2",
        ]


class TestChangesetFileRemoved:
    def test_drops_the_matching_file(self) -> None:
        state = changeset(files=[file_json(A), file_json(B)])
        result = reduce_cs(state, {"type": "changeset/fileRemoved", "fileId": A})
        assert wire(result)["files"] == [file_json(B)]

    def test_unknown_id_is_a_no_op(self) -> None:
        state = changeset(files=[file_json(A)])
        assert reduce_cs(state, {"type": "changeset/fileRemoved", "fileId": C}) is state

    def test_drops_only_the_first_duplicate(self) -> None:
        state = changeset(files=[file_json(A, "content:/1"), file_json(A, "content:/2")])
        result = reduce_cs(state, {"type": "changeset/fileRemoved", "fileId": A})
        assert wire(result)["files"] == [file_json(A, "content:/2")]


class TestChangesetFilesReviewChanged:
    def test_marks_every_listed_file_and_ignores_unknown_ids(self) -> None:
        state = changeset(files=[file_json(A), file_json(B), file_json(C)])
        result = reduce_cs(
            state,
            {"type": "changeset/filesReviewChanged", "files": [A, C, "missing"], "reviewed": True},
        )
        assert [f.get("reviewed") for f in wire(result)["files"]] == [True, None, True]

    def test_leaves_edit_and_meta_untouched(self) -> None:
        state = changeset(files=[file_json(A, _meta={"k": 1})])
        result = reduce_cs(
            state, {"type": "changeset/filesReviewChanged", "files": [A], "reviewed": True}
        )
        assert wire(result)["files"] == [file_json(A, _meta={"k": 1}, reviewed=True)]

    def test_false_clears_review(self) -> None:
        state = changeset(files=[file_json(A, reviewed=True)])
        result = reduce_cs(
            state, {"type": "changeset/filesReviewChanged", "files": [A], "reviewed": False}
        )
        assert wire(result)["files"] == [file_json(A, reviewed=False)]

    def test_false_on_an_absent_flag_writes_false(self) -> None:
        # `undefined !== false` upstream: the flag becomes present.
        state = changeset(files=[file_json(A)])
        result = reduce_cs(
            state, {"type": "changeset/filesReviewChanged", "files": [A], "reviewed": False}
        )
        assert wire(result)["files"] == [file_json(A, reviewed=False)]

    def test_applies_to_every_file_with_a_listed_id(self) -> None:
        state = changeset(files=[file_json(A, "content:/1"), file_json(A, "content:/2")])
        result = reduce_cs(
            state, {"type": "changeset/filesReviewChanged", "files": [A], "reviewed": True}
        )
        assert [f["reviewed"] for f in wire(result)["files"]] == [True, True]

    @pytest.mark.parametrize(
        ("files", "ids", "reviewed"),
        [
            ([file_json(A, reviewed=True)], [A], True),
            ([file_json(A, reviewed=False)], [A], False),
            ([file_json(A)], ["missing"], True),
            ([file_json(A)], [], True),
            ([], [A], True),
        ],
        ids=["already-true", "already-false", "unknown-id", "empty-list", "no-files"],
    )
    def test_no_change_returns_the_same_state(
        self, files: list[dict[str, Any]], ids: list[str], reviewed: bool
    ) -> None:
        state = changeset(files=files)
        payload = {"type": "changeset/filesReviewChanged", "files": ids, "reviewed": reviewed}
        assert reduce_cs(state, payload) is state


class TestChangesetContentChanged:
    def test_replaces_files_and_operations(self) -> None:
        state = changeset(files=[file_json(A)], operations=[operation_json("stage")])
        result = reduce_cs(
            state,
            {
                "type": "changeset/contentChanged",
                "files": [file_json(B)],
                "operations": [operation_json("revert")],
            },
        )
        assert wire(result) == {
            "status": "ready",
            "files": [file_json(B)],
            "operations": [operation_json("revert")],
        }

    def test_absent_operations_are_kept(self) -> None:
        state = changeset(files=[file_json(A)], operations=[operation_json("stage")])
        result = reduce_cs(state, {"type": "changeset/contentChanged", "files": []})
        assert wire(result) == {
            "status": "ready",
            "files": [],
            "operations": [operation_json("stage")],
        }

    def test_empty_operations_are_a_value(self) -> None:
        state = changeset(operations=[operation_json("stage")])
        result = reduce_cs(
            state, {"type": "changeset/contentChanged", "files": [], "operations": []}
        )
        assert wire(result) == {"status": "ready", "files": [], "operations": []}

    def test_error_is_set_and_an_absent_error_clears_it(self) -> None:
        state = changeset(status="computing")
        failed = reduce_cs(state, {"type": "changeset/contentChanged", "files": [], "error": ERROR})
        assert wire(failed) == {"status": "computing", "files": [], "error": ERROR}
        recovered = reduce_cs(failed, {"type": "changeset/contentChanged", "files": []})
        assert wire(recovered) == {"status": "computing", "files": []}


class TestChangesetOperationsChanged:
    def test_sets_the_list(self) -> None:
        state = changeset(operations=[operation_json("stage")])
        result = reduce_cs(
            state,
            {"type": "changeset/operationsChanged", "operations": [operation_json("make-pr")]},
        )
        assert wire(result)["operations"] == [operation_json("make-pr")]

    @pytest.mark.parametrize("payload", [{}, {"operations": None}], ids=["absent", "null"])
    def test_absent_or_null_removes_the_list(self, payload: dict[str, Any]) -> None:
        state = changeset(operations=[operation_json("stage")])
        result = reduce_cs(state, {"type": "changeset/operationsChanged", **payload})
        assert wire(result) == {"status": "ready", "files": []}

    def test_empty_list_is_a_value(self) -> None:
        result = reduce_cs(changeset(), {"type": "changeset/operationsChanged", "operations": []})
        assert wire(result)["operations"] == []


class TestChangesetOperationStatusChanged:
    def test_running_clears_the_error(self) -> None:
        state = changeset(
            operations=[operation_json("stage"), operation_json("pr", "error", error=ERROR)]
        )
        result = reduce_cs(
            state,
            {"type": "changeset/operationStatusChanged", "operationId": "pr", "status": "running"},
        )
        assert wire(result)["operations"] == [
            operation_json("stage"),
            operation_json("pr", "running"),
        ]

    def test_error_attaches_the_error(self) -> None:
        state = changeset(operations=[operation_json("pr", "running", icon="check")])
        result = reduce_cs(
            state,
            {
                "type": "changeset/operationStatusChanged",
                "operationId": "pr",
                "status": "error",
                "error": ERROR,
            },
        )
        assert wire(result)["operations"] == [
            operation_json("pr", "error", icon="check", error=ERROR)
        ]

    def test_error_without_payload_drops_the_old_error(self) -> None:
        state = changeset(operations=[operation_json("pr", "error", error=OTHER_ERROR)])
        result = reduce_cs(
            state,
            {"type": "changeset/operationStatusChanged", "operationId": "pr", "status": "error"},
        )
        assert wire(result)["operations"] == [operation_json("pr", "error")]

    def test_updates_only_the_first_duplicate(self) -> None:
        state = changeset(operations=[operation_json("pr"), operation_json("pr")])
        result = reduce_cs(
            state,
            {"type": "changeset/operationStatusChanged", "operationId": "pr", "status": "disabled"},
        )
        assert [op["status"] for op in wire(result)["operations"]] == ["disabled", "idle"]

    @pytest.mark.parametrize(
        "operations", [None, [], [operation_json("stage")]], ids=["absent", "empty", "unknown-id"]
    )
    def test_unknown_operation_is_a_no_op(self, operations: list[dict[str, Any]] | None) -> None:
        state = changeset() if operations is None else changeset(operations=operations)
        payload = {
            "type": "changeset/operationStatusChanged",
            "operationId": "pr",
            "status": "idle",
        }
        assert reduce_cs(state, payload) is state


class TestChangesetCleared:
    def test_empties_files_only(self) -> None:
        state = changeset(
            status="error", error=ERROR, files=[file_json(A)], operations=[operation_json("x")]
        )
        result = reduce_cs(state, {"type": "changeset/cleared"})
        assert wire(result) == {
            "status": "error",
            "error": ERROR,
            "files": [],
            "operations": [operation_json("x")],
        }

    def test_already_empty_is_a_no_op(self) -> None:
        state = changeset(operations=[operation_json("x")])
        assert reduce_cs(state, {"type": "changeset/cleared"}) is state


# -- terminal --------------------------------------------------------------------------------

CLIENT_CLAIM = {"kind": "client", "clientId": "c1"}
SESSION = "ahp-session:/s1"


def terminal(**fields: Any) -> TerminalState:
    return codec.convert(
        {"title": "bash", "content": [], "claim": CLIENT_CLAIM, **fields}, TerminalState
    )


def reduce_term(state: TerminalState, *payloads: dict[str, Any]) -> Any:
    return fold(reduce_terminal, state, *payloads)


def text(value: str) -> dict[str, Any]:
    return {"type": "unclassified", "value": value}


def command(
    command_id: str, output: str = "", *, done: bool = False, **extra: Any
) -> dict[str, Any]:
    return {
        "type": "command",
        "commandId": command_id,
        "commandLine": f"run {command_id}",
        "output": output,
        "timestamp": 1000,
        "isComplete": done,
        **extra,
    }


class TestTerminalData:
    def test_appends_to_an_unclassified_tail(self) -> None:
        state = terminal(content=[text("$ ")])
        result = reduce_term(
            state,
            {"type": "terminal/data", "data": "hello"},
            {"type": "terminal/data", "data": " world\r\n"},
        )
        assert wire(result)["content"] == [text("$ hello world\r\n")]

    def test_starts_a_part_on_empty_content(self) -> None:
        result = reduce_term(terminal(), {"type": "terminal/data", "data": "hi"})
        assert wire(result)["content"] == [text("hi")]

    def test_appends_to_a_running_command_tail(self) -> None:
        state = terminal(content=[text("$ "), command("k1", "a")])
        result = reduce_term(state, {"type": "terminal/data", "data": "b"})
        assert wire(result)["content"] == [text("$ "), command("k1", "ab")]

    def test_a_finished_command_tail_gets_a_new_part(self) -> None:
        state = terminal(content=[command("k1", "out", done=True, exitCode=0)])
        result = reduce_term(state, {"type": "terminal/data", "data": "$ "})
        assert wire(result)["content"] == [command("k1", "out", done=True, exitCode=0), text("$ ")]

    def test_only_the_tail_grows(self) -> None:
        state = terminal(content=[text("a"), command("k1", "x", done=True)])
        result = reduce_term(state, {"type": "terminal/data", "data": "b"})
        assert wire(result)["content"] == [text("a"), command("k1", "x", done=True), text("b")]

    def test_an_unknown_part_kind_tail_gets_a_new_part(self) -> None:
        future = {"type": "futurePart", "x": 1}
        state = terminal(content=[future])
        result = reduce_term(state, {"type": "terminal/data", "data": "z"})
        assert wire(result)["content"] == [future, text("z")]

    def test_empty_data_is_still_appended(self) -> None:
        result = reduce_term(terminal(), {"type": "terminal/data", "data": ""})
        assert wire(result)["content"] == [text("")]


def test_terminal_input_returns_the_same_state() -> None:
    state = terminal(content=[text("$ ")])
    assert reduce_term(state, {"type": "terminal/input", "data": "ls -la\r"}) is state


def test_terminal_resized_sets_cols_and_rows() -> None:
    result = reduce_term(
        terminal(cols=80, rows=24), {"type": "terminal/resized", "cols": 120, "rows": 40}
    )
    assert (wire(result)["cols"], wire(result)["rows"]) == (120, 40)


@pytest.mark.parametrize(
    "claim",
    [
        {"kind": "client", "clientId": "vscode-1"},
        {"kind": "session", "session": SESSION, "turnId": "t1", "toolCallId": "tc1"},
        {"kind": "session", "session": SESSION},
        {"kind": "futureOwner", "id": "x"},
    ],
    ids=["client", "session-tool-call", "session", "unknown-kind"],
)
def test_terminal_claimed_replaces_the_claim(claim: dict[str, Any]) -> None:
    state = terminal(claim={"kind": "session", "session": SESSION, "turnId": "t0"})
    result = reduce_term(state, {"type": "terminal/claimed", "claim": claim})
    assert wire(result)["claim"] == claim


def test_terminal_title_changed_sets_the_title() -> None:
    result = reduce_term(terminal(), {"type": "terminal/titleChanged", "title": ""})
    assert wire(result)["title"] == ""


def test_terminal_cwd_changed_sets_cwd() -> None:
    state = terminal(cwd="file:///home/user")
    result = reduce_term(state, {"type": "terminal/cwdChanged", "cwd": "file:///home/user/p"})
    assert wire(result)["cwd"] == "file:///home/user/p"


class TestTerminalExited:
    def test_sets_the_exit_code(self) -> None:
        result = reduce_term(terminal(), {"type": "terminal/exited", "exitCode": 0})
        assert wire(result)["exitCode"] == 0

    def test_without_a_code_clears_the_previous_one(self) -> None:
        result = reduce_term(terminal(exitCode=1), {"type": "terminal/exited"})
        assert "exitCode" not in wire(result)


def test_terminal_cleared_resets_content_only() -> None:
    state = terminal(content=[text("$ hi"), command("k1")], supportsCommandDetection=True, cols=80)
    result = reduce_term(state, {"type": "terminal/cleared"})
    assert wire(result) == {
        "title": "bash",
        "content": [],
        "claim": CLIENT_CLAIM,
        "supportsCommandDetection": True,
        "cols": 80,
    }


@pytest.mark.parametrize("before", [None, False, True], ids=["absent", "false", "true"])
def test_terminal_command_detection_available_sets_the_flag(before: bool | None) -> None:
    state = terminal() if before is None else terminal(supportsCommandDetection=before)
    result = reduce_term(state, {"type": "terminal/commandDetectionAvailable"})
    assert wire(result)["supportsCommandDetection"] is True


def test_terminal_command_executed_appends_a_running_command() -> None:
    state = terminal(content=[text("$ ")])
    result = reduce_term(
        state,
        {
            "type": "terminal/commandExecuted",
            "commandId": "k1",
            "commandLine": "run k1",
            "timestamp": 1000,
        },
    )
    assert wire(result)["content"] == [text("$ "), command("k1")]
    assert wire(result)["supportsCommandDetection"] is True


class TestTerminalCommandFinished:
    def test_completes_the_matching_command(self) -> None:
        state = terminal(content=[command("k1", "out"), text("$ ")])
        result = reduce_term(
            state,
            {"type": "terminal/commandFinished", "commandId": "k1", "exitCode": 2, "durationMs": 5},
        )
        assert wire(result)["content"] == [
            command("k1", "out", done=True, exitCode=2, durationMs=5),
            text("$ "),
        ]

    def test_absent_fields_clear_earlier_values(self) -> None:
        state = terminal(content=[command("k1", done=True, exitCode=1, durationMs=3)])
        result = reduce_term(state, {"type": "terminal/commandFinished", "commandId": "k1"})
        assert wire(result)["content"] == [command("k1", done=True)]

    def test_updates_every_command_with_that_id(self) -> None:
        state = terminal(content=[command("k1", "a", done=True), command("k2"), command("k1", "b")])
        result = reduce_term(
            state, {"type": "terminal/commandFinished", "commandId": "k1", "exitCode": 0}
        )
        assert wire(result)["content"] == [
            command("k1", "a", done=True, exitCode=0),
            command("k2"),
            command("k1", "b", done=True, exitCode=0),
        ]

    def test_unknown_command_leaves_content_equal(self) -> None:
        state = terminal(content=[command("k1"), text("x"), {"type": "futurePart"}])
        result = reduce_term(state, {"type": "terminal/commandFinished", "commandId": "zz"})
        assert result == state


def test_terminal_full_lifecycle() -> None:
    """Out-of-version case 083 (v1.0.0), reshaped to 0.7.0: top-level ``exitCode``, no
    ``lifecycle`` and no ``claim.chat``."""
    session_claim = {"kind": "session", "session": SESSION, "turnId": "t1", "toolCallId": "tc1"}
    result = reduce_term(
        terminal(),
        {"type": "terminal/cwdChanged", "cwd": "file:///home/user"},
        {"type": "terminal/resized", "cols": 80, "rows": 24},
        {"type": "terminal/claimed", "claim": session_claim},
        {"type": "terminal/data", "data": "$ npm test\r\nAll tests passed\r\n"},
        {"type": "terminal/claimed", "claim": {"kind": "session", "session": SESSION}},
        {"type": "terminal/exited", "exitCode": 0},
    )
    assert wire(result) == {
        "title": "bash",
        "cwd": "file:///home/user",
        "cols": 80,
        "rows": 24,
        "content": [text("$ npm test\r\nAll tests passed\r\n")],
        "claim": {"kind": "session", "session": SESSION},
        "exitCode": 0,
    }


def test_terminal_command_detection_flow() -> None:
    result = reduce_term(
        terminal(),
        {"type": "terminal/data", "data": "$ "},
        {
            "type": "terminal/commandExecuted",
            "commandId": "k1",
            "commandLine": "ls",
            "timestamp": 7,
        },
        {"type": "terminal/data", "data": "a.txt\r\n"},
        {"type": "terminal/commandFinished", "commandId": "k1", "exitCode": 0, "durationMs": 12},
        {"type": "terminal/data", "data": "$ "},
    )
    assert wire(result)["content"] == [
        text("$ "),
        {
            "type": "command",
            "commandId": "k1",
            "commandLine": "ls",
            "output": "a.txt\r\n",
            "timestamp": 7,
            "isComplete": True,
            "exitCode": 0,
            "durationMs": 12,
        },
        text("$ "),
    ]
    assert wire(result)["supportsCommandDetection"] is True


# -- annotations -----------------------------------------------------------------------------

RANGE = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}}
OTHER_RANGE = {"start": {"line": 3, "character": 2}, "end": {"line": 3, "character": 9}}


def entry_json(entry_id: str, body: Any = "text") -> dict[str, Any]:
    return {"id": entry_id, "text": body}


def annotation_json(annotation_id: str, *entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": annotation_id,
        "turnId": "turn-1",
        "resource": A,
        "resolved": False,
        "entries": list(entries) or [entry_json("c-1")],
        **extra,
    }


def annotations(*items: dict[str, Any]) -> AnnotationsState:
    return codec.convert({"annotations": list(items)}, AnnotationsState)


def reduce_ann(state: AnnotationsState, *payloads: dict[str, Any]) -> Any:
    return fold(reduce_annotations, state, *payloads)


class TestAnnotationsSet:
    def test_appends_a_new_annotation(self) -> None:
        first = annotation_json("t-1", range=RANGE)
        second = annotation_json("t-2", entry_json("c-2", {"markdown": "**b**"}), resource=B)
        result = reduce_ann(annotations(first), {"type": "annotations/set", "annotation": second})
        assert wire(result) == {"annotations": [first, second]}

    def test_replaces_an_existing_annotation_whole(self) -> None:
        # Case 211 reshaped: the range is dropped, it is resolved, entries rewritten.
        old = annotation_json("t-1", entry_json("c-1", "original"), range=RANGE, _meta={"a": 1})
        other = annotation_json("t-0")
        new = annotation_json(
            "t-1", entry_json("c-1", "rewritten"), entry_json("c-2", "reply"), resolved=True
        )
        result = reduce_ann(annotations(other, old), {"type": "annotations/set", "annotation": new})
        assert wire(result) == {"annotations": [other, new]}


class TestAnnotationsUpdated:
    def test_resolves_and_keeps_everything_else(self) -> None:
        item = annotation_json(
            "t-1", entry_json("c-1"), entry_json("c-2"), range=RANGE, _meta={"author": "alice"}
        )
        result = reduce_ann(
            annotations(item),
            {"type": "annotations/updated", "annotationId": "t-1", "resolved": True},
        )
        assert wire(result) == {"annotations": [{**item, "resolved": True}]}

    def test_false_reopens(self) -> None:
        item = annotation_json("t-1", resolved=True)
        result = reduce_ann(
            annotations(item),
            {"type": "annotations/updated", "annotationId": "t-1", "resolved": False},
        )
        assert wire(result)["annotations"][0]["resolved"] is False

    def test_reanchors_turn_resource_and_range(self) -> None:
        item = annotation_json("t-1", range=RANGE)
        result = reduce_ann(
            annotations(item),
            {
                "type": "annotations/updated",
                "annotationId": "t-1",
                "turnId": "turn-2",
                "resource": B,
                "range": OTHER_RANGE,
            },
        )
        assert wire(result) == {
            "annotations": [{**item, "turnId": "turn-2", "resource": B, "range": OTHER_RANGE}]
        }

    def test_adds_a_range_to_a_whole_file_annotation(self) -> None:
        item = annotation_json("t-1")
        result = reduce_ann(
            annotations(item),
            {"type": "annotations/updated", "annotationId": "t-1", "range": OTHER_RANGE},
        )
        assert wire(result)["annotations"][0]["range"] == OTHER_RANGE

    def test_without_fields_changes_nothing(self) -> None:
        state = annotations(annotation_json("t-1", range=RANGE))
        result = reduce_ann(state, {"type": "annotations/updated", "annotationId": "t-1"})
        assert result == state

    def test_unknown_annotation_is_a_no_op(self) -> None:
        state = annotations(annotation_json("t-1"))
        payload = {"type": "annotations/updated", "annotationId": "t-2", "resolved": True}
        assert reduce_ann(state, payload) is state

    def test_updates_only_the_first_duplicate(self) -> None:
        state = annotations(annotation_json("t-1"), annotation_json("t-1"))
        result = reduce_ann(
            state, {"type": "annotations/updated", "annotationId": "t-1", "resolved": True}
        )
        assert [a["resolved"] for a in wire(result)["annotations"]] == [True, False]


class TestAnnotationsRemoved:
    def test_drops_the_matching_annotation(self) -> None:
        keep, drop = annotation_json("t-1"), annotation_json("t-2", resource=B)
        result = reduce_ann(
            annotations(keep, drop), {"type": "annotations/removed", "annotationId": "t-2"}
        )
        assert wire(result) == {"annotations": [keep]}

    def test_unknown_id_is_a_no_op(self) -> None:
        state = annotations(annotation_json("t-1"))
        assert reduce_ann(state, {"type": "annotations/removed", "annotationId": "x"}) is state

    def test_drops_only_the_first_duplicate(self) -> None:
        first, second = annotation_json("t-1"), annotation_json("t-1", resource=B)
        result = reduce_ann(
            annotations(first, second), {"type": "annotations/removed", "annotationId": "t-1"}
        )
        assert wire(result) == {"annotations": [second]}


class TestAnnotationsEntrySet:
    def test_appends_then_replaces(self) -> None:
        item = annotation_json("t-1", entry_json("c-1", "original"), range=RANGE)
        result = reduce_ann(
            annotations(item),
            {
                "type": "annotations/entrySet",
                "annotationId": "t-1",
                "entry": entry_json("c-2", "second"),
            },
            {
                "type": "annotations/entrySet",
                "annotationId": "t-1",
                "entry": entry_json("c-1", "edited"),
            },
        )
        assert wire(result) == {
            "annotations": [
                {**item, "entries": [entry_json("c-1", "edited"), entry_json("c-2", "second")]}
            ]
        }

    def test_replaces_the_entry_whole(self) -> None:
        old = {**entry_json("c-1"), "_meta": {"x": 1}}
        item = annotation_json("t-1", old)
        new = entry_json("c-1", {"markdown": "*new*"})
        result = reduce_ann(
            annotations(item), {"type": "annotations/entrySet", "annotationId": "t-1", "entry": new}
        )
        assert wire(result)["annotations"][0]["entries"] == [new]

    def test_unknown_annotation_is_a_no_op(self) -> None:
        state = annotations(annotation_json("t-1"))
        payload = {"type": "annotations/entrySet", "annotationId": "x", "entry": entry_json("c-x")}
        assert reduce_ann(state, payload) is state


class TestAnnotationsEntryRemoved:
    def test_drops_the_matching_entry(self) -> None:
        item = annotation_json("t-1", entry_json("c-1"), entry_json("c-2"), entry_json("c-3"))
        result = reduce_ann(
            annotations(item),
            {"type": "annotations/entryRemoved", "annotationId": "t-1", "entryId": "c-2"},
        )
        assert wire(result) == {
            "annotations": [{**item, "entries": [entry_json("c-1"), entry_json("c-3")]}]
        }

    @pytest.mark.parametrize(
        ("annotation_id", "entry_id"),
        [("t-1", "missing"), ("missing", "c-1")],
        ids=["unknown-entry", "unknown-annotation"],
    )
    def test_unknown_ids_are_a_no_op(self, annotation_id: str, entry_id: str) -> None:
        state = annotations(annotation_json("t-1", entry_json("c-1"), entry_json("c-2")))
        payload = {
            "type": "annotations/entryRemoved",
            "annotationId": annotation_id,
            "entryId": entry_id,
        }
        assert reduce_ann(state, payload) is state

    def test_removing_the_last_entry_leaves_an_empty_annotation(self) -> None:
        # The one-entry minimum is the producer's job; upstream's reducer does not collapse.
        item = annotation_json("t-1", entry_json("c-1"))
        result = reduce_ann(
            annotations(item),
            {"type": "annotations/entryRemoved", "annotationId": "t-1", "entryId": "c-1"},
        )
        assert wire(result) == {"annotations": [{**item, "entries": []}]}


# -- resource watch --------------------------------------------------------------------------


def resource_watch() -> ResourceWatchState:
    return codec.convert(
        {"root": "file:///work", "recursive": True, "excludes": {"items": ["node_modules"]}},
        ResourceWatchState,
    )


def test_resource_watch_changed_keeps_no_history() -> None:
    state = resource_watch()
    payload = {
        "type": "resourceWatch/changed",
        "changes": {
            "items": [
                {"uri": "file:///work/a", "type": "added"},
                {"uri": "file:///work/b", "type": "deleted"},
            ]
        },
    }
    assert fold(reduce_resource_watch, state, payload) is state


# -- every reducer ---------------------------------------------------------------------------

CHANNELS: list[tuple[str, Reducer, Callable[[], Any], Any]] = [
    ("changeset", reduce_changeset, lambda: changeset(files=[file_json(A)]), ChangesetAction),
    ("terminal", reduce_terminal, lambda: terminal(content=[text("$ ")]), TerminalAction),
    (
        "annotations",
        reduce_annotations,
        lambda: annotations(annotation_json("t-1")),
        AnnotationsAction,
    ),
    ("resourceWatch", reduce_resource_watch, resource_watch, ResourceWatchAction),
]
CHANNEL_IDS = [name for name, *_ in CHANNELS]

UNKNOWN_ACTIONS: list[Any] = [
    action({"type": "changeset/futureThing", "x": 1}),
    action({"type": "terminal/futureThing"}),
    action({"type": "annotations/futureThing"}),
    action({"type": "resourceWatch/futureThing"}),
    ChatDraftChangedAction(),  # a known action of another channel
    action({"type": "session/titleChanged", "title": "t"}),
    None,
    "changeset/cleared",
    {"type": "changeset/cleared"},  # an undecoded payload is not an action
]


@pytest.mark.parametrize(("name", "reducer", "make", "union"), CHANNELS, ids=CHANNEL_IDS)
@pytest.mark.parametrize("unknown", UNKNOWN_ACTIONS, ids=repr)
def test_unknown_actions_return_the_same_object(
    name: str, reducer: Reducer, make: Callable[[], Any], union: Any, unknown: Any
) -> None:
    state = make()
    assert reducer(state, unknown, clock) is state
    del name, union


@pytest.mark.parametrize(("name", "reducer", "make", "union"), CHANNELS, ids=CHANNEL_IDS)
def test_no_reducer_reads_the_clock(
    name: str, reducer: Reducer, make: Callable[[], Any], union: Any
) -> None:
    def exploding_clock() -> float:
        raise AssertionError("the reducer read the clock")

    state = make()
    for payload in [
        {"type": "changeset/statusChanged", "status": "ready"},
        {"type": "terminal/data", "data": "x"},
        {"type": "annotations/set", "annotation": annotation_json("t-9")},
        {"type": "resourceWatch/changed", "changes": {"items": []}},
    ]:
        state = reducer(state, action(payload), exploding_clock)
    del name, union


PROFILE = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("name", "reducer", "make", "union"), CHANNELS, ids=CHANNEL_IDS)
@PROFILE
@given(data=st.data())
def test_random_sequences_never_raise_or_mutate(
    name: str, reducer: Reducer, make: Callable[[], Any], union: Any, data: st.DataObject
) -> None:
    state_type = type(make())
    state = data.draw(strategy_for(state_type))
    actions = data.draw(st.lists(strategy_for(union), max_size=12))
    snapshot = codec.encode(state)
    result = state
    for item in actions:
        before = codec.encode(result)
        after = reducer(result, item, clock)
        assert codec.encode(result) == before, f"{item!r} mutated its input"
        assert roundtrip(after, state_type) == after  # still valid on the wire
        if isinstance(item, UnknownVariant):
            assert after is result
        result = after
    assert codec.encode(state) == snapshot
    del name


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        # What JavaScript's new Date(ms).toISOString() prints for each.
        (0, "1970-01-01T00:00:00.000Z"),
        (1733150000123.7, "2024-12-02T14:33:20.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-62135596800000, "0001-01-01T00:00:00.000Z"),
        (253402300799999, "9999-12-31T23:59:59.999Z"),
    ],
)
def test_iso_timestamp_prints_what_javascript_prints(ms: float, expected: str) -> None:
    from ahp_server.protocol.v0_7.reducers import iso_timestamp

    assert iso_timestamp(ms) == expected


@given(st.lists(st.floats(min_value=-62135596800000, max_value=253402300799999), max_size=20))
def test_iso_timestamp_is_the_same_whatever_came_before(stamps: list[float]) -> None:
    """The one-second memo never leaks one input's text into another's."""
    from datetime import UTC, datetime, timedelta

    from ahp_server.protocol.v0_7.reducers import iso_timestamp

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for ms in stamps + [s + 1 for s in stamps] + [s - 1000 for s in stamps]:
        if not -62135596800000 <= ms <= 253402300799999:
            continue
        at = epoch + timedelta(milliseconds=int(ms))
        assert iso_timestamp(ms) == at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
