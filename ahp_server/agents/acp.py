"""The ACP bridge: any Agent Client Protocol agent (Claude Code, Gemini CLI, Codex…) as a provider.

Layer: agents (it uses ``workspace`` for path confinement and terminals, the
``protocol`` types, and the official ACP Python SDK, ``acp``, for the
JSON-RPC over stdio; the host drives it through ``agents/base.py`` only).

The host is the ACP *client*: it starts the agent as a child process (one
per AHP session by default, or one per chat), ``initialize``\\ s it, opens one
ACP session per AHP chat (``session/new`` with the chat's primary working
directory as ``cwd``, or ``session/load`` of the chat's earlier ACP session
after a host restart when the agent can), and runs each turn as one
``session/prompt``. What the agent streams back (``session/update``) becomes
chat actions through :class:`~ahp_server.agents.base.TurnIO`; the mapping is
the table in docs/agents.md. The agent may ask the host for permission
(``session/request_permission`` → a tool confirmation with the agent's
options and what will run: the command, the input, the file edits — docs/agents.md,
"What a confirmation shows"), for files (``fs/*``, confined to the chat's working
directories and opened race-free by ``workspace/files.py``, as the ``resource*``
commands are)
and for commands (``terminal/*``, run by ``workspace/terminals.py``).

Ordering: the SDK runs every incoming notification in a task of its own. The
handlers here never await before they queue an update, so the queue keeps the
agent's order; one consumer per turn applies it.

Faults, each a ``chat/error`` the user can read, never a stuck turn or host:
the agent cannot start (its working directory is gone, or the command and the
tail of its stderr), exits mid-turn (the next turn starts it again), writes
something that is not JSON-RPC (its process is stopped), or does not finish
(cancel still ends the turn at once; ``turn_timeout`` ends it on its own). Its
stderr goes to the log, a line at a time, bounded.

An exit mid-turn is *resumable* (``AgentError.resumable``): resumed
(``chat/turnResume``), the turn starts the agent again, takes its ACP
session back (``session/load`` when the agent can, else a new session told
the conversation) and prompts it with the same message, preceded by the
answer it had given so far and a request to go on (:func:`_prompt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import os
import re
import shlex
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
from acp import PROTOCOL_VERSION, RequestError
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentCapabilities as AcpAgentCapabilities,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    BlobResourceContents,
    ClientCapabilities,
    ConfigOptionUpdate,
    ContentToolCallContent,
    CreateElicitationResponse,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeniedOutcome,
    ElicitationMode,
    EmbeddedResourceContentBlock,
    EnvVariable,
    FileEditToolCallContent,
    FileSystemCapabilities,
    ImageContentBlock,
    Implementation,
    KillTerminalResponse,
    PermissionOption,
    PromptResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    ResourceContentBlock,
    SessionInfoUpdate,
    TerminalExitStatus,
    TerminalOutputResponse,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from msgspec import UNSET, UnsetType

from ahp_server import __version__
from ahp_server.agents.base import (
    AgentError,
    FileChange,
    SessionContext,
    ToolCall,
    TurnIO,
    TurnRequest,
)
from ahp_server.config import AgentConfig
from ahp_server.protocol.edits import file_edit
from ahp_server.protocol.errors import ProtocolError
from ahp_server.protocol.types import (
    AgentCapabilities,
    AgentInfo,
    ConfirmationOption,
    FileEdit,
    MarkdownResponsePart,
    MarkdownString,
    MessageEmbeddedResourceAttachment,
    MessageResourceAttachment,
    MultipleWorkingDirectoriesCapability,
    StringOrMarkdown,
    ToolCallResult,
    ToolResultContent,
    ToolResultTextContent,
    Turn,
    UsageInfo,
)
from ahp_server.workspace.files import Files, Limits
from ahp_server.workspace.paths import (
    PathRefused,
    confine,
    confine_directory,
    file_uri,
    file_uri_to_path,
    root_paths,
)
from ahp_server.workspace.reaper import Tree
from ahp_server.workspace.terminals import INHERITED_ENV, Terminal, TerminalLimit, Terminals

__all__ = ["AcpProvider"]

log = structlog.get_logger(__name__)

#: Grace between SIGTERM and SIGKILL when an agent process is stopped.
STOP_GRACE = 3.0
#: stderr lines kept for error messages, and logged per process before the rest is dropped.
STDERR_TAIL_LINES = 20
STDERR_LOGGED_LINES = 2000
STDERR_LINE_CHARS = 500
#: Largest JSON-RPC line accepted from an agent (a diff of a big file fits).
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Updates a turn may hold unapplied; beyond, the agent outruns the host by far.
MAX_PENDING_UPDATES = 100_000
#: Largest file an agent may read or write through the host.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: The agents' file caps, in ``workspace/files.py``'s terms (fixed: no setting names them).
FILE_LIMITS = Limits(
    max_read_bytes=MAX_FILE_BYTES, max_write_bytes=MAX_FILE_BYTES, read_setting=None
)
#: Text of a changed file handed to the host's changeset, each side (the host
#: keeps less: ``[workspace] changeset_content_bytes``); larger: listed without.
CHANGE_TEXT_BYTES = 1024 * 1024
#: Prior turns given to an agent that cannot ``session/load`` (newest kept).
HISTORY_TURNS = 20
HISTORY_CHARS = 32_000
#: How long a ``session/cancel`` may take to be written before it is given up.
CANCEL_SEND_TIMEOUT = 1.0
#: How long the next prompt waits for a cancelled one to end (ACP: "cancelled").
DRAIN_TIMEOUT = 5.0
#: Approved permission requests of a turn whose call the agent has not announced
#: yet, kept to be matched with it (:meth:`_Turn._adopt`); beyond, the oldest is closed.
MAX_UNANNOUNCED = 64


def _agent_state(session_id: str) -> str:
    return json.dumps({"acpSessionId": session_id})


def _saved_session_id(state: str | None) -> str | None:
    if not state:
        return None
    try:
        value = json.loads(state).get("acpSessionId")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


# -- one agent process -------------------------------------------------------------------------


@dataclass(slots=True)
class _Chat:
    """An AHP chat as an ACP session of a process."""

    chat: str
    session_id: str
    roots: tuple[str, ...]
    cwd: str
    #: Places refused inside the roots (the host's data, configuration, tokens).
    forbidden: tuple[str, ...] = ()
    terminals: Terminals = field(default_factory=Terminals)
    turn: _Turn | None = None
    #: A cancelled prompt still running in the agent (ACP: it must answer "cancelled").
    draining: asyncio.Future[PromptResponse] | None = None

    def files(self) -> Files:
        """The file operations of this chat's ``fs/*``: confined to its working directories,
        opened race-free as the ``resource*`` commands' are (docs/workspace.md)."""
        return Files(list(self.roots), FILE_LIMITS, self.forbidden)

    async def settle(self) -> None:
        """Wait (bounded) for a cancelled prompt to end before the next one starts."""
        draining, self.draining = self.draining, None
        if draining is None or draining.done():
            return
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT):
                await asyncio.shield(draining)
        except TimeoutError:
            log.warning("agent did not end a cancelled prompt", chat=self.chat)
            draining.cancel()
        except (ConnectionError, RequestError):
            pass  # it ended, one way or another


