"""Frame fuzzer for the real gateway, in process: ``python -m tests.fuzz.gateway_fuzz``.

Issue 16 item 3. A real :class:`~ahp_server.host.host.Host` and
:class:`~ahp_server.host.gateway.Gateway` (assembled as ``ahp_server/app.py``
does) are fed generated frames through ``gateway.handle_frame`` on a few
connections whose transport is an in-memory recorder (a stand-in for the
socket only; everything above it is the production code). The frames:

* valid requests and notifications for every method, params drawn from the
  Hypothesis strategies in ``tests/strategies.py`` (every protocol type), with
  channel fields pointed at channels that exist;
* the same with one value anywhere in the frame replaced by a wrong type
  (null, bool, number, huge number, string, list, object, deep nesting), a
  member deleted or an unknown one added;
* byte-level mutations (flips, truncation, insertions, duplication) of those;
* random JSON values, empty and binary frames, deep nesting.

After every frame the connection's outbox is drained and checked against an
independent reading of the frame (JSON-RPC 2.0 with ``json.loads``): a request
with a readable id gets exactly one response with that id; an unreadable
frame exactly one error with id null; a notification none. At the end every
loaded channel's state must survive a codec round trip and must equal the
state rebuilt from the store (a durable SQLite store in a temporary
directory) — checked for each session (and its chats) just before the
harness disposes it, every ``--replay-every`` frames and at the end: running
turns are ended as at a shutdown, the store flushed, and every loaded
session, chat and terminal is rebuilt by the host's own recovery code
(``Host.rebuild_session`` / ``rebuild_chat``, ``TerminalService.rebuild``:
the snapshot, then the stored log reduced with the same reducers). The RSS
measured after warm-up must not have grown beyond ``--rss-bound-mb``. Log
events at error level and above are counted by event; "request failed" is a
bug.

Prints its figures; exits non-zero when an invariant broke. The CI version is
``tests/fuzz/test_gateway_fuzz.py``; docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from hypothesis.errors import HypothesisWarning, NonInteractiveExampleWarning

from ahp_server.agents.echo import EchoAgent
from ahp_server.config import Settings
from ahp_server.host.channels.terminals import TerminalService
from ahp_server.host.core.fanout import Connection, ConnState
from ahp_server.host.gateway import Gateway
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.v0_7 import types
from ahp_server.protocol.versions import PROTOCOL_VERSION
from tests.strategies import strategy_for

#: Client → host requests and the params type each takes (WIRE-SUMMARY §7, §14).
REQUESTS: dict[str, type[Any]] = {
    "ping": types.PingParams,
    "initialize": types.InitializeParams,
    "reconnect": types.ReconnectParams,
    "subscribe": types.SubscribeParams,
    "createSession": types.CreateSessionParams,
    "disposeSession": types.DisposeSessionParams,
    "listSessions": types.ListSessionsParams,
    "createChat": types.CreateChatParams,
    "disposeChat": types.DisposeChatParams,
    "fetchTurns": types.FetchTurnsParams,
    "completions": types.CompletionsParams,
    "resolveSessionConfig": types.ResolveSessionConfigParams,
    "sessionConfigCompletions": types.SessionConfigCompletionsParams,
    "authenticate": types.AuthenticateParams,
    "createTerminal": types.CreateTerminalParams,
    "disposeTerminal": types.DisposeTerminalParams,
    "createResourceWatch": types.CreateResourceWatchParams,
    "invokeChangesetOperation": types.InvokeChangesetOperationParams,
    "resourceRead": types.ResourceReadParams,
    "resourceWrite": types.ResourceWriteParams,
    "resourceList": types.ResourceListParams,
    "resourceCopy": types.ResourceCopyParams,
    "resourceMove": types.ResourceMoveParams,
    "resourceDelete": types.ResourceDeleteParams,
    "resourceResolve": types.ResourceResolveParams,
    "resourceMkdir": types.ResourceMkdirParams,
    "resourceRequest": types.ResourceRequestParams,
}
NOTIFICATIONS: dict[str, type[Any]] = {
    "dispatchAction": types.DispatchActionParams,
    "unsubscribe": types.UnsubscribeParams,
}
_CHANNEL_KEYS = frozenset({"channel", "chat", "session", "uri", "source", "destination"})


class Recorder:
    """The in-memory transport: keeps every frame the host sends, decoded."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self.closed: tuple[int, str] | None = None

    async def send_text(self, frame: bytes) -> None:
        self.frames.append(json.loads(frame))

    async def send_texts(self, frames: list[bytes]) -> None:
        self.frames.extend(json.loads(frame) for frame in frames)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def abort(self) -> None:
        self.closed = (1006, "aborted")


