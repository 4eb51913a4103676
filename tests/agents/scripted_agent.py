"""A scripted ACP agent, written with the official SDK's agent side, run as a real child process.

The tests start it through the host's ACP bridge (``[[agents]]`` with
``command = sys.executable``, ``args = [this file, …]``). What it does is
chosen by the prompt's last text block:

=====================  ==================================================================
``/tool``              a tool call (``execute``) with raw input, text content, completed
``/permission``        a tool call, then ``session/request_permission`` with the four ACP
                       options; answers which option the user chose (or ``cancelled``)
``/ask-run CMD``       like fast-agent: ``session/request_permission`` for ``execute`` with
                       ``rawInput.command`` = CMD under the placeholder id ``pending``;
                       allowed, a ``tool_call`` under its real id (same title, kind,
                       input), completed with ``ran: CMD``
``/ask-runs A | B…``   ``/ask-run`` for each command in turn, in one prompt (the placeholder id
                       ``pending`` again each time); a denied one is answered ``not allowed``
``/ask-write PATH T``  like fast-agent: an ``edit`` call showing a ``diff`` (no old text),
                       then ``session/request_permission`` for it; allowed, writes T to
                       PATH with ``fs/write_text_file`` and completes the call
``/plan``              a plan of three entries, then text
``/read PATH``         ``fs/read_text_file``; answers the content or the error
``/write PATH TEXT``   ``fs/write_text_file``; answers ``written`` or the error
``/writes PATH T1 T2``  two ``fs/write_text_file`` of the same file (T1, then T2)
``/diff PATH OLD NEW``  an ``edit`` tool call showing a ``diff`` (OLD ``-``: a new file),
                       completed; it writes nothing itself
``/diff-denied PATH``   an ``edit`` tool call showing a diff, then ``failed``
``/terminal CMD…``     ``terminal/create`` in the session's cwd, waits, shows its output
``/terminal-in DIR``   ``terminal/create`` with ``cwd = DIR`` (confinement test)
``/terminal-held``     ``/terminal pwd`` (after 0.5 s), but a permission request ("call-h") is sent
                       before the call completes and the terminal is released; it
                       writes ``terminal-released`` to the state directory, then waits
``/sleep``             ``terminal/create sleep 600`` then waits for it (cancel kills it)
``/background CMD…``   ``terminal/create`` CMD, shown in a tool call; the turn ends at once
                       and leaves it running (never released)
``/hang``              never answers, ignores ``session/cancel``
``/slow N``            N chunks, 50 ms apart; stops early on ``session/cancel``
``/daemon``            runs ``tests/daemonize.sh`` itself (a daemon that leaves its session
                       and double-forks, pids in the state directory); answers ``daemon``
``/crash``             a chunk, then the process exits with code 3
``/crash-once``        ``/crash``, unless the prompt is a resumed one (a block before the
                       message says the agent was restarted): then it answers what that
                       block gave back as its answer so far
``/garbage``           writes a line that is not JSON to stdout
``/unknown``           an update of a kind ACP does not know, then text
``/extras``            commands, mode, and usage updates, then text
``/context``           answers how many prompt blocks it got and whether the first
                       holds the earlier conversation
``/cwd``               answers ``cwd=<session/new's cwd> process=<its own cwd>``
anything else          ``scripted: <text>`` in two chunks after a thought; usage
=====================  ==================================================================

Options: ``--load`` advertises ``loadSession`` and keeps sessions in the
directory ``$SCRIPTED_STATE`` (a restarted agent can load them; after a load
the next answer starts with ``loaded N``); ``--fail-start`` writes to stderr
and exits before ``initialize``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentCapabilities,
    AvailableCommand,
    AvailableCommandsUpdate,
    CurrentModeUpdate,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    Usage,
    UsageUpdate,
)

LOAD = "--load" in sys.argv
STATE = Path(os.environ.get("SCRIPTED_STATE", "/nonexistent"))


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, str] = {}
        self.history: dict[str, list[str]] = {}
        self.loaded: dict[str, int] = {}
        self.cancelled: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=LOAD),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"scripted-{uuid.uuid4()}"
        self.cwd[session_id] = cwd
        self.history[session_id] = []
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        path = STATE / f"{session_id}.json"
        if not LOAD or not path.exists():
            from acp import RequestError

            raise RequestError.invalid_params({"details": f"no session {session_id}"})
        messages: list[str] = json.loads(path.read_text())
        self.cwd[session_id] = cwd
        self.history[session_id] = messages
        self.loaded[session_id] = len(messages)
        for text in messages:  # ACP: the agent replays the conversation
            await self.conn.session_update(session_id, update_user_message_text(text))
            await self.conn.session_update(session_id, update_agent_message_text(f"re: {text}"))
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.add(session_id)

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = getattr(prompt[-1], "text", "")
        self.cancelled.discard(session_id)
        self.history[session_id].append(text)
        if LOAD:
            save(STATE / f"{session_id}.json", json.dumps(self.history[session_id]))
        if session_id in self.loaded:
            await self.say(session_id, f"loaded {self.loaded.pop(session_id)} ")
        word, _, rest = text.partition(" ")
        handler = getattr(self, "do_" + word.lstrip("/").replace("-", "_"), None)
        if word.startswith("/") and handler is not None:
            stop = await handler(session_id, rest, prompt)
        else:
            await self.conn.session_update(session_id, update_agent_thought_text("thinking"))
            await self.say(session_id, "scripted: ")
            await self.say(session_id, text)
            stop = "end_turn"
        return PromptResponse(
            stop_reason=stop or "end_turn",
            usage=Usage(total_tokens=12, input_tokens=5, output_tokens=7),
        )

    # -- behaviours ---------------------------------------------------------------------------

    async def do_tool(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        call = start_tool_call(
            "call-1", "List files", kind="execute", status="pending", raw_input={"cmd": "ls"}
        )
        await self.conn.session_update(session_id, call)
        await self.conn.session_update(
            session_id,
            update_tool_call(
                "call-1", status="in_progress", content=[tool_content(text_block("a.txt"))]
            ),
        )
        await self.conn.session_update(
            session_id,
            update_tool_call(
                "call-1", status="completed", content=[tool_content(text_block("a.txt\nb.txt"))]
            ),
        )
        await self.say(session_id, "listed")

    async def do_permission(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.conn.session_update(
            session_id, start_tool_call("call-p", "Delete a file", kind="delete", status="pending")
        )
        options = [
            PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
            PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always"),
            PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
            PermissionOption(option_id="reject-always", name="Never", kind="reject_always"),
        ]
        response = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call-p", title="Delete a file"),
            options=options,
        )
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None) or outcome.outcome
        save(STATE / "permission-outcome", str(chosen))
        allowed = str(chosen).startswith("allow")
        await self.conn.session_update(
            session_id, update_tool_call("call-p", status="completed" if allowed else "failed")
        )
        await self.say(session_id, f"permission: {chosen}")

    async def _ask(self, session_id: str, call: ToolCallUpdate) -> bool:
        options = [
            PermissionOption(option_id="allow_once", name="Allow Once", kind="allow_once"),
            PermissionOption(option_id="reject_once", name="Reject Once", kind="reject_once"),
        ]
        response = await self.conn.request_permission(
            session_id=session_id, tool_call=call, options=options
        )
        return getattr(response.outcome, "option_id", None) == "allow_once"

    async def do_ask_runs(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        for command in rest.split(" | "):
            await self.do_ask_run(session_id, command, prompt)

    async def do_ask_run(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        raw = {"command": rest}
        asked = ToolCallUpdate(
            tool_call_id="pending", title="execute", kind="execute", raw_input=raw
        )
        if not await self._ask(session_id, asked):
            await self.say(session_id, f"not allowed: {rest}. ")
            return
        call_id = uuid.uuid4().hex
        await self.conn.session_update(
            session_id,
            start_tool_call(call_id, "execute", kind="execute", status="pending", raw_input=raw),
        )
        await self.conn.session_update(
            session_id,
            update_tool_call(
                call_id, status="completed", content=[tool_content(text_block(f"ran: {rest}"))]
            ),
        )
        await self.say(session_id, f"done: {rest}. ")

    async def do_ask_write(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        path, _, content = rest.partition(" ")
        call_id = uuid.uuid4().hex
        raw = {"path": path, "content_length": len(content)}
        await self.conn.session_update(
            session_id,
            start_tool_call(
                call_id, "write_text_file", kind="edit", status="pending", raw_input=raw
            ),
        )
        await self.conn.session_update(
            session_id, update_tool_call(call_id, content=[tool_diff_content(path, content)])
        )
        asked = ToolCallUpdate(
            tool_call_id=call_id, title="write_text_file", kind="edit", raw_input=raw
        )
        if not await self._ask(session_id, asked):
            await self.conn.session_update(session_id, update_tool_call(call_id, status="failed"))
            await self.say(session_id, "not allowed")
            return
        await self.conn.write_text_file(session_id=session_id, path=path, content=content)
        await self.conn.session_update(session_id, update_tool_call(call_id, status="completed"))
        await self.say(session_id, "written")

    async def do_plan(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        entries = [
            plan_entry("Read the code", status="completed"),
            plan_entry("Change it", status="in_progress"),
            plan_entry("Test it"),
        ]
        await self.conn.session_update(session_id, update_plan(entries))
        await self.say(session_id, "planned")

    async def do_read(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        try:
            response = await self.conn.read_text_file(session_id=session_id, path=rest.strip())
            await self.say(session_id, f"content: {response.content}")
        except Exception as error:  # noqa: BLE001 - reported back as text
            await self.say(session_id, f"read error: {error}")

    async def do_write(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        path, _, content = rest.partition(" ")
        try:
            await self.conn.write_text_file(session_id=session_id, path=path, content=content)
            await self.say(session_id, "written")
        except Exception as error:  # noqa: BLE001 - reported back as text
            await self.say(session_id, f"write error: {error}")

    async def do_writes(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        path, first, second = rest.split(" ", 2)
        for content in (first, second):
            await self.conn.write_text_file(session_id=session_id, path=path, content=content)
        await self.say(session_id, "written twice")

    async def _diff(self, session_id: str, path: str, old: str | None, new: str, ok: bool) -> None:
        diff = tool_diff_content(path, new, old)
        await self.conn.session_update(
            session_id,
            start_tool_call(
                "call-d", "Edit a file", kind="edit", status="in_progress", content=[diff]
            ),
        )
        await self.conn.session_update(
            session_id, update_tool_call("call-d", status="completed" if ok else "failed")
        )
        await self.say(session_id, "edited" if ok else "edit failed")

    async def do_diff(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        path, old, new = rest.split(" ", 2)
        await self._diff(session_id, path, None if old == "-" else old, new, True)

    async def do_diff_denied(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self._diff(session_id, rest.strip(), "old", "new", False)

    async def _terminal(
        self, session_id: str, command: list[str], cwd: str | None, held: bool = False
    ) -> None:
        try:
            created = await self.conn.create_terminal(
                session_id=session_id, command=command[0], args=command[1:], cwd=cwd
            )
        except Exception as error:  # noqa: BLE001 - reported back as text
            await self.say(session_id, f"terminal error: {error}")
            return
        terminal = created.terminal_id
        await self.conn.session_update(
            session_id,
            start_tool_call(
                "call-t", "Run a command", kind="execute", content=[tool_terminal_ref(terminal)]
            ),
        )
        exit_status = await self.conn.wait_for_terminal_exit(
            session_id=session_id, terminal_id=terminal
        )
        output = await self.conn.terminal_output(session_id=session_id, terminal_id=terminal)
        hold: asyncio.Task[Any] | None = None
        if held:
            # A permission request the user answers late: the host applies nothing
            # sent after it until then, while it serves the release at once.
            hold = asyncio.create_task(
                self.conn.request_permission(
                    session_id=session_id,
                    tool_call=ToolCallUpdate(tool_call_id="call-h", title="Hold"),
                    options=[PermissionOption(option_id="ok", name="OK", kind="allow_once")],
                )
            )
            await asyncio.sleep(0.2)  # (it is sent before what follows)
        await self.conn.session_update(
            session_id,
            update_tool_call("call-t", status="completed", content=[tool_terminal_ref(terminal)]),
        )
        await self.conn.release_terminal(session_id=session_id, terminal_id=terminal)
        if hold is not None:
            save(STATE / "terminal-released", "yes")
            await hold
        await self.say(session_id, f"exit {exit_status.exit_code}: {output.output.strip()}")

    async def do_terminal(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self._terminal(session_id, rest.split(), None)

    async def do_terminal_held(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        # The call is shown before the command prints anything.
        await self._terminal(session_id, ["sh", "-c", "sleep 0.5; pwd"], None, held=True)

    async def do_terminal_in(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self._terminal(session_id, ["pwd"], rest.strip())

    async def do_background(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        command = rest.split()
        created = await self.conn.create_terminal(
            session_id=session_id, command=command[0], args=command[1:]
        )
        await self.conn.session_update(
            session_id,
            start_tool_call(
                "call-b",
                "Run in the background",
                kind="execute",
                content=[tool_terminal_ref(created.terminal_id)],
            ),
        )
        await self.say(session_id, "started in the background")

    async def do_sleep(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        created = await self.conn.create_terminal(
            session_id=session_id, command="sleep", args=["600"]
        )
        await self.conn.wait_for_terminal_exit(
            session_id=session_id, terminal_id=created.terminal_id
        )
        await self.say(session_id, "slept")

    async def do_hang(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.say(session_id, "hanging")
        await asyncio.Event().wait()

    async def do_slow(self, session_id: str, rest: str, prompt: list[Any]) -> str:
        for i in range(int(rest or "10")):
            if session_id in self.cancelled:
                return "cancelled"
            await self.say(session_id, f"{i} ")
            await asyncio.sleep(0.05)
        return "end_turn"

    async def do_daemon(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        script = Path(__file__).parent.parent / "daemonize.sh"
        starter = await asyncio.create_subprocess_exec("sh", str(script), str(STATE))
        await starter.wait()
        while not (STATE / "double.pid").exists():  # noqa: ASYNC110 - a file: nothing to await
            await asyncio.sleep(0.02)
        await self.say(session_id, "daemon")

    async def do_crash(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.say(session_id, "about to crash")
        await asyncio.sleep(0.1)
        print("scripted agent: crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    async def do_crash_once(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        notes = [getattr(block, "text", "") for block in prompt[:-1]]
        resumed = [n for n in notes if "restarted" in n]
        if not resumed:
            await self.do_crash(session_id, rest, prompt)
            return
        so_far = resumed[0].partition("Your answer so far was:")[2].split("\n\n")[1:2]
        await self.say(session_id, f"resumed; so far: {so_far[0] if so_far else ''!r}")

    async def do_garbage(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.say(session_id, "garbage follows")
        await asyncio.sleep(0.1)
        os.write(1, b"this is not JSON-RPC\n")
        await asyncio.Event().wait()

    async def do_unknown(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        line = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session_id,
                "update": {"sessionUpdate": "brand_new_kind", "payload": 1},
            },
        }
        os.write(1, (json.dumps(line) + "\n").encode())
        await asyncio.sleep(0.05)
        await self.say(session_id, "after the unknown update")

    async def do_extras(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.conn.session_update(
            session_id,
            AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=[AvailableCommand(name="review", description="Review")],
            ),
        )
        await self.conn.session_update(
            session_id,
            CurrentModeUpdate(session_update="current_mode_update", current_mode_id="code"),
        )
        await self.conn.session_update(
            session_id, UsageUpdate(session_update="usage_update", used=100, size=1000)
        )
        await self.say(session_id, "extras sent")

    async def do_context(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        first = getattr(prompt[0], "text", "")
        earlier = "conversation" in first and len(prompt) > 1
        await self.say(session_id, f"blocks={len(prompt)} earlier={earlier}")

    async def do_cwd(self, session_id: str, rest: str, prompt: list[Any]) -> None:
        await self.say(session_id, f"cwd={self.cwd[session_id]} process={os.getcwd()}")


def save(path: Path, text: str) -> None:
    """Leave a note for the test (only where it gave the agent a state directory)."""
    if path.parent.is_dir():
        path.write_text(text)


async def main() -> None:
    print("scripted agent starting", file=sys.stderr, flush=True)
    if "--fail-start" in sys.argv:
        print("boom: no API key in SCRIPTED_KEY", file=sys.stderr, flush=True)
        raise SystemExit(2)
    await run_agent(ScriptedAgent())


if __name__ == "__main__":
    asyncio.run(main())