class AgentProcess:
    """One agent child process, its ACP connection, and the chats it serves."""

    def __init__(self, config: AgentConfig, label: str) -> None:
        self.config = config
        self.label = label  # the AHP session (or chat) this process serves, for the log
        self._process: asyncio.subprocess.Process | None = None
        #: The process and everything it starts (workspace/reaper.py): ended whole.
        self._tree: Tree | None = None
        self.conn: ClientSideConnection | None = None
        self.capabilities = AcpAgentCapabilities()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._tasks: list[asyncio.Task[None]] = []
        self._scratch: str | None = None
        self.failure: str | None = None
        self.chats: dict[str, _Chat] = {}  # by AHP chat uri
        self.by_session: dict[str, _Chat] = {}  # by ACP session id
        self.stopped = False
        #: Turns running now, and when the last one ended (for idle reaping).
        self.busy = 0
        self.last_used = time.monotonic()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        process = self._process
        return (
            not self.stopped
            and self.failure is None
            and process is not None
            and process.returncode is None
        )

    def _environment(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        env.update(dict(self.config.env))
        for name in self.config.pass_env:
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    async def start(self, cwd: str | None) -> None:
        """Spawn the process and ``initialize`` it; :class:`AgentError` if it cannot."""
        config = self.config
        if cwd is None:
            self._scratch = tempfile.mkdtemp(prefix="ahp-agent-")
        path = self._environment().get("PATH", os.defpath)
        if "/" not in config.command and shutil.which(config.command, path=path) is None:
            self._cleanup_scratch()
            raise AgentError(
                f"The agent {config.title!r} could not be started: {_command_line(config)}: "
                "no such program",
                error_type="agentStartFailed",
            )
        tree = Tree([config.command, *config.args])
        try:
            self._process = await asyncio.create_subprocess_exec(
                *tree.argv,
                cwd=cwd or self._scratch,
                env=self._environment(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: a stop reaches its children
                limit=MAX_LINE_BYTES,
            )
        except OSError as error:
            self._cleanup_scratch()
            why = _start_failure(error, config, cwd)
            raise AgentError(
                f"The agent {config.title!r} could not be started: {why}",
                error_type="agentStartFailed",
            ) from None
        process = self._process
        tree.started(process.pid)
        self._tree = tree
        assert process.stdin is not None
        assert process.stdout is not None
        log.info("agent process started", agent=config.name, pid=process.pid, serves=self.label)
        feed = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_stderr(), name=f"agent {config.name} stderr"),
            loop.create_task(self._read_stdout(feed), name=f"agent {config.name} stdout"),
        ]
        self.conn = ClientSideConnection(_BridgeClient(self), process.stdin, feed)
        try:
            response = await self.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=Implementation(name="ahp-server", version=__version__),
            )
        except (ConnectionError, RequestError) as error:
            detail = await self.reason(error)
            await self.stop()
            raise AgentError(
                f"The agent {config.title!r} failed to start ({_command_line(config)}): {detail}",
                error_type="agentStartFailed",
            ) from None
        self.capabilities = response.agent_capabilities or AcpAgentCapabilities()

    async def _read_stdout(self, feed: asyncio.StreamReader) -> None:
        """Forward JSON-RPC lines to the SDK; anything else is a protocol violation.

        A JSON-RPC message is a JSON object: a line that does not start with
        ``{`` and end with ``}`` (a stray ``print``, a warning, a crash dump) is
        refused here with a clear error. (The SDK parses what passes; it skips,
        and logs, an object that is still malformed — parsing twice per chunk
        would cost more than that rare case is worth.)
        """
        process = self._process
        assert process is not None
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                body = line.strip()
                if not body:
                    continue
                if body[:1] != b"{" or body[-1:] != b"}":
                    shown = body[:200].decode("utf-8", errors="replace")
                    self.failure = f"it wrote something that is not JSON-RPC: {shown!r}"
                    log.warning("agent wrote malformed output", agent=self.config.name, line=shown)
                    break
                feed.feed_data(line)
        except ValueError:  # a line over MAX_LINE_BYTES
            self.failure = f"it wrote a line over {MAX_LINE_BYTES} bytes"
            log.warning("agent wrote an oversize line", agent=self.config.name)
        except ConnectionError:
            pass
        feed.feed_eof()  # the SDK fails every request still waiting
        if self.failure is not None:
            self._signal(signal.SIGKILL)

    async def _read_stderr(self) -> None:
        process = self._process
        assert process is not None
        assert process.stderr is not None
        logged = 0
        with contextlib.suppress(ValueError, ConnectionError):
            while raw := await process.stderr.readline():
                line = raw.decode("utf-8", errors="replace").rstrip()[:STDERR_LINE_CHARS]
                if not line:
                    continue
                self._stderr.append(line)
                logged += 1
                if logged <= STDERR_LOGGED_LINES:
                    log.info("agent stderr", agent=self.config.name, serves=self.label, line=line)
                elif logged == STDERR_LOGGED_LINES + 1:
                    log.warning("agent stderr: further lines not logged", agent=self.config.name)

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr)

    async def reason(self, error: BaseException | None = None) -> str:
        """:meth:`why`, once the process (if it is ending) has been reaped: its exit code."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await process.wait()
        return self.why(error)

    def why(self, error: BaseException | None = None) -> str:
        """What went wrong with the process, for a message a user reads."""
        parts: list[str] = []
        if self.failure is not None:
            parts.append(self.failure)
        process = self._process
        if process is not None and process.returncode is not None:
            parts.append(f"it exited with code {process.returncode}")
        elif isinstance(error, RequestError):
            parts.append(f"it answered with error {error.code}: {error}")
        elif error is not None and not parts:
            parts.append(str(error) or type(error).__name__)
        tail = self.stderr_tail()
        if tail:
            parts.append(f"stderr: {tail}")
        return "; ".join(parts) or "unknown error"

    def _signal(self, signum: int) -> None:
        """Signal the process, its group and everything it started."""
        if self._tree is not None:
            self._tree.signal(signum)  # first: its reading must see the process alive
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)

    async def stop(self) -> None:
        """End the process: close stdin, SIGTERM its group and tree, SIGKILL after a grace
        (and whatever it left behind once it has ended); reap them all."""
        if self.stopped:
            return
        self.stopped = True
        for chat in list(self.chats.values()):
            if chat.turn is not None:
                chat.turn.abandon()
            await chat.terminals.close()
        process = self._process
        if self.conn is not None:
            with contextlib.suppress(Exception):  # the SDK's own shutdown; nothing to report
                await self.conn.close()
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    process.stdin.close()
            self._signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_GRACE):
                    await process.wait()
            except TimeoutError:
                self._signal(signal.SIGKILL)
                await process.wait()
            if self._tree is not None:
                await self._tree.ended()  # whatever it left behind, in its group or not
            log.info(
                "agent process stopped",
                agent=self.config.name,
                pid=process.pid,
                code=process.returncode,
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._cleanup_scratch()

    def _cleanup_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # -- ACP sessions (one per AHP chat) -----------------------------------------------------

    async def chat_session(self, request: TurnRequest, io: TurnIO) -> tuple[_Chat, bool]:
        """The ACP session of ``request.chat``: known, loaded, or new. True if new."""
        known = self.chats.get(request.chat)
        if known is not None:
            return known, False
        conn = self.conn
        assert conn is not None
        # Working directories are file: URIs (or absolute paths): ACP takes paths.
        roots = tuple(root_paths(request.working_directories))
        primary = root_paths([request.primary_working_directory or ""])
        cwd = primary[0] if primary else (roots[0] if roots else None)
        if cwd is None:
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="ahp-agent-")
            cwd = self._scratch
            roots = (cwd,)
        saved = _saved_session_id(request.agent_state)
        session_id: str | None = None
        if saved is not None and self.capabilities.load_session:
            try:
                await conn.load_session(cwd=cwd, session_id=saved, mcp_servers=[])
                session_id = saved
                log.info("agent session loaded", agent=self.config.name, chat=request.chat)
            except RequestError as error:
                log.info(
                    "agent could not load its session: starting a new one",
                    agent=self.config.name,
                    chat=request.chat,
                    error=str(error),
                )
        new = session_id is None
        if session_id is None:
            response = await conn.new_session(cwd=cwd, mcp_servers=[])
            session_id = response.session_id
            await io.save_agent_state(_agent_state(session_id))
        chat = _Chat(request.chat, session_id, roots, cwd, request.forbidden)
        self.chats[request.chat] = chat
        self.by_session[session_id] = chat
        return chat, new


def _start_failure(error: OSError, config: AgentConfig, cwd: str | None) -> str:
    """Why the agent's process could not be spawned: its working directory (the child
    could not enter it) or else its command.

    asyncio's own loop names the directory as the error's file; uvloop (libuv)
    names no file, so there the directory is looked at: one the child cannot
    enter is the reason.
    """
    if cwd is not None and (
        error.filename == cwd or (error.filename is None and not _enterable(cwd))
    ):
        if not os.path.exists(cwd):
            return f"its working directory {cwd} does not exist"
        if not os.path.isdir(cwd):
            return f"its working directory {cwd} is not a directory"
        return f"its working directory {cwd}: {error.strerror or error}"
    return f"{_command_line(config)}: {error.strerror or error}"


def _enterable(path: str) -> bool:
    """Whether a child process could make ``path`` its working directory."""
    return os.path.isdir(path) and os.access(path, os.X_OK)


def _text(raw: bytes | None) -> str | None:
    """``raw`` as text for a changeset (``None``: none, or not UTF-8)."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _refused(message: str, **data: Any) -> RequestError:
    """A JSON-RPC invalid-params error whose message says what was refused and why."""
    return RequestError(-32602, message, data or None)