@dataclass
class Figures:
    frames: int = 0
    requests: int = 0
    notifications: int = 0
    invalid: int = 0
    responses: int = 0
    errors_by_code: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    escaped: list[str] = field(default_factory=list)
    log_errors: Counter[str] = field(default_factory=Counter)
    log_warnings: Counter[str] = field(default_factory=Counter)
    reconnections: int = 0
    rss_warm_kb: int = 0
    rss_end_kb: int = 0
    seconds: float = 0.0
    channels_checked: int = 0
    #: Loaded channels whose live state was compared with a rebuild from the store.
    replays_checked: int = 0
    #: Envelopes those rebuilds reduced (the stored log after each snapshot).
    replayed_envelopes: int = 0
    #: Envelopes the host published in the run (its last ``serverSeq``).
    published: int = 0


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# -- the independent reading of a frame (JSON-RPC 2.0 §4, §5) ---------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _depth(value: Any) -> int:
    """Nesting depth of arrays/objects (iterative: frames may nest thousands deep)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
            deepest = max(deepest, level + 1)
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
            deepest = max(deepest, level + 1)
    return deepest


def _text_only(value: Any) -> None:
    """Raise UnicodeEncodeError for a lone surrogate anywhere in ``value``.

    A lone surrogate escape (``"\\ud800"``) is JSON syntax but no Unicode
    text: the host reads a frame holding one as invalid JSON (-32700, id null;
    docs/reliability.md).
    """
    json.dumps(value, ensure_ascii=False).encode()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Checked member by member: a duplicate key's earlier value is dropped by
    # dict(), but the host still reads (and refuses) it.
    for key, value in pairs:
        _text_only(key)
        _text_only(value)
    return dict(pairs)


def expected_reply(frame: str | bytes) -> tuple[str, Any]:
    """("request", id) → one response with id; ("error", id|None) → one error; ("none", None)."""
    if isinstance(frame, bytes):
        return "error", None
    try:
        message = json.loads(frame, parse_constant=_reject_constant, object_pairs_hook=_object)
    except (ValueError, RecursionError):
        # (UnicodeEncodeError is a ValueError: a lone surrogate, see _object)
        return "error", None
    if _depth(message) > 128:
        return "error", None
    try:
        _text_only(message)
    except UnicodeEncodeError:
        return "error", None
    if not isinstance(message, dict):
        return "error", None
    raw_id = message.get("id", ...)
    readable = raw_id if isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool) else None
    if message.get("jsonrpc") != "2.0":
        return "error", readable
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str) or not method:
            return "error", readable
        if "params" in message and not isinstance(message["params"], (dict, list)):
            return "error", readable
        if raw_id is ...:
            return "none", None
        if readable is None:
            return "error", None
        return "request", readable
    # No method: a response from the client. The host sends no requests; a
    # well-formed response is ignored, anything else is an invalid request.
    if "result" in message and "error" not in message and readable is not None:
        return "none", None
    if "error" in message and "result" not in message and raw_id is not ...:
        error = message["error"]
        if (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)
        ):
            return "none", None
    return "error", readable


# -- generation ----------------------------------------------------------------------------


def _examples(type_: Any, count: int) -> list[Any]:
    strategy = strategy_for(type_, depth=3)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        warnings.simplefilter("ignore", HypothesisWarning)
        for _ in range(count):
            out.append(json.loads(codec.encode(strategy.example())))
    return out


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


class Generator:
    """Frames of every kind from a seeded RNG and a corpus drawn once with Hypothesis."""

    def __init__(self, seed: int, corpus_size: int, workdir: str) -> None:
        self.rng = random.Random(seed)
        self.workdir = f"file://{workdir}"
        self.params = {m: _examples(t, corpus_size) for m, t in (REQUESTS | NOTIFICATIONS).items()}
        # Actions are the largest union: more of them.
        self.params["dispatchAction"] += _examples(types.DispatchActionParams, corpus_size * 4)
        self.next_id = 0
        self.channels: list[str] = ["ahp-root://"]

    def fresh_id(self) -> int | str:
        self.next_id += 1
        return self.next_id if self.rng.random() < 0.7 else f"r{self.next_id}"

    def random_json(self, depth: int = 3) -> Any:
        rng = self.rng
        kind = rng.randrange(9 if depth > 0 else 7)
        if kind == 0:
            return None
        if kind == 1:
            return rng.random() < 0.5
        if kind == 2:
            return rng.choice((0, -1, 1, 2**31, 2**63 - 1, -(2**63), 2**64, 10**30))
        if kind == 3:
            return rng.uniform(-1e300, 1e300)
        if kind == 4:
            return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(12)))
        if kind == 5:
            return rng.choice(
                ("", "ahp-root://", "ahp-session:/", "ahp-chat:/x", "file:///", "../..", "\u0000")
            )
        if kind == 6:
            return rng.choice(self.channels)
        if kind == 7:
            return [self.random_json(depth - 1) for _ in range(rng.randrange(4))]
        keys = ("id", "type", "channel", "params", "method", "x", "turnId", "partId")
        return {rng.choice(keys): self.random_json(depth - 1) for _ in range(rng.randrange(4))}

    def wrong_value(self) -> Any:
        rng = self.rng
        return rng.choice(
            (
                None,
                True,
                -1,
                2**64,
                1.5,
                "",
                "x" * rng.randrange(1, 2000),
                [],
                {},
                [1, "a", None],
                {"type": "future/unknown"},
                _deep(rng.choice((5, 127, 129, 400))),
                self.random_json(),
            )
        )

    def _confine(self, value: Any) -> Any:
        """Channel-ish fields at real channels; file URIs inside the scratch directory."""
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key in _CHANNEL_KEYS and isinstance(item, str) and self.rng.random() < 0.8:
                    item = self.rng.choice(self.channels)
                out[key] = self._confine(item)
            return out
        if isinstance(value, list):
            return [self._confine(item) for item in value]
        if isinstance(value, str) and value.startswith("file:"):
            return f"{self.workdir}/{value.rsplit('/', 1)[-1] or 'd'}"
        return value

    def valid(self, method: str | None = None) -> dict[str, Any]:
        rng = self.rng
        if method is None:
            method = rng.choice(
                ("dispatchAction",) * 6 + tuple(REQUESTS) + ("unsubscribe", "noSuchMethod")
            )
        params = self._confine(rng.choice(self.params.get(method) or [{}]))
        if method in ("createSession", "createChat"):
            # Required fields only: a fork, a working directory or an active
            # client drawn at random would refuse most creations, and the run
            # needs channels to check (the mutations still send the rest).
            params = {"provider": "echo"} if method == "createSession" else {}
            kind = "session" if method == "createSession" else "chat"
            params["channel" if kind == "session" else "chat"] = (
                f"ahp-{kind}:/fz{rng.randrange(100_000)}"
            )
            if kind == "chat":
                params["channel"] = rng.choice(self.channels)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if method not in NOTIFICATIONS:
            frame["id"] = self.fresh_id()
        return frame

    def mutate_structure(self, frame: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        frame = json.loads(json.dumps(frame))
        path = rng.choice(list(_paths(frame))[1:] or [("params",)])
        parent: Any = frame
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        action = rng.randrange(3)
        if action == 0 or isinstance(parent, list):
            parent[last] = self.wrong_value()
        elif action == 1:
            del parent[last]
        else:
            parent[rng.choice(("x", "type", "__proto__", "id", str(last) + "_"))] = (
                self.wrong_value()
            )
        return frame

    def mutate_bytes(self, text: str) -> str:
        rng = self.rng
        data = list(text)
        for _ in range(rng.randrange(1, 4)):
            if not data:
                break
            position = rng.randrange(len(data))
            op = rng.randrange(5)
            if op == 0:
                data[position] = chr(rng.randrange(0, 0x80))
            elif op == 1:
                del data[position:]
            elif op == 2:
                # (no lone surrogates: websockets only delivers valid UTF-8 text, §1)
                data.insert(position, rng.choice('{}[]",:\\0e-\u0000\u00e9\U0001f600 '))
            elif op == 3:
                del data[position]
            else:
                data[position:position] = data[position : position + rng.randrange(1, 20)]
        return "".join(data)

    def frame(self) -> tuple[str, str | bytes]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.30:
            return "valid", json.dumps(self.valid())
        if roll < 0.65:
            return "wrong-type", json.dumps(self.mutate_structure(self.valid()))
        if roll < 0.85:
            return "bytes", self.mutate_bytes(json.dumps(self.valid()))
        if roll < 0.95:
            return "random-json", json.dumps(self.random_json(4))
        special = rng.randrange(6)
        if special == 0:
            return "binary", json.dumps(self.valid()).encode()
        if special == 1:
            return "empty", rng.choice(("", " ", "\ufeff{}", "null", "[]"))
        if special == 2:
            levels = rng.choice((126, 129, 5000))
            nested = "[" * levels + "0" + "]" * levels
            return (
                "deep",
                f'{{"jsonrpc":"2.0","id":{self.fresh_id()!r},"method":"ping","params":{nested}}}'.replace(
                    "'", '"'
                ),
            )
        if special == 3:
            return "batch", json.dumps([self.valid(), self.valid()])
        if special == 4:
            frame = self.valid()
            frame["id"] = rng.choice((None, True, 1.5, [1], {"a": 1}, 2**70))
            return "bad-id", json.dumps(frame)
        return "no-version", json.dumps({"id": self.fresh_id(), "method": "ping"})


# -- the run -------------------------------------------------------------------------------


class LogCounter:
    """A structlog processor: counts warning+ events by name, prints nothing."""

    def __init__(self, figures: Figures, samples: dict[str, str]) -> None:
        self.figures = figures
        self.samples = samples

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> Any:
        name = str(event.get("event"))
        if method in ("error", "critical", "exception"):
            self.figures.log_errors[name] += 1
            if name not in self.samples:
                self.samples[name] = repr({k: v for k, v in event.items() if k != "event"})[:2000]
        elif method == "warning":
            self.figures.log_warnings[name] += 1
        raise structlog.DropEvent


async def _drain(connection: Connection) -> None:
    for _ in range(1000):
        if connection.queued_frames == 0:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"connection {connection.id} outbox did not drain")


async def run(
    frames: int,
    seed: int = 1,
    corpus: int = 40,
    rss_bound_mb: float = 64.0,
    *,
    progress: bool = False,
    snapshot_every: int = 1_000_000_000,
    replay_every: int = 0,
) -> Figures:
    figures = Figures()
    samples: dict[str, str] = {}
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        processors=[LogCounter(figures, samples)],
        cache_logger_on_first_use=False,
    )
    with tempfile.TemporaryDirectory(prefix="ahp-fuzz-") as workdir:
        settings = Settings(
            host="127.0.0.1",
            port=0,
            data_dir=str(Path(workdir) / "store"),  # durable: every log is replayed at the end
            # By default no periodic snapshots: a channel's log is then kept whole
            # from the snapshot it was created with, and the rebuild at the end
            # replays it from scratch (--snapshot-every exercises the snapshots).
            snapshot_every=snapshot_every,
            max_terminals=4,
            terminal_shell=("/bin/cat",),
            dispatch_rate=1e9,
            dispatch_burst=1_000_000_000,
        )
        host = Host(settings, providers=[EchoAgent()])
        await host.start()
        gateway = Gateway(host)
        generator = Generator(seed, corpus, workdir)
        connections: list[tuple[Connection, Recorder]] = []

        async def fresh(initialized: bool) -> tuple[Connection, Recorder]:
            recorder = Recorder()
            connection = gateway.open(recorder)
            if initialized:
                hello = {
                    "jsonrpc": "2.0",
                    "id": "hello",
                    "method": "initialize",
                    "params": {
                        "channel": "ahp-root://",
                        "protocolVersions": [PROTOCOL_VERSION],
                        "clientId": f"fuzz-{connection.id}",
                    },
                }
                await gateway.handle_frame(connection, json.dumps(hello))
                await _drain(connection)
                recorder.frames.clear()
            return connection, recorder

        for index in range(4):
            connections.append(await fresh(initialized=index > 0))
        started = time.monotonic()
        warm_at = max(1, frames // 10)
        try:
            for number in range(frames):
                if number == warm_at:
                    figures.rss_warm_kb = rss_kb()
                if progress and number and number % 100_000 == 0:
                    elapsed = time.monotonic() - started
                    print(
                        f"{number:,} frames, {elapsed:.0f}s, RSS {rss_kb() / 1024:.1f} MB,"
                        f" {len(figures.violations)} violations",
                        file=sys.stderr,
                        flush=True,
                    )
                if number % 500 == 0:
                    generator.channels = [
                        "ahp-root://",
                        *list(host.sessions)[-8:],
                        *list(host.chats)[-8:],
                        "ahp-session:/missing",
                        "ahp-chat:/missing",
                    ]
                    # Keep the host's population bounded, through the protocol.
                    connection, recorder = connections[1]
                    while len(host.sessions) > 24 and connection.state is ConnState.READY:
                        dispose = generator.valid("disposeSession")
                        dispose["params"] = {"channel": next(iter(host.sessions))}
                        # Its log is about to go: compare it with the live state first.
                        await _check_replays(host, figures, only=next(iter(host.sessions)))
                        await gateway.handle_frame(connection, json.dumps(dispose))
                        await _drain(connection)
                        recorder.frames.clear()
                slot = generator.rng.randrange(len(connections))
                connection, recorder = connections[slot]
                kind, frame = generator.frame()
                figures.kinds[kind] += 1
                await _check_one(gateway, connection, recorder, frame, figures)
                figures.frames += 1
                if connection.state is ConnState.CLOSING:
                    await gateway.close(connection)
                    connections[slot] = await fresh(initialized=slot > 0)
                    figures.reconnections += 1
                elif slot == 0 and connection.state is ConnState.READY:
                    # Slot 0 stays a connection that has not said initialize.
                    await gateway.close(connection)
                    connections[slot] = await fresh(initialized=False)
                if number % 64 == 0:
                    await asyncio.sleep(0)  # let agents and actors run
                if replay_every and number and number % replay_every == 0:
                    # Mid-run too: the channels loaded now are mostly disposed by the end.
                    await _check_replays(host, figures)
            figures.seconds = time.monotonic() - started
            figures.published = host.hub.server_seq
            # Let streaming turns settle, then check the states.
            await asyncio.sleep(0.2)
            figures.channels_checked = _check_states(host, figures)
            await _check_replays(host, figures)
            figures.rss_end_kb = rss_kb()
            if figures.rss_warm_kb and (
                figures.rss_end_kb - figures.rss_warm_kb > rss_bound_mb * 1024
            ):
                figures.violations.append(
                    f"RSS grew from {figures.rss_warm_kb} kB to {figures.rss_end_kb} kB"
                )
        finally:
            for connection, _ in connections:
                await gateway.close(connection)
            await host.stop(close_timeout=1.0)
    for name, sample in samples.items():
        figures.violations.append(f"log error {name!r}: {sample}")
    return figures


async def _check_one(
    gateway: Gateway,
    connection: Connection,
    recorder: Recorder,
    frame: str | bytes,
    figures: Figures,
) -> None:
    was_ready = connection.state is ConnState.READY
    try:
        await gateway.handle_frame(connection, frame)
    except Exception as error:  # noqa: BLE001 - the invariant under test: nothing escapes
        figures.escaped.append(f"{type(error).__name__}: {error} <- {str(frame)[:300]}")
        return
    if connection.state is ConnState.CLOSING:
        return  # closed by policy (e.g. -32005): its error was flushed before the close
    await _drain(connection)
    responses = [f for f in recorder.frames if "method" not in f]
    recorder.frames.clear()
    expect, request_id = expected_reply(frame)
    figures.responses += len(responses)
    for response in responses:
        if "error" in response:
            figures.errors_by_code[response["error"]["code"]] += 1
    if expect == "none":
        figures.notifications += 1
        if responses:
            figures.violations.append(f"a notification was answered: {str(frame)[:300]}")
        return
    if expect == "request":
        figures.requests += 1
    else:
        figures.invalid += 1
    if len(responses) != 1 or responses[0].get("id") != request_id:
        got = [r.get("id") for r in responses]
        figures.violations.append(
            f"expected one {expect} reply with id {request_id!r}, got ids {got}"
            f" (ready={was_ready}) <- {str(frame)[:300]}"
        )
    elif expect == "error" and "error" not in responses[0]:
        figures.violations.append(f"an invalid frame got a result: {str(frame)[:300]}")


def _check_states(host: Host, figures: Figures) -> int:
    actors: list[Any] = [host.root, *host.sessions.values(), *host.chats.values()]
    for actor in actors:
        state = actor.visible
        again = codec.decode(codec.encode(state), type(state))
        if again != state:
            figures.violations.append(f"{type(state).__name__} did not survive a round trip")
    return len(actors)


async def _settle(host: Host, sessions: list[Any]) -> None:
    """End the running turns of ``sessions`` (``chat/error``, as at a shutdown), let
    their actors and the workspace's catch up, and commit everything: their stored
    logs are then complete."""
    chats = [chat for session in sessions for chat in session.chats.values()]
    for chat in chats:
        if chat.runner is not None and not chat.closed:
            await chat.call(chat.interrupt)
    for _ in range(2):  # chats mirror into their sessions
        for actor in (*chats, *sessions, *host.workspace_channels.values()):
            if not actor.closed:
                await actor.call(_nothing)
        await host.store.flush()


async def _nothing() -> None:
    """A barrier inside an actor."""


async def _check_replays(host: Host, figures: Figures, only: str | None = None) -> None:
    """Every loaded channel's live state equals its state rebuilt from the store.

    ``only``: just that session and its chats (checked before it is disposed).
    """
    sessions = [s for uri, s in host.sessions.items() if only is None or uri == only]
    await _settle(host, sessions)
    terminals = next((s for s in host.services if isinstance(s, TerminalService)), None)
    for session in sessions:
        _compare(figures, session.uri, session.state, await host.rebuild_session(session.uri))
        for chat_uri, chat in list(session.chats.items()):
            _compare(figures, chat_uri, chat.state, await host.rebuild_chat(chat_uri, session))
    if terminals is not None and only is None:
        for uri, terminal in list(terminals.terminals.items()):
            _compare(
                figures, uri, terminal.state, await terminals.rebuild(uri, terminal.created_at)
            )


def _compare(figures: Figures, uri: str, live: Any, rebuilt: tuple[Any, Any] | None) -> None:
    figures.replays_checked += 1
    if rebuilt is None:
        figures.violations.append(f"{uri}: not in the store")
        return
    actor, loaded = rebuilt
    figures.replayed_envelopes += sum(
        1 for seq, _, _ in loaded.envelopes if seq > loaded.snapshot_seq
    )
    if actor.state != live:
        mine, theirs = json.loads(codec.encode(live)), json.loads(codec.encode(actor.state))
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        figures.violations.append(
            f"{uri}: live state differs from its replayed log in {keys}:"
            f" live {str({k: mine.get(k) for k in keys})[:300]}"
            f" replayed {str({k: theirs.get(k) for k in keys})[:300]}"
        )


def report(figures: Figures) -> str:
    rate = figures.frames / figures.seconds if figures.seconds else 0.0
    lines = [
        f"frames            {figures.frames:,} in {figures.seconds:.1f}s ({rate:,.0f}/s)",
        f"kinds             {dict(figures.kinds.most_common())}",
        f"requests          {figures.requests:,} (each answered once, by id)",
        f"invalid frames    {figures.invalid:,} (each answered by one error)",
        f"notifications     {figures.notifications:,} (never answered)",
        f"error codes       {dict(figures.errors_by_code.most_common())}",
        f"reconnections     {figures.reconnections} (connections closed by policy)",
        f"states checked    {figures.channels_checked} (codec round trip)",
        f"replays checked   {figures.replays_checked} (live state = rebuilt from the store,"
        f" {figures.replayed_envelopes:,} logged envelopes reduced;"
        f" {figures.published:,} published in the run)",
        f"RSS               {figures.rss_warm_kb / 1024:.1f} MB after warm-up,"
        f" {figures.rss_end_kb / 1024:.1f} MB at the end",
        f"log errors        {dict(figures.log_errors)}",
        f"log warnings      {dict(figures.log_warnings)}",
        f"escaped           {len(figures.escaped)}",
        f"violations        {len(figures.violations)}",
    ]
    lines += [f"  ESCAPED {line}" for line in figures.escaped[:20]]
    lines += [f"  VIOLATION {line}" for line in figures.violations[:40]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", type=int, default=40, help="valid examples per method")
    parser.add_argument("--rss-bound-mb", type=float, default=64.0)
    parser.add_argument(
        "--snapshot-every",
        type=int,
        default=1_000_000_000,
        help="storage.snapshot_every (default: never, so each log is replayed from scratch)",
    )
    parser.add_argument(
        "--replay-every",
        type=int,
        default=25_000,
        help="also compare live states with their replayed logs every N frames (0: at the end)",
    )
    args = parser.parse_args(argv)
    figures = asyncio.run(
        run(
            args.frames,
            args.seed,
            args.corpus,
            args.rss_bound_mb,
            progress=True,
            snapshot_every=args.snapshot_every,
            replay_every=args.replay_every,
        )
    )
    print(report(figures).encode("utf-8", "backslashreplace").decode())
    return 1 if figures.escaped or figures.violations else 0


if __name__ == "__main__":
    sys.exit(main())