def _command_line(config: AgentConfig) -> str:
    return " ".join([config.command, *config.args])


# -- what the host serves to the agent (the ACP Client side) ------------------------------------


class _BridgeClient:
    """The ``acp.Client`` of one agent process: updates, permissions, files, terminals."""

    def __init__(self, process: AgentProcess) -> None:
        self._process = process

    def _chat(self, session_id: str) -> _Chat:
        chat = self._process.by_session.get(session_id)
        if chat is None:
            raise _refused(f"unknown session {session_id!r}")
        return chat

    # Never await before queueing: the SDK runs notifications as tasks, in order.
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        chat = self._process.by_session.get(session_id)
        turn = chat.turn if chat is not None else None
        if turn is None:
            # A session/load replaying history, or a late update after a turn ended.
            return
        turn.push(update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        chat = self._process.by_session.get(session_id)
        turn = chat.turn if chat is not None else None
        if turn is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        answer = turn.push_permission(tool_call, options)
        try:
            option_id = await answer
        except asyncio.CancelledError:
            option_id = None
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option_id)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        chat = self._chat(session_id)
        try:
            raw = await asyncio.to_thread(chat.files().read_file, path)
        except ProtocolError as error:
            log.info(
                "agent file read refused", agent=self._process.config.name, reason=error.message
            )
            raise _refused(error.message, path=path) from None
        text = raw.decode("utf-8", "replace")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            end = len(lines) if limit is None else start + max(0, limit)
            text = "".join(lines[start:end])
        return ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        chat = self._chat(session_id)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise _refused(
                "the content is not valid Unicode (a lone surrogate)", path=path
            ) from None
        if len(data) > MAX_FILE_BYTES:
            raise _refused(f"the content is over {MAX_FILE_BYTES} bytes", path=path)
        try:
            # Atomic (a reader never sees half a file); the text before, for the changeset.
            replaced = await asyncio.to_thread(
                chat.files().replace_file, path, data, keep=CHANGE_TEXT_BYTES
            )
        except ProtocolError as error:
            log.info(
                "agent file write refused", agent=self._process.config.name, reason=error.message
            )
            raise _refused(error.message, path=path) from None
        log.info(
            "agent wrote a file",
            agent=self._process.config.name,
            chat=chat.chat,
            path=str(replaced.path),
            bytes=len(data),
        )
        turn = chat.turn
        if turn is not None:
            change = FileChange(
                str(replaced.path),
                before=_text(replaced.before),
                after=content if len(data) <= CHANGE_TEXT_BYTES else None,
                created=not replaced.existed,
            )
            try:
                await turn.io.file_changed(change)  # listed before the agent hears "written"
            except Exception:  # task boundary: host code; the file is written regardless
                log.exception("agent file change not listed", agent=self._process.config.name)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        chat = self._chat(session_id)
        try:
            directory = confine_directory(cwd or chat.cwd, chat.roots, chat.forbidden)
        except PathRefused as error:
            raise _refused(str(error), cwd=cwd) from None
        try:
            terminal = await chat.terminals.create(
                command,
                list(args or ()),
                cwd=str(directory),
                env={variable.name: variable.value for variable in env or ()},
                output_limit=output_byte_limit,
            )
        except TerminalLimit as error:
            raise _refused(str(error)) from None
        turn = chat.turn
        if turn is not None:
            # Users can watch it as an AHP terminal channel; showing it never fails the command.
            try:
                await turn.io.terminal_started(terminal)
            except Exception:  # task boundary: host code; the command runs on regardless
                log.exception("agent terminal could not be shown", agent=self._process.config.name)
        return CreateTerminalResponse(terminal_id=terminal.id)

    def _terminal(self, session_id: str, terminal_id: str) -> Terminal:
        terminal = self._chat(session_id).terminals.get(terminal_id)
        if terminal is None:
            raise _refused(f"unknown terminal {terminal_id!r}")
        return terminal

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal(session_id, terminal_id)
        status = terminal.exit_status()
        return TerminalOutputResponse(
            output=terminal.output(),
            truncated=terminal.truncated,
            exit_status=None
            if status is None
            else TerminalExitStatus(exit_code=status.exit_code, signal=status.signal),
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        status = await self._terminal(session_id, terminal_id).wait()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse | None:
        self._terminal(session_id, terminal_id).kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        self._terminal(session_id, terminal_id)
        await self._chat(session_id).terminals.release(terminal_id)
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        # AHP input requests could carry these; not bridged yet (docs/agents.md).
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("agent extension notification ignored", method=method)


# -- one turn ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Permission:
    tool_call: ToolCallUpdate
    options: list[PermissionOption]
    answer: asyncio.Future[str | None]


@dataclass(slots=True)
class _Unannounced:
    """An approved permission request for a call the agent had not announced."""

    tool: ToolCall
    title: str
    kind: str | None
    raw_input: Any


class _Turn:
    """One ``session/prompt``: the agent's updates in order, applied through ``TurnIO``."""

    def __init__(self, io: TurnIO, chat: _Chat, agent: str) -> None:
        self.io = io
        self._chat = chat
        self._agent = agent
        self._queue: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._ended = False
        self._tools: dict[str, ToolCall] = {}
        self._titles: dict[str, str] = {}
        self._plan: ToolCall | None = None
        #: The content each open call shows (a completion without content keeps it).
        self._shown: dict[str, tuple[ToolResultContent, ...]] = {}
        #: The diffs each open call showed, by path: (old text or None, new text).
        self._diffs: dict[str, dict[str, tuple[str | None, str]]] = {}
        self._permissions: list[asyncio.Future[str | None]] = []
        #: The raw input each open call was announced with (a permission request may omit it).
        self._inputs: dict[str, Any] = {}
        #: Approved permission requests whose tool call id the agent never announced
        #: (fast-agent asks with the placeholder id ``pending``, then announces the
        #: call under its real id), by that id: see :meth:`_adopt`.
        self._unannounced: dict[str, _Unannounced] = {}
        #: A terminal's output as of the latest update that showed it, taken when
        #: the update arrived: the agent may release the terminal right after
        #: sending it, before the update is applied (its request runs at once).
        self._terminal_texts: dict[str, str] = {}
        self.overflow = False

    # -- producers (SDK tasks; synchronous) -----------------------------------------------

    def push(self, update: Any) -> None:
        if self._ended:
            return
        if len(self._queue) >= MAX_PENDING_UPDATES:
            self.overflow = True
            self._wake.set()
            return
        for item in getattr(update, "content", None) or ():
            if isinstance(item, TerminalToolCallContent):
                terminal = self._chat.terminals.get(item.terminal_id)
                if terminal is not None:
                    self._terminal_texts[item.terminal_id] = terminal.output()
        self._queue.append(update)
        self._wake.set()

    def push_permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> asyncio.Future[str | None]:
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        if self._ended:
            answer.set_result(None)
            return answer
        self._permissions.append(answer)
        self._queue.append(_Permission(tool_call, options, answer))
        self._wake.set()
        return answer

    def end(self) -> None:
        """No more updates will come (the prompt returned): drain and stop."""
        self._ended = True
        self._wake.set()

    def abandon(self) -> None:
        """The turn is over without draining (cancelled, agent stopped)."""
        self._ended = True
        self._queue.clear()
        for answer in self._permissions:
            if not answer.done():
                answer.set_result(None)  # ACP: a cancelled turn answers "cancelled"
        self._wake.set()

    # -- the consumer (the turn's task) -------------------------------------------------------

    async def consume(self) -> None:
        while True:
            while self._queue:
                if self.overflow:
                    raise AgentError(
                        f"The agent sent more than {MAX_PENDING_UPDATES} updates faster "
                        "than they could be delivered.",
                        error_type="agentOverflow",
                    )
                item = self._queue.popleft()
                if isinstance(item, _Permission):
                    await self._permission(item)
                else:
                    await self._apply(item)
            if self._ended:
                return
            self._wake.clear()
            await self._wake.wait()

    async def finish(self) -> None:
        """The turn is complete: close what is still open (the plan, unmatched permissions)."""
        for key in list(self._unannounced):
            await self._close_unannounced(key)
        if self._plan is not None:
            shown = self._shown.pop("plan", ())
            await self._plan.complete(
                ToolCallResult(success=True, past_tense_message="Planned", content=shown or UNSET)
            )

    async def _apply(self, update: Any) -> None:
        io = self.io
        match update:
            case AgentMessageChunk(content=content):
                text = _block_text(content)
                if text:
                    await io.text(text)
            case AgentThoughtChunk(content=content):
                text = _block_text(content)
                if text:
                    await io.reasoning(text)
            case ToolCallStart():
                await self._tool_start(update)
            case ToolCallProgress():
                await self._tool_progress(update)
            case AgentPlanUpdate(entries=entries):
                await self._show_plan(entries)
            case UsageUpdate(used=used, size=size):
                await io.usage(UsageInfo(meta={"contextWindow": {"used": used, "size": size}}))
            case UserMessageChunk():
                pass  # the user's own message, echoed back
            case (
                AvailableCommandsUpdate()
                | CurrentModeUpdate()
                | ConfigOptionUpdate()
                | SessionInfoUpdate()
            ):
                # AHP 0.7 has no place for an agent's slash commands, modes or
                # config options in a chat (docs/agents.md): noted, not shown.
                log.debug("agent update without an AHP place", kind=type(update).__name__)
            case _:
                kind = getattr(update, "session_update", type(update).__name__)
                log.info("unknown agent update skipped", agent=self._agent, kind=kind)

    async def _tool_start(self, update: ToolCallStart) -> None:
        if update.tool_call_id in self._tools:  # ACP allows re-sending a call: an update
            await self._tool_progress(update)
            return
        title = update.title or "Tool"
        raw = update.raw_input
        if self._adopt(update):
            await self._tool_progress(update)
            return
        tool = await self.io.start_tool_call(
            tool_name=str(update.kind or "other"),
            display_name=title,
            invocation_message=_invocation(title, update.locations),
            tool_input=None if raw is None else json.dumps(raw, default=str),
        )
        self._tools[update.tool_call_id] = tool
        self._titles[update.tool_call_id] = title
        if raw is not None:
            self._inputs[update.tool_call_id] = raw
        await self._tool_progress(update)

    def _adopt(self, update: ToolCallStart) -> bool:
        """Whether ``update`` announces a call already approved under another id.

        Some agents ask permission before they announce the call, under a
        placeholder id (fast-agent: ``pending``), then announce it under its
        real id once allowed. The announced call with the same title, kind and
        input is the one the user approved: it takes the permission's tool
        call over, so the chat shows one call, not an approved one left open
        (which the turn's end would mark cancelled) beside the real one.
        """
        for key, asked in self._unannounced.items():
            if (
                (update.title or asked.title) == asked.title
                and (update.kind or asked.kind) == asked.kind
                and (asked.raw_input is None or update.raw_input == asked.raw_input)
            ):
                del self._unannounced[key]
                self._tools.pop(key, None)
                self._titles.pop(key, None)
                self._tools[update.tool_call_id] = asked.tool
                self._titles[update.tool_call_id] = update.title or asked.title
                return True
        return False

    async def _close_unannounced(self, key: str) -> None:
        """An approved permission no call came for: it is over, allowed (not cancelled)."""
        asked = self._unannounced.pop(key)
        if self._tools.get(key) is asked.tool:
            del self._tools[key]
        await asked.tool.complete(
            ToolCallResult(success=True, past_tense_message=f"Allowed: {asked.title}")
        )

    async def _tool(self, update: ToolCallUpdate | ToolCallStart | ToolCallProgress) -> ToolCall:
        tool = self._tools.get(update.tool_call_id)
        if tool is None:  # an update (or a permission) for a call never announced
            title = update.title or "Tool"
            tool = await self.io.start_tool_call(
                tool_name=str(update.kind or "other"),
                display_name=title,
                invocation_message=_invocation(title, update.locations),
            )
            self._tools[update.tool_call_id] = tool
            self._titles[update.tool_call_id] = title
        return tool

    async def _tool_progress(self, update: ToolCallStart | ToolCallProgress) -> None:
        tool = await self._tool(update)
        if update.title:
            self._titles[update.tool_call_id] = update.title
        content = self._content(update.content)
        for item in update.content or ():
            if isinstance(item, FileEditToolCallContent):
                diffs = self._diffs.setdefault(update.tool_call_id, {})
                diffs[item.path] = (item.old_text, item.new_text)
        if update.status in ("completed", "failed"):
            title = self._titles.get(update.tool_call_id, "Tool")
            self._tools.pop(update.tool_call_id, None)
            self._inputs.pop(update.tool_call_id, None)
            content = content or self._shown.pop(update.tool_call_id, ())
            diffs = self._diffs.pop(update.tool_call_id, {})
            if update.status == "completed":
                await self._diffs_done(diffs)
            await tool.complete(
                ToolCallResult(
                    success=update.status == "completed",
                    past_tense_message=title,
                    content=content if content else UNSET,
                )
            )
        elif content:
            self._shown[update.tool_call_id] = content
            await tool.set_content(content)

    async def _diffs_done(self, diffs: dict[str, tuple[str | None, str]]) -> None:
        """A completed call's diffs are changes: list them in the turn's changeset.

        Only once the call completed: a diff shown while it waits for permission
        is a proposal, and a denied or failed call changed nothing.
        """
        for path, (old, new) in diffs.items():
            try:
                resolved = confine(path, self._chat.roots, self._chat.forbidden)
            except PathRefused as error:
                log.info("agent diff outside the working directories", reason=str(error))
                continue
            change = FileChange(str(resolved), before=old, after=new, created=old is None)
            await self.io.file_changed(change)

    def _content(self, items: Iterable[Any] | None) -> tuple[ToolResultContent, ...]:
        out: list[ToolResultContent] = []
        for item in items or ():
            match item:
                case ContentToolCallContent(content=block):
                    text = _block_text(block)
                    if text:
                        out.append(ToolResultTextContent(text=text))
                case FileEditToolCallContent(path=path, old_text=old, new_text=new):
                    out.append(ToolResultTextContent(text=_diff(path, old, new)))
                case TerminalToolCallContent(terminal_id=terminal_id):
                    terminal = self._chat.terminals.get(terminal_id)
                    output = (
                        terminal.output()
                        if terminal is not None
                        else self._terminal_texts.get(terminal_id)  # released meanwhile
                    )
                    if output is not None:
                        out.append(ToolResultTextContent(text=output))
                case _:
                    log.debug("tool content kind skipped", kind=type(item).__name__)
        return tuple(out)

    async def _show_plan(self, entries: list[Any]) -> None:
        if self._plan is None:
            self._plan = await self.io.start_tool_call(
                tool_name="plan", display_name="Plan", invocation_message="Plan"
            )
        marks = {"completed": "[x]", "in_progress": "[~]"}
        lines = [f"- {marks.get(str(e.status), '[ ]')} {e.content}" for e in entries]
        shown = (ToolResultTextContent(text="\n".join(lines)),)
        self._shown["plan"] = shown
        await self._plan.set_content(shown)
        current = next((e.content for e in entries if e.status == "in_progress"), None)
        await self.io.activity(current)

    async def _permission(self, item: _Permission) -> None:
        if item.answer.done():
            return
        call = item.tool_call
        key = call.tool_call_id
        if key in self._unannounced:  # the same placeholder id again: a new call
            await self._close_unannounced(key)
        announced = key in self._tools
        tool = await self._tool(call)
        options = tuple(
            ConfirmationOption(
                id=o.option_id,
                label=o.name,
                kind="approve" if str(o.kind).startswith("allow") else "deny",
                group=1 if str(o.kind).startswith("allow") else 2,
            )
            for o in item.options
        )
        title = call.title or self._titles.get(key, "Tool")
        raw = call.raw_input if call.raw_input is not None else self._inputs.get(key)
        edits = await self._edits(key, call.content)
        decision = await tool.request_confirmation(
            invocation_message=self._confirmation_message(call, title, raw, edits),
            confirmation_title=f"Allow {title}?",
            options=options or None,
            tool_input=None if raw is None else json.dumps(raw, default=str),
            edits=edits,
        )
        if not announced and decision.approved:
            if len(self._unannounced) >= MAX_UNANNOUNCED:
                await self._close_unannounced(next(iter(self._unannounced)))
            kind = None if call.kind is None else str(call.kind)
            self._unannounced[key] = _Unannounced(tool, title, kind, raw)
        elif not announced:
            # Denied, so over: the id (a placeholder, maybe) names no call any more,
            # and a later request under it is a new call.
            self._tools.pop(key, None)
            self._titles.pop(key, None)
        if item.answer.done():
            return
        chosen = decision.selected_option_id
        if chosen is None or chosen not in {o.option_id for o in item.options}:
            wanted = "allow" if decision.approved else "reject"
            chosen = next(
                (o.option_id for o in item.options if str(o.kind).startswith(wanted)), None
            )
        item.answer.set_result(chosen)

    async def _edits(self, key: str, content: Iterable[Any] | None) -> tuple[FileEdit, ...]:
        """The file edits a call asking permission will make: its diffs, shown before.

        From the permission request's ``diff`` content and the diffs the call
        showed before it asked (fast-agent sends them in a ``tool_call_update``).
        A diff whose old text is not given (a new file, or an agent that has
        not read the file yet) is shown against the file as it is now, when it
        is a small text file inside the working directories: what the user
        approves is what the write will do.
        """
        diffs = dict(self._diffs.get(key, {}))
        for item in content or ():
            if isinstance(item, FileEditToolCallContent):
                diffs[item.path] = (item.old_text, item.new_text)
        edits: list[FileEdit] = []
        for path, (old, new) in diffs.items():
            if not os.path.isabs(path):  # ACP paths are absolute: no file to name
                log.info("agent diff with a relative path not shown", agent=self._agent)
                continue
            if old is None:
                old = await asyncio.to_thread(self._current_text, path)
            edits.append(file_edit(file_uri(path), old, new))
        return tuple(edits)

    def _current_text(self, path: str) -> str | None:
        """The text of the file at ``path`` now, read as ``fs/read_text_file`` reads it
        (``None``: none there, refused, over :data:`CHANGE_TEXT_BYTES`, or not UTF-8)."""
        try:
            raw = self._chat.files().read_file(path)
        except ProtocolError:
            return None
        return _text(raw) if len(raw) <= CHANGE_TEXT_BYTES else None

    def _confirmation_message(
        self, call: ToolCallUpdate, title: str, raw: Any, edits: tuple[FileEdit, ...]
    ) -> StringOrMarkdown:
        """What a confirmation says will run: the title, then the command in a code block."""
        command = _command_of(raw)
        if command is None:
            for item in call.content or ():
                if isinstance(item, TerminalToolCallContent):
                    terminal = self._chat.terminals.get(item.terminal_id)
                    if terminal is not None and terminal.command:
                        command = terminal.command
        kind = call.kind or ""
        if command is None and kind == "execute" and title not in ("execute", "Tool"):
            command = title.strip("`")  # agents that title a shell call with its command
        locations = call.locations
        if not locations and edits:
            paths = [
                file_uri_to_path(e.after.uri) for e in edits if not isinstance(e.after, UnsetType)
            ]
            heading = f"{title} ({', '.join(paths)})" if paths else title
        else:
            heading = _invocation(title, locations)
        if command is None:
            return heading
        return MarkdownString(markdown=f"{heading}\n\n{_fenced(command)}")


def _command_of(raw: Any) -> str | None:
    """The command line in a tool call's raw input (``command`` or ``cmd``, then ``args``)."""
    if not isinstance(raw, dict):
        return None
    for key in ("command", "cmd"):
        value = raw.get(key)
        if isinstance(value, str) and value.strip():
            words = [value]
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            words = [shlex.join(value)]
        else:
            continue
        args = raw.get("args")
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            words += [shlex.join(args)] if args else []
        return " ".join(words)
    return None


def _fenced(text: str) -> str:
    """``text`` as a Markdown code block whose fence no run of backticks in it closes."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}sh\n{text}\n{fence}"


def _block_text(block: Any) -> str:
    """Markdown for an ACP content block (images and resources become links or notes)."""
    match block:
        case TextContentBlock(text=text):
            return str(text)
        case ResourceContentBlock(uri=uri, name=name):
            return f"[{name}]({uri})"
        case EmbeddedResourceContentBlock(resource=TextResourceContents(text=text)):
            return str(text)
        case EmbeddedResourceContentBlock(resource=BlobResourceContents(uri=uri)):
            return f"[{uri}]({uri})"
        case ImageContentBlock(mime_type=mime):
            return f"*[an image ({mime})]*"
        case _:
            return ""


def _invocation(title: str, locations: list[Any] | None) -> str:
    if not locations:
        return title
    where = ", ".join(
        f"{loc.path}:{loc.line}" if loc.line is not None else str(loc.path) for loc in locations
    )
    return f"{title} ({where})"


def _diff(path: str, old: str | None, new: str) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=path if old is not None else "/dev/null",
        tofile=path,
    )
    return "".join(lines) or f"{path}: unchanged"


def _prompt(request: TurnRequest, capabilities: AcpAgentCapabilities, history: bool) -> list[Any]:
    """The ACP prompt of a turn: the message, its attachments, and (new session) the history.

    A resumed turn (``request.resumed``) puts, before the message, what the
    agent had answered so far and a request to continue: ACP has no way to
    continue a prompt, and a loaded session may hold the interrupted prompt
    or not (whether an agent saves a prompt it never finished is its own
    business), so the message comes again — last, as in any prompt — with
    the note that it is the same one.
    """
    blocks: list[Any] = []
    if history and request.history:
        context = _history_text(request.history)
        if context:
            blocks.append(TextContentBlock(type="text", text=context))
    if request.resumed:
        blocks.append(TextContentBlock(type="text", text=_resume_text(request)))
    blocks.append(TextContentBlock(type="text", text=request.message.text))
    prompt_caps = capabilities.prompt_capabilities
    embedded = bool(prompt_caps and prompt_caps.embedded_context)
    images = bool(prompt_caps and prompt_caps.image)
    attachments = request.message.attachments
    for attachment in () if not isinstance(attachments, tuple) else attachments:
        match attachment:
            case MessageResourceAttachment(uri=uri, label=label):
                blocks.append(ResourceContentBlock(type="resource_link", uri=uri, name=label))
            case MessageEmbeddedResourceAttachment(data=data, content_type=mime, label=label):
                if mime.startswith("image/") and images:
                    blocks.append(ImageContentBlock(type="image", data=data, mime_type=mime))
                elif embedded:
                    blocks.append(
                        EmbeddedResourceContentBlock(
                            type="resource",
                            resource=BlobResourceContents(
                                blob=data, mime_type=mime, uri=f"attachment:{label}"
                            ),
                        )
                    )
                else:
                    blocks.append(
                        TextContentBlock(type="text", text=f"[attached: {label} ({mime})]")
                    )
            case _:
                label = getattr(attachment, "label", "attachment")
                blocks.append(TextContentBlock(type="text", text=f"[attached: {label}]"))
    return blocks


def _resume_text(request: TurnRequest) -> str:
    """What a resumed prompt says before the message (bounded like the history)."""
    answer = "".join(p.content for p in request.partial if isinstance(p, MarkdownResponsePart))
    if len(answer) > HISTORY_CHARS:
        answer = "…" + answer[-HISTORY_CHARS:]
    so_far = f"Your answer so far was:\n\n{answer}\n\n" if answer else ""
    return (
        "(Context: you stopped while answering the message below; you were "
        f"restarted. {so_far}Continue from where you stopped, without repeating "
        "what is done. The message follows.)"
    )


def _history_text(turns: tuple[Turn, ...]) -> str:
    """The conversation so far, for an agent that starts afresh (bounded, newest kept)."""
    lines: list[str] = []
    size = 0
    for turn in reversed(turns[-HISTORY_TURNS:]):
        answer = "".join(
            p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart)
        )
        entry = f"User: {turn.message.text}\nAssistant: {answer}\n"
        size += len(entry)
        if size > HISTORY_CHARS:
            break
        lines.append(entry)
    if not lines:
        return ""
    body = "\n".join(reversed(lines))
    return (
        "(Context: this conversation continues one you cannot see. "
        f"It went so far:)\n\n{body}\n(The user's new message follows.)"
    )


# -- the provider ---------------------------------------------------------------------------------


class AcpProvider:
    """An ACP agent from an ``[[agents]]`` entry (``kind = "acp"``)."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        #: Live processes: by AHP session (``process = "session"``) or by chat.
        self._processes: dict[str, AgentProcess] = {}
        #: Chats of each session that have their own process (``process = "chat"``).
        self._chat_processes: dict[str, set[str]] = {}
        #: Working directories of the sessions this provider holds.
        self._sessions: dict[str, SessionContext] = {}
        self._starting: dict[str, asyncio.Task[AgentProcess]] = {}
        #: Idle processes being stopped (kept so they are awaited, never lost).
        self._reaping: set[asyncio.Task[None]] = set()

    @property
    def info(self) -> AgentInfo:
        config = self.config
        return AgentInfo(
            provider=config.name,
            display_name=config.title,
            description=config.description or f"ACP agent: {config.command}",
            models=(),
            capabilities=AgentCapabilities(
                multiple_working_directories=MultipleWorkingDirectoriesCapability(
                    immutable_primary=False
                )
            ),
        )

    # -- session hooks ------------------------------------------------------------------------

    async def open_session(self, session: SessionContext) -> None:
        self._sessions[session.session] = session
        if self.config.process == "session":
            await self._process(session.session, session.working_directories)

    async def restore_session(self, session: SessionContext) -> None:
        await self.open_session(session)

    async def close_session(self, session: SessionContext, *, disposed: bool) -> None:
        if self._reaping:  # idle processes still stopping: done before the host goes
            await asyncio.gather(*self._reaping)
        self._sessions.pop(session.session, None)
        keys = [session.session, *self._chat_processes.pop(session.session, set())]
        for key in keys:
            process = self._processes.pop(key, None)
            if process is not None:
                await process.stop()

    # -- processes ----------------------------------------------------------------------------

    async def _process(self, key: str, directories: tuple[str, ...]) -> AgentProcess:
        """The live process for ``key``: started (again, if it died) on demand, once at a time."""
        process = self._processes.get(key)
        if process is not None and process.alive:
            return process
        if process is not None:
            self._processes.pop(key, None)
            await process.stop()  # reap what is left of a dead one
        starting = self._starting.get(key)
        if starting is None:
            starting = asyncio.get_running_loop().create_task(self._start(key, directories))
            self._starting[key] = starting
            starting.add_done_callback(lambda _: self._starting.pop(key, None))
        return await asyncio.shield(starting)

    async def _start(self, key: str, directories: tuple[str, ...]) -> AgentProcess:
        process = AgentProcess(self.config, key)
        paths = root_paths(directories)  # file: URIs or absolute paths: the process needs a path
        await process.start(paths[0] if paths else None)
        self._processes[key] = process
        self._arm(key, process)
        return process

    # -- idle processes -------------------------------------------------------------------------
    #
    # A process that has run no turn for ``idle_timeout`` seconds is stopped;
    # the next turn starts it again and takes its chats' ACP sessions back
    # (``session/load``, or a new session told the conversation), as after a crash.

    def _arm(self, key: str, process: AgentProcess) -> None:
        timeout = self.config.idle_timeout
        if timeout is not None:
            asyncio.get_running_loop().call_later(timeout, self._reap, key, process)

    def _reap(self, key: str, process: AgentProcess) -> None:
        timeout = self.config.idle_timeout
        if (
            timeout is None
            or self._processes.get(key) is not process
            or process.busy
            or time.monotonic() - process.last_used < timeout * 0.99
        ):
            return  # replaced, in use, or used since: a later timer decides
        del self._processes[key]
        log.info("idle agent process stopped", agent=self.config.name, serves=key)
        task = asyncio.get_running_loop().create_task(process.stop())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    # -- a turn -------------------------------------------------------------------------------

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        if self.config.process == "chat":
            self._chat_processes.setdefault(request.session, set()).add(request.chat)
            key = request.chat
        else:
            key = request.session
        process = await self._process(key, request.working_directories)
        process.busy += 1
        try:
            try:
                chat, new = await process.chat_session(request, io)
            except (ConnectionError, RequestError) as error:
                raise AgentError(
                    f"The agent {self.config.title!r} could not open a session for this chat: "
                    f"{await process.reason(error)}",
                    error_type="agentError",
                ) from None
            await self._prompt(process, chat, request, io, history=new)
        finally:
            process.busy -= 1
            process.last_used = time.monotonic()
            self._arm(key, process)

    async def _prompt(
        self,
        process: AgentProcess,
        chat: _Chat,
        request: TurnRequest,
        io: TurnIO,
        *,
        history: bool,
    ) -> None:
        conn = process.conn
        assert conn is not None
        await chat.settle()  # a cancelled prompt's late updates never reach this turn
        turn = _Turn(io, chat, self.config.name)
        chat.turn = turn
        consumer = asyncio.get_running_loop().create_task(turn.consume())
        blocks = _prompt(request, process.capabilities, history)
        prompt = asyncio.ensure_future(conn.prompt(session_id=chat.session_id, prompt=blocks))
        timeout = self.config.turn_timeout
        try:
            try:
                async with asyncio.timeout(timeout):
                    response = await _first(prompt, consumer)
            except TimeoutError:
                raise AgentError(
                    f"The agent did not finish the turn within {timeout:g} s.",
                    error_type="timeout",
                ) from None
            except ConnectionError as error:
                reason = await process.reason(error)
                raise AgentError(
                    f"The agent {self.config.title!r} stopped during the turn: "
                    f"{reason}. The next message starts it again.",
                    error_type="agentCrashed",
                    # It died (exited, was killed): a new process can take the
                    # session back and go on. One stopped for writing what is not
                    # JSON-RPC (``failure``) would likely do it again: not resumable.
                    resumable=process.failure is None,
                ) from None
            except RequestError as error:
                raise AgentError(
                    f"The agent {self.config.title!r} failed the turn: {error}",
                    error_type="agentError",
                ) from None
            turn.end()
            await consumer
            await self._report(io, response)
            await turn.finish()
            if response.stop_reason == "refusal":
                raise AgentError("The agent refused to answer.", error_type="refusal")
        finally:
            turn.abandon()
            chat.turn = None
            if not prompt.done():
                # Cancelled, timed out, or a delivery failed: tell the agent, stop its
                # commands, and let the prompt end in the background (ACP: it answers
                # "cancelled"); the chat's next prompt waits for that first.
                chat.draining = prompt
                prompt.add_done_callback(_consume_outcome)
                await self._cancel(process, chat)
            if not consumer.done():
                consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError, AgentError):
                await consumer

    @staticmethod
    async def _report(io: TurnIO, response: PromptResponse) -> None:
        if response.usage is not None:
            usage = response.usage
            await io.usage(
                UsageInfo(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=UNSET
                    if usage.cached_read_tokens is None
                    else usage.cached_read_tokens,
                )
            )
        stop = str(response.stop_reason)
        if stop in ("max_tokens", "max_turn_requests"):
            await io.text(f"\n\n*(The agent stopped: {stop.replace('_', ' ')}.)*")

    async def _cancel(self, process: AgentProcess, chat: _Chat) -> None:
        if chat.turn is not None:
            chat.turn.abandon()
        chat.terminals.kill_all()
        conn = process.conn
        if conn is None or not process.alive:
            return
        with contextlib.suppress(ConnectionError, TimeoutError, OSError, RuntimeError):
            async with asyncio.timeout(CANCEL_SEND_TIMEOUT):
                await asyncio.shield(conn.cancel(session_id=chat.session_id))


def _consume_outcome(future: asyncio.Future[Any]) -> None:
    """A drained prompt's outcome is of no interest (the turn already ended): retrieve it."""
    if not future.cancelled():
        future.exception()


async def _first(
    prompt: asyncio.Future[PromptResponse], consumer: asyncio.Task[None]
) -> PromptResponse:
    """The prompt's response; the consumer's error (a failed delivery) wins if it comes first.

    Leaves ``prompt`` running when it returns early: the caller decides its fate.
    """
    racing: set[asyncio.Future[Any]] = {prompt, consumer}
    done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    if prompt in done:
        return prompt.result()
    consumer.result()  # raises the consumer's error
    return await asyncio.shield(prompt)  # the consumer ends only after the turn
