"""Host settings: one frozen object, built once and passed down.

Layer: app support (imported by host, transport and cli; imports nothing of theirs).

Sources, later ones winning: built-in defaults (below), a TOML file
(``config/ahp-server.toml`` documents every key; ``docs/configuration.md`` is
generated from ``_KEYS`` and the fields' ``#:`` comments by
``.ci/gen_config_docs.py``), ``AHP_SERVER_*`` environment
variables, command-line flags. :func:`load_settings` validates everything and
raises :class:`ConfigError` naming the offending key.
"""

from __future__ import annotations

import dataclasses
import importlib
import ipaddress
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "AgentConfig",
    "ConfigError",
    "Problem",
    "Settings",
    "UserConfig",
    "load_settings",
    "machine_problems",
]


class ConfigError(Exception):
    """An invalid setting; ``key`` is its dotted name (``server.port``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class UserConfig:
    """One user of multi-user mode (a ``[[users]]`` table): a name and its token.

    The token is read from the environment (``token_env``) or a file
    (``token_file``) when the settings load; it is never printed (``repr``
    leaves it out) or logged. docs/deploy.md "Identity and ownership".
    """

    name: str
    token: str = dataclasses.field(repr=False)
    #: An admin sees and may act on every session (and ownerless ones).
    admin: bool = False
    #: This user's workspace roots (``roots``), replacing ``workspace.roots``
    #: for them; ``None``: ``workspace.roots``. docs/workspace.md "Roots".
    roots: tuple[str, ...] | None = None
    #: Where the token was read from (``token_file``): never served to a client.
    token_file: str | None = None


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One configured agent (an ``[[agents]]`` table): advertised in root ``agents``."""

    #: The provider id clients pass to ``createSession`` (``[a-z0-9][a-z0-9_-]*``).
    name: str
    #: ``acp``: an Agent Client Protocol agent, run as a child process (stdio);
    #: ``openai``: a model behind an OpenAI-compatible chat-completions endpoint.
    kind: str = "acp"
    #: The program and its arguments.
    command: str = ""
    args: tuple[str, ...] = ()
    #: Environment given to the process as written here (not for secrets).
    env: tuple[tuple[str, str], ...] = ()
    #: Names of the host's environment variables passed on to the process:
    #: how an API key reaches an agent without being written down.
    pass_env: tuple[str, ...] = ()
    #: What clients show: its title (empty: ``name``) and a line about it.
    display_name: str = ""
    description: str = ""
    #: One process per session (its chats are ACP sessions of that process),
    #: or one per chat.
    process: str = "session"
    #: Seconds a turn may run before the host ends it (``None``: no limit).
    turn_timeout: float | None = None
    #: Seconds an agent process may sit without a turn before the host stops it
    #: (the next turn starts it again and takes its sessions back); ``None``: never.
    idle_timeout: float | None = 900.0
    # -- kind "openai" --
    #: The endpoint's base URL (``https://api.openai.com/v1``, ``http://localhost:11434/v1``…).
    base_url: str = ""
    #: The model to ask.
    model: str = ""
    #: The name of the environment variable that holds the API key (never the key).
    api_key_env: str = ""
    #: Sampling temperature and the longest answer in tokens (not set: the endpoint's own).
    temperature: float | None = None
    max_tokens: int | None = None
    #: The system message sent before the history (empty: none).
    system_prompt: str = ""
    #: Tokens of history sent with a turn (estimated: 4 characters a token);
    #: the oldest turns are left out first.
    context_budget: int = 8000
    #: Rounds of tool calls the model may make in one turn.
    max_tool_rounds: int = 8
    #: Retries of a request the endpoint refused with 429 or 5xx, or could not take.
    max_retries: int = 3
    #: Where ``command`` was set (``agents[2].command``, or the environment
    #: variable): what a problem with it names. Not a setting.
    command_key: str = dataclasses.field(default="", compare=False)

    @property
    def title(self) -> str:
        return self.display_name or self.name


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the host needs to know to run."""

    #: Address to listen on. Anything but a loopback address needs a token.
    host: str = "127.0.0.1"
    #: TCP port (0 picks a free one; the ``listening`` log line gives the URL).
    port: int = 8765
    #: Connection token: clients send ``Authorization: Bearer <token>`` or
    #: ``?tkn=<token>``. Required to bind a non-loopback address.
    token: str | None = None
    #: Browser ``Origin`` values allowed to connect (others get 403). Clients
    #: that send no Origin (IDEs, CLIs) are not affected.
    allowed_origins: tuple[str, ...] = ()
    #: Reverse proxies (addresses or networks, e.g. ``10.0.0.0/8``) whose
    #: ``X-Forwarded-For`` names the client: its address is then the one the
    #: per-address limit counts and the logs show. Empty: the peer's address.
    trusted_proxies: tuple[str, ...] = ()
    #: Serve the browser client at ``/`` (docs/web.md) and admit the page's own
    #: origin: an Origin naming the Host the request was sent to, when that Host
    #: is a loopback name or a token is configured.
    web_ui: bool = True

    #: Largest accepted WebSocket message (bytes); larger ones close with 1009.
    max_message_bytes: int = 4 * 1024 * 1024
    #: permessage-deflate costs CPU on every frame; off by default.
    compression: bool = False
    #: Merge consecutive streamed text of a part for up to this many ms before
    #: sending it as one action (0: every piece is its own chat/delta).
    coalesce_ms: float = 0.0
    #: WebSocket keepalive: ping every N seconds, close if no pong within N
    #: seconds (``None``, 0 in a file, disables). Reverse proxies must allow
    #: longer idle times than this.
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    #: Seconds a client has to complete the HTTP upgrade (the opening
    #: handshake); a slow-loris client that stalls mid-request is dropped.
    handshake_timeout: float = 10.0
    #: The event loop the daemon runs on (docs/performance.md "The knobs"):
    #: ``"auto"``, uvloop where it is installed (a dependency on Linux and
    #: macOS) else asyncio's own; ``"uvloop"`` (the start fails without it);
    #: ``"asyncio"``.
    event_loop: str = "auto"
    #: Seconds a client's active-client entries outlive its last connection;
    #: then ``session/activeClientRemoved`` and its client tool calls fail
    #: (WIRE-SUMMARY §3.4). A reconnect within the grace keeps them.
    active_client_grace: float = 30.0

    #: Per-connection outbox: frames and bytes a client may lag behind before it
    #: is disconnected (close 1013; it reconnects and replays).
    outbox_max_frames: int = 20_000
    outbox_max_bytes: int = 32 * 1024 * 1024
    #: Bytes queued for all clients together (outboxes and batches being
    #: written); over it the slowest connections are closed with 1013 until the
    #: total fits (docs/reliability.md "Memory").
    outbox_total_bytes: int = 256 * 1024 * 1024

    #: Per-channel actor inbox; producers wait when it is full.
    actor_inbox: int = 1_024
    #: Actions an actor may have applied but not yet committed before it waits
    #: for the disk (bounds the memory held by uncommitted states).
    actor_in_flight: int = 512

    #: Per-channel replay buffer for ``reconnect``.
    replay_max_envelopes: int = 4_096
    replay_max_bytes: int = 4 * 1024 * 1024

    #: Client ids remembered for ``reconnect`` after their connection closed, per
    #: user (multi-user mode; one bucket otherwise): never a live id nor one a
    #: terminal's claim names (docs/protocol.md "Client identity").
    known_clients: int = 10_000

    #: Where the SQLite database lives. ``ahp-server`` defaults it to
    #: ``$XDG_DATA_HOME/ahp-server`` (else ``~/.local/share/ahp-server``);
    #: ``:memory:`` keeps everything in memory (nothing survives a restart: for
    #: tests and throw-away hosts).
    data_dir: str | None = None
    #: A PostgreSQL URL (``postgres://user@host/db``) to keep everything in
    #: PostgreSQL instead of SQLite in ``data_dir`` (docs/durability.md).
    #: ``None``: the embedded SQLite default, no extra service.
    store: str | None = None
    #: SQLite ``synchronous``: "normal" (WAL: survives process crashes) or
    #: "full" (also survives power loss). docs/durability.md.
    synchronous: str = "normal"
    #: With "normal": commit at most once per this many milliseconds while
    #: several chats stream at once (grouping their tokens); a lone stream
    #: (unless it commits 16 times within a window) and a client's own action
    #: are committed at once. The longest it delays a delivery. 0: every loop turn.
    commit_window_ms: float = 2.0
    #: With PostgreSQL (``storage.store``): seconds one commit may take. A
    #: database that stops answering without closing the connection (a network
    #: partition, a hung server) then stops the store, which /readyz, the page
    #: and the exit status report, instead of holding every turn silently.
    commit_timeout: float = 30.0
    #: Snapshot a channel after this many actions, once it has also logged at
    #: least as many bytes as its last snapshot holds (a turn's end stores the
    #: turn, not a snapshot: docs/durability.md).
    snapshot_every: int = 256
    #: Completed turns a chat keeps in memory when loaded from disk (older
    #: ones are paged in by ``fetchTurns``).
    retained_turns: int = 200
    #: Bytes of completed turns (as stored, JSON) one snapshot of a chat — or
    #: one ``fetchTurns`` page — carries at most: the newest that fit, plus
    #: ``turnsNextCursor`` for the rest. The newest turn always goes, even
    #: alone over the budget (docs/protocol.md "Chat history is bounded in bytes").
    snapshot_turn_bytes: int = 4 * 1024 * 1024
    #: Bytes of completed turns a chat keeps in memory (durable store only):
    #: over it the oldest are dropped from memory — they stay on disk and page
    #: in with ``fetchTurns``. The newest turn always stays (docs/durability.md "History").
    memory_turn_bytes: int = 16 * 1024 * 1024

    #: Limits at the door (docs/deploy.md): exceeding one gives an error or a
    #: rejection, never a crash. Open connections at once; more get HTTP 503.
    max_connections: int = 1_000
    #: Open connections (and upgrades in progress) from one IP address,
    #: loopback included; more get HTTP 429 at the door (docs/reliability.md).
    max_connections_per_ip: int = 256
    #: Subscriptions one connection may hold.
    max_subscriptions: int = 10_000
    #: Chats one session may hold (``createChat`` beyond it is refused).
    max_chats_per_session: int = 1_000
    #: ``dispatchAction`` token bucket per connection: sustained rate per
    #: second and burst. Actions over it are rejected (echoed with a reason).
    dispatch_rate: float = 200.0
    dispatch_burst: int = 400

    #: Configured agents (``[[agents]]``), offered beside the built-in echo agent.
    agents: tuple[AgentConfig, ...] = ()
    #: Multi-user mode (``[[users]]``): each user's token names them at the door;
    #: sessions belong to their creator. Empty: ``token`` (or none), one user.
    users: tuple[UserConfig, ...] = ()
    #: Provider used by ``createSession`` without ``provider``.
    default_provider: str = "echo"
    #: Seconds a client-provided tool may take before the host fails it.
    client_tool_timeout: float = 300.0
    #: Seconds a provider may take to open a session (or restore it after a
    #: restart) before the session fails (or the turn does): agents/base.py.
    session_open_timeout: float = 60.0
    #: Seconds a provider may take to close a session (dispose, host stop).
    session_close_timeout: float = 10.0

    #: Terminal channels (``createTerminal``; docs/workspace.md "Terminals"):
    #: at most this many at once (running or exited, the host's own and agents'),
    #: and (multi-user mode) this many of one user's, each keeping at most this
    #: much output (the oldest is dropped), running this command (empty:
    #: ``$SHELL``, else ``/bin/sh``), and given this many seconds to end after
    #: SIGHUP/SIGTERM before SIGKILL.
    max_terminals: int = 32
    max_terminals_per_user: int = 16
    terminal_scrollback_bytes: int = 256 * 1024
    terminal_shell: tuple[str, ...] = ()
    terminal_kill_grace: float = 2.0

    #: Where sessions' working directories may lie (docs/workspace.md "Roots"):
    #: absolute paths; in multi-user mode a user's own ``roots`` replace them.
    #: ``None``: the home directory when single-user on loopback, else none.
    workspace_roots: tuple[str, ...] | None = None
    #: The configuration file the settings were read from (never served; not a
    #: setting, so settings that differ only in where they came from are equal).
    config_file: str | None = dataclasses.field(default=None, compare=False)

    #: The ``resource*`` commands (docs/workspace.md "Resources"): the largest
    #: file ``resourceRead`` returns (its base64 answer must fit in
    #: ``outbox_max_bytes``), and the largest ``resourceWrite`` data (decoded;
    #: a frame is also bounded by ``max_message_bytes``).
    max_read_bytes: int = 8 * 1024 * 1024
    max_write_bytes: int = 4 * 1024 * 1024

    #: Resource watches (``createResourceWatch``; docs/workspace.md "Resource
    #: watches"): at most this many on the host, created by one user (multi-user
    #: mode; single-user mode counts every connection as one user), and created
    #: by one connection;
    #: changes are grouped for up to ``watch_debounce_ms`` into one batch, sent
    #: as ``resourceWatch/changed`` actions of at most ``watch_batch_items``
    #: changes; a batch of more than ``watch_window_items`` changes is replaced
    #: by one ``updated`` change of the watched root (rescan it).
    max_watches: int = 64
    max_watches_per_user: int = 32
    max_watches_per_connection: int = 16
    watch_debounce_ms: int = 200
    watch_batch_items: int = 500
    watch_window_items: int = 10_000
    #: Changesets (docs/workspace.md "Changesets"): the text kept of each side
    #: of a changed file (over it the file is listed without content), the
    #: content one changeset may hold in all (later files are listed without),
    #: and the files it lists (later ones are left out and the changeset says so).
    changeset_content_bytes: int = 256 * 1024
    changeset_total_bytes: int = 4 * 1024 * 1024
    changeset_max_files: int = 10_000

    #: Logging: "console", "json", or ``None`` ("auto" in a file: console on a
    #: terminal, else JSON).
    log_format: str | None = None
    #: "debug", "info", "warning" or "error". Nothing per streamed delta is logged at info.
    log_level: str = "info"

    #: Cluster mode (docs/scale-out.md): a NATS URL (``nats://host:4222``)
    #: joins this node to the nodes sharing ``store`` (PostgreSQL, required).
    #: ``None``: one process, as always.
    bus: str | None = None
    #: How the nodes share the work (docs/scale-out.md): ``"primary"``, one node
    #: at a time owns every session and the others relay their clients to it;
    #: ``"sharded"``, every node owns the sessions created through it and runs
    #: their agents, and takes over a dead node's share (a database of its own:
    #: the two modes number the log differently).
    cluster_mode: str = "primary"
    #: Sharded mode: where a new session goes — ``"least-loaded"``, the live node
    #: with the fewest running turns, then sessions (by heartbeat), the request
    #: forwarded there; ``"local"``, the node the client reached.
    placement: str = "least-loaded"
    #: The cluster's name: its nodes' subjects on the bus start ``ahp.<name>.``,
    #: so clusters (and tests) can share one NATS server.
    cluster_name: str = "main"
    #: This node's name on the bus and in the lease (``[A-Za-z0-9_-]``);
    #: ``None``: the host name and process id.
    node_id: str | None = None
    #: Seconds the primary's lease lasts unrenewed (renewed every third of
    #: it): how long a dead primary's channels wait for another node.
    lease_ttl: float = 10.0
    #: Seconds between heartbeats on the bus; a node unheard for three of
    #: them is taken for gone (its relayed clients are closed and reconnect).
    heartbeat: float = 1.0
    #: Frames one relayed client may have on their way into the primary's
    #: gateway; over it the client is closed with 1013 (try again).
    relay_inbox: int = 4096
    #: Sharded mode (docs/scale-out.md "One ``serverSeq``: the commit counter"):
    #: seconds a number may be missing on the feed behind a later one before the
    #: node reads it from the log.
    feed_grace: float = 0.05
    #: Sharded mode: seconds the node's delivery may stay blocked on a number it
    #: cannot read before its clients are closed with 1012, to reconnect elsewhere
    #: (also how long a ``reconnect`` from a node further ahead waits); longer
    #: than ``feed_grace``.
    feed_stall: float = 5.0
    #: Sharded mode: the commit window (``storage.commit_window_ms`` is the
    #: single node's). Each commit there is a PostgreSQL round trip and a feed
    #: record that every node reads, so concurrent streams share a commit
    #: within this many milliseconds: the longest it delays a delivery.
    sharded_commit_window_ms: float = 10.0
    #: NATS credentials of this node (or ``nats://user:password@host`` in
    #: ``bus``; not both). The password is never logged or printed.
    bus_user: str | None = None
    bus_password: str | None = dataclasses.field(default=None, repr=False)
    #: The secret every node of the cluster shares: what a node publishes on
    #: the bus is signed with a key derived from it, and what does not verify
    #: is dropped (docs/scale-out.md "Authentication"). Required with ``bus``,
    #: at least 16 bytes; never logged or printed.
    cluster_secret: str | None = dataclasses.field(default=None, repr=False)


#: TOML key -> Settings field, with the value's kind for validation.
_KEYS: dict[str, tuple[str, str]] = {
    "server.host": ("host", "str"),
    "server.port": ("port", "port"),
    "server.token": ("token", "optstr"),
    "server.allowed_origins": ("allowed_origins", "strlist"),
    "server.trusted_proxies": ("trusted_proxies", "netlist"),
    "server.web_ui": ("web_ui", "bool"),
    "server.max_message_bytes": ("max_message_bytes", "posint"),
    "server.compression": ("compression", "bool"),
    "server.coalesce_ms": ("coalesce_ms", "nonnegfloat"),
    "server.ping_interval": ("ping_interval", "optposfloat"),
    "server.ping_timeout": ("ping_timeout", "optposfloat"),
    "server.handshake_timeout": ("handshake_timeout", "posfloat"),
    "server.event_loop": ("event_loop", "eventloop"),
    "server.active_client_grace": ("active_client_grace", "nonnegfloat"),
    "storage.data_dir": ("data_dir", "optstr"),
    "storage.store": ("store", "storeurl"),
    "storage.durability": ("synchronous", "durability"),
    "storage.commit_window_ms": ("commit_window_ms", "nonnegfloat"),
    "storage.commit_timeout": ("commit_timeout", "posfloat"),
    "storage.snapshot_every": ("snapshot_every", "posint"),
    "storage.retained_turns": ("retained_turns", "posint"),
    "storage.snapshot_turn_bytes": ("snapshot_turn_bytes", "posint"),
    "storage.memory_turn_bytes": ("memory_turn_bytes", "posint"),
    "limits.max_connections": ("max_connections", "posint"),
    "limits.max_connections_per_ip": ("max_connections_per_ip", "posint"),
    "limits.max_subscriptions": ("max_subscriptions", "posint"),
    "limits.max_chats_per_session": ("max_chats_per_session", "posint"),
    "limits.dispatch_rate": ("dispatch_rate", "posfloat"),
    "limits.dispatch_burst": ("dispatch_burst", "posint"),
    "limits.outbox_max_frames": ("outbox_max_frames", "posint"),
    "limits.outbox_max_bytes": ("outbox_max_bytes", "posint"),
    "limits.outbox_total_bytes": ("outbox_total_bytes", "posint"),
    "limits.actor_inbox": ("actor_inbox", "posint"),
    "limits.actor_in_flight": ("actor_in_flight", "posint"),
    "limits.replay_max_envelopes": ("replay_max_envelopes", "posint"),
    "limits.replay_max_bytes": ("replay_max_bytes", "posint"),
    "limits.known_clients": ("known_clients", "posint"),
    "providers.default": ("default_provider", "str"),
    "providers.client_tool_timeout": ("client_tool_timeout", "posfloat"),
    "providers.session_open_timeout": ("session_open_timeout", "posfloat"),
    "providers.session_close_timeout": ("session_close_timeout", "posfloat"),
    "workspace.roots": ("workspace_roots", "rootlist"),
    "workspace.max_terminals": ("max_terminals", "posint"),
    "workspace.max_terminals_per_user": ("max_terminals_per_user", "posint"),
    "workspace.terminal_scrollback_bytes": ("terminal_scrollback_bytes", "posint"),
    "workspace.terminal_shell": ("terminal_shell", "strlist"),
    "workspace.terminal_kill_grace": ("terminal_kill_grace", "posfloat"),
    "workspace.max_read_bytes": ("max_read_bytes", "posint"),
    "workspace.max_write_bytes": ("max_write_bytes", "posint"),
    "workspace.max_watches": ("max_watches", "posint"),
    "workspace.max_watches_per_user": ("max_watches_per_user", "posint"),
    "workspace.max_watches_per_connection": ("max_watches_per_connection", "posint"),
    "workspace.watch_debounce_ms": ("watch_debounce_ms", "posint"),
    "workspace.watch_batch_items": ("watch_batch_items", "posint"),
    "workspace.watch_window_items": ("watch_window_items", "posint"),
    "workspace.changeset_content_bytes": ("changeset_content_bytes", "posint"),
    "workspace.changeset_total_bytes": ("changeset_total_bytes", "posint"),
    "workspace.changeset_max_files": ("changeset_max_files", "posint"),
    "cluster.bus": ("bus", "busurl"),
    "cluster.mode": ("cluster_mode", "clustermode"),
    "cluster.placement": ("placement", "placement"),
    "cluster.name": ("cluster_name", "nodeid"),
    "cluster.node_id": ("node_id", "nodeid"),
    "cluster.lease_ttl": ("lease_ttl", "posfloat"),
    "cluster.heartbeat": ("heartbeat", "posfloat"),
    "cluster.relay_inbox": ("relay_inbox", "posint"),
    "cluster.feed_grace": ("feed_grace", "posfloat"),
    "cluster.feed_stall": ("feed_stall", "posfloat"),
    "cluster.commit_window_ms": ("sharded_commit_window_ms", "nonnegfloat"),
    "cluster.bus_user": ("bus_user", "optstr"),
    "cluster.bus_password": ("bus_password", "secret"),
    "cluster.bus_password_file": ("bus_password", "secretfile"),
    "cluster.secret": ("cluster_secret", "secret"),
    "cluster.secret_file": ("cluster_secret", "secretfile"),
    "logging.format": ("log_format", "logformat"),
    "logging.level": ("log_level", "loglevel"),
}

#: Environment variables -> TOML keys (values are strings; parsed like TOML ones).
ENVIRONMENT: dict[str, str] = {
    "AHP_SERVER_HOST": "server.host",
    "AHP_SERVER_PORT": "server.port",
    "AHP_SERVER_TOKEN": "server.token",
    "AHP_SERVER_ALLOWED_ORIGINS": "server.allowed_origins",
    "AHP_SERVER_TRUSTED_PROXIES": "server.trusted_proxies",
    "AHP_SERVER_WEB_UI": "server.web_ui",
    "AHP_SERVER_EVENT_LOOP": "server.event_loop",
    "AHP_SERVER_DATA_DIR": "storage.data_dir",
    "AHP_SERVER_STORE": "storage.store",
    "AHP_SERVER_BUS": "cluster.bus",
    "AHP_SERVER_NODE_ID": "cluster.node_id",
    "AHP_SERVER_CLUSTER_NAME": "cluster.name",
    "AHP_SERVER_CLUSTER_MODE": "cluster.mode",
    "AHP_SERVER_PLACEMENT": "cluster.placement",
    "AHP_SERVER_FEED_GRACE": "cluster.feed_grace",
    "AHP_SERVER_FEED_STALL": "cluster.feed_stall",
    "AHP_SERVER_BUS_USER": "cluster.bus_user",
    "AHP_SERVER_BUS_PASSWORD": "cluster.bus_password",
    "AHP_SERVER_BUS_PASSWORD_FILE": "cluster.bus_password_file",
    "AHP_SERVER_CLUSTER_SECRET": "cluster.secret",
    "AHP_SERVER_CLUSTER_SECRET_FILE": "cluster.secret_file",
    "AHP_SERVER_DURABILITY": "storage.durability",
    "AHP_SERVER_LOG_FORMAT": "logging.format",
    "AHP_SERVER_LOG_LEVEL": "logging.level",
    "AHP_SERVER_DEFAULT_PROVIDER": "providers.default",
    # Paths, separated by ':' as in PATH.
    "AHP_SERVER_WORKSPACE_ROOTS": "workspace.roots",
    # Behind a reverse proxy every client shares the proxy's address.
    "AHP_SERVER_MAX_CONNECTIONS_PER_IP": "limits.max_connections_per_ip",
}

#: Before ``[[agents]]`` existed these lived in an ``[agents]`` table; such a
#: file still loads (it cannot also define ``[[agents]]``: TOML forbids both).
_LEGACY_AGENTS_TABLE = {
    "default_provider": "providers.default",
    "client_tool_timeout": "providers.client_tool_timeout",
    "session_open_timeout": "providers.session_open_timeout",
    "session_close_timeout": "providers.session_close_timeout",
}

#: ``[[agents]]`` fields -> (AgentConfig field, kind).
_AGENT_FIELDS: dict[str, tuple[str, str]] = {
    "name": ("name", "agentname"),
    "kind": ("kind", "agentkind"),
    "command": ("command", "str"),
    "args": ("args", "strlist"),
    "env": ("env", "strtable"),
    "pass_env": ("pass_env", "strlist"),
    "display_name": ("display_name", "str"),
    "description": ("description", "anystr"),
    "process": ("process", "process"),
    "turn_timeout": ("turn_timeout", "optposfloat"),
    "idle_timeout": ("idle_timeout", "optposfloat"),
    "base_url": ("base_url", "url"),
    "model": ("model", "str"),
    "api_key_env": ("api_key_env", "envname"),
    "temperature": ("temperature", "nonnegfloat"),
    "max_tokens": ("max_tokens", "posint"),
    "system_prompt": ("system_prompt", "anystr"),
    "context_budget": ("context_budget", "posint"),
    "max_tool_rounds": ("max_tool_rounds", "posint"),
    "max_retries": ("max_retries", "nonnegint"),
}
_AGENT_ENV = re.compile(r"^AHP_SERVER_AGENTS_(?P<name>[A-Z0-9][A-Z0-9_]*?)_(?P<field>[A-Z_]+)$")
_AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_BUILT_IN = frozenset({"echo"})
#: Bytes of a ``resourceRead`` answer besides its data (JSON-RPC envelope, keys, type).
READ_FRAME_OVERHEAD = 4096


def _from_env(kind: str, text: str) -> object:
    if kind in ("port", "posint"):
        try:
            return int(text)
        except ValueError:
            return text  # rejected below with the key's name
    if kind in ("posfloat", "optposfloat", "nonnegfloat"):
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "bool":
        return text.strip().lower() in ("1", "true", "yes", "on")
    if kind in ("strlist", "netlist"):
        return [item.strip() for item in text.split(",") if item.strip()]
    if kind == "rootlist":
        return [item for item in text.split(os.pathsep) if item]
    return text


def _agent_from_env(field: str, text: str) -> object:
    """An ``AHP_SERVER_AGENTS_<NAME>_<FIELD>`` value: ARGS split like a shell, ENV as K=V,…."""
    if field == "args":
        try:
            return shlex.split(text)
        except ValueError:
            return text
    if field == "pass_env":
        return [item.strip() for item in text.split(",") if item.strip()]
    if field == "env":
        pairs = [item.partition("=") for item in text.split(",") if item.strip()]
        return {k.strip(): v for k, sep, v in pairs if sep} if all(p[1] for p in pairs) else text
    if field in ("turn_timeout", "idle_timeout", "temperature"):
        try:
            return float(text)
        except ValueError:
            return text
    if field in ("max_tokens", "context_budget", "max_tool_rounds", "max_retries"):
        try:
            return int(text)
        except ValueError:
            return text
    return text


def _check(key: str, kind: str, value: object) -> object:
    def fail(expected: str) -> ConfigError:
        return ConfigError(key, f"must be {expected}, not {value!r}")

    if kind == "str":
        if not isinstance(value, str) or not value:
            raise fail("a non-empty string")
        return value
    if kind == "anystr":
        if not isinstance(value, str):
            raise fail("a string")
        return value
    if kind == "optstr":
        if not isinstance(value, str):
            raise fail("a string")
        return value or None
    if kind == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise fail("an integer from 0 to 65535")
        return value
    if kind == "posint":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail("a positive integer")
        return value
    if kind in ("posfloat", "optposfloat"):
        if kind == "optposfloat" and value == 0:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise fail("a positive number")
        return float(value)
    if kind == "nonnegfloat":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise fail("a number of 0 or more")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail("a list of strings")
        return tuple(value)
    if kind == "rootlist":
        return _root_list(key, value)
    if kind == "netlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail("a list of addresses or networks")
        try:  # host bits allowed: "10.1.2.3/8" is 10.0.0.0/8
            return tuple(str(ipaddress.ip_network(v.strip(), strict=False)) for v in value)
        except ValueError as error:
            raise ConfigError(key, f"must be IP addresses or networks: {error}") from None
    if kind == "storeurl":
        # Never echo the value: the URL may carry a password.
        if not isinstance(value, str):
            raise ConfigError(key, "must be a postgres:// URL (or empty for SQLite)")
        if not value:
            return None
        if not re.match(r"^postgres(ql)?://[^\s]*$", value):
            raise ConfigError(
                key, "must be a postgres:// or postgresql:// URL (or empty for SQLite)"
            )
        return value
    if kind == "busurl":
        # Never echo the value: the URL may carry credentials.
        if not isinstance(value, str) or (value and not re.match(r"^(nats|tls)://\S+$", value)):
            raise ConfigError(key, "must be a nats:// (or tls://) URL, or empty for one process")
        return value or None
    if kind == "secret":  # never echoed
        if not isinstance(value, str):
            raise ConfigError(key, "must be a string")
        return value.strip() or None
    if kind == "secretfile":  # read now; its content is never echoed
        if not isinstance(value, str):
            raise ConfigError(key, "must be the path of a file")
        if not value:
            return None
        try:
            secret = Path(value).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            why = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise ConfigError(key, f"cannot read it: {why}") from None
        if not secret:
            raise ConfigError(key, "the file is empty")
        return secret
    if kind == "nodeid":
        if not isinstance(value, str) or not re.match(r"^[A-Za-z0-9_-]{1,64}$", value):
            raise fail("1 to 64 letters, digits, '_' or '-'")
        return value
    if kind == "clustermode":
        if value not in ("primary", "sharded"):
            raise fail('"primary" or "sharded"')
        return value
    if kind == "placement":
        if value not in ("least-loaded", "local"):
            raise fail('"least-loaded" or "local"')
        return value
    if kind == "eventloop":
        if value not in ("auto", "uvloop", "asyncio"):
            raise fail('"auto", "uvloop" or "asyncio"')
        return value
    if kind == "durability":
        if value not in ("normal", "full"):
            raise fail('"normal" or "full"')
        return value
    if kind == "logformat":
        if value not in ("console", "json", "auto"):
            raise fail('"console", "json" or "auto"')
        return None if value == "auto" else value
    if kind == "loglevel":
        if value not in ("debug", "info", "warning", "error"):
            raise fail('"debug", "info", "warning" or "error"')
        return value
    if kind == "agentname":
        if not isinstance(value, str) or not _AGENT_NAME.match(value):
            raise fail("a name of lower-case letters, digits, '-' and '_'")
        if value in _BUILT_IN:
            raise ConfigError(key, f"{value!r} is the built-in agent's name")
        return value
    if kind == "agentkind":
        if value not in ("acp", "openai"):
            raise fail('"acp" or "openai"')
        return value
    if kind == "url":
        if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
            raise fail("an http:// or https:// URL")
        return value.rstrip("/")
    if kind == "envname":
        if not isinstance(value, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
            raise fail("the name of an environment variable")
        return value
    if kind == "nonnegint":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail("an integer of 0 or more")
        return value
    if kind == "process":
        if value not in ("session", "chat"):
            raise fail('"session" or "chat"')
        return value
    if kind == "strtable":
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise fail("a table of strings")
        return tuple(value.items())
    raise AssertionError(kind)


def _root_list(key: str, value: object) -> tuple[str, ...]:
    """Workspace roots: absolute paths (``~`` expanded), normalized, none of the system's own."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(key, f"must be a list of absolute paths, not {value!r}")
    roots: list[str] = []
    for text in value:
        path = os.path.normpath(os.path.expanduser(text))
        if not os.path.isabs(path):
            raise ConfigError(key, f"{text!r} is not an absolute path")
        if any(path == p or path.startswith(p + "/") for p in ("/proc", "/sys", "/dev")):
            raise ConfigError(key, f"{text!r} is a system file system: the host never serves it")
        roots.append(path)
    return tuple(dict.fromkeys(roots))


#: Secrets given as they are or in a file (the ``_file`` key, read at load): one or the other.
_SECRET_FILES = {
    "cluster.bus_password": "cluster.bus_password_file",
    "cluster.secret": "cluster.secret_file",
}


def _secrets(values: dict[str, object]) -> dict[str, object]:
    """Takes the secrets and their ``_file`` keys out of ``values``; their fields."""
    fields: dict[str, object] = {}
    for key, file_key in _SECRET_FILES.items():
        given, path = values.pop(key, None), values.pop(file_key, None)
        secret = None if given is None else _check(key, "secret", given)
        read = None if path is None else _check(file_key, "secretfile", path)
        if secret is not None and read is not None:
            raise ConfigError(file_key, f"set either {key} or {file_key}, not both")
        if secret is not None or read is not None:
            fields[_KEYS[key][0]] = secret if secret is not None else read
    return fields


def _check_cluster(settings: Settings) -> None:
    """Cluster mode's credentials: the shared secret (required), NATS's user and password."""
    secret = settings.cluster_secret
    if secret is None:
        raise ConfigError(
            "cluster.secret",
            "required in cluster mode: the nodes sign what they send on the bus with it "
            "(AHP_SERVER_CLUSTER_SECRET or cluster.secret_file; openssl rand -hex 32)",
        )
    if len(secret.encode()) < 16:
        raise ConfigError("cluster.secret", "must be at least 16 bytes (openssl rand -hex 32)")
    if (settings.bus_user is None) != (settings.bus_password is None):
        missing = "cluster.bus_password" if settings.bus_password is None else "cluster.bus_user"
        raise ConfigError(missing, "cluster.bus_user and cluster.bus_password go together")
    address = str(settings.bus).split("://", 1)[-1].split("/", 1)[0]
    if settings.bus_user is not None and "@" in address:
        raise ConfigError(
            "cluster.bus_user", "cluster.bus holds credentials already: give them in one place"
        )


def _agents(tables: object, environ: Mapping[str, str] | None) -> tuple[AgentConfig, ...]:
    """``[[agents]]`` tables, then ``AHP_SERVER_AGENTS_<NAME>_<FIELD>`` on top (by name)."""
    if tables is None:
        tables = []
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("agents", "must be [[agents]] tables")
    raw: dict[str, dict[str, object]] = {}
    keys: dict[str, str] = {}
    #: (agent, field) -> the environment variable that set it.
    from_env: dict[tuple[str, str], str] = {}
    for index, table in enumerate(tables):
        where = f"agents[{index}]"
        name = table.get("name")
        _check(f"{where}.name", "agentname", name)
        assert isinstance(name, str)
        if name in raw:
            raise ConfigError(f"{where}.name", f"{name!r} is configured twice")
        raw[name] = dict(table)
        keys[name] = where
    for variable, text in sorted((environ or {}).items()):
        match = _AGENT_ENV.match(variable)
        if match is None:
            continue
        # The field is the longest known suffix: NAME may itself hold "_".
        head = variable.removeprefix("AHP_SERVER_AGENTS_")
        field = next(
            (
                f
                for f in sorted(_AGENT_FIELDS, key=len, reverse=True)
                if head.endswith("_" + f.upper())
            ),
            None,
        )
        if field is None or field == "name":
            raise ConfigError(
                variable, f"unknown agent setting (one of {', '.join(_AGENT_FIELDS)})"
            )
        name = head[: -len(field) - 1].lower()
        table = raw.setdefault(name, {"name": name})
        keys.setdefault(name, variable)
        table[field] = _agent_from_env(field, text)
        from_env[name, field] = variable
    agents: list[AgentConfig] = []
    for name, table in raw.items():
        where = keys[name]
        fields: dict[str, object] = {}
        for field, value in table.items():
            if field not in _AGENT_FIELDS:
                raise ConfigError(f"{where}.{field}", "unknown agent setting")
            target, kind = _AGENT_FIELDS[field]
            fields[target] = _check(f"{where}.{field}", kind, value)
        if fields.get("kind", "acp") == "acp" and not fields.get("command"):
            raise ConfigError(f"{where}.command", "required: the program that runs the agent")
        if fields.get("kind") == "openai":
            for required in ("base_url", "model"):
                if not fields.get(required):
                    raise ConfigError(f"{where}.{required}", 'required for kind = "openai"')
        fields["command_key"] = from_env.get((name, "command"), f"{where}.command")
        agents.append(AgentConfig(**fields))  # type: ignore[arg-type]
    return tuple(agents)


def _users(tables: object, environ: Mapping[str, str]) -> tuple[UserConfig, ...]:
    """``[[users]]`` tables: ``name``, ``token_env`` or ``token_file``, ``admin``, ``roots``."""
    if tables is None:
        return ()
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("users", "must be [[users]] tables")
    users: list[UserConfig] = []
    tokens: set[str] = set()
    for index, table in enumerate(tables):
        where = f"users[{index}]"
        unknown = set(table) - {"name", "token_env", "token_file", "admin", "roots"}
        if unknown:
            raise ConfigError(f"{where}.{sorted(unknown)[0]}", "unknown user setting")
        name = table.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}", name):
            raise ConfigError(f"{where}.name", "required: letters, digits, _ . @ - (at most 64)")
        if any(user.name == name for user in users):
            raise ConfigError(f"{where}.name", f"{name!r} is configured twice")
        admin = table.get("admin", False)
        if not isinstance(admin, bool):
            raise ConfigError(f"{where}.admin", "must be true or false")
        variable, file = table.get("token_env"), table.get("token_file")
        if (variable is None) == (file is None):
            raise ConfigError(f"{where}.token_env", "give exactly one of token_env, token_file")
        if variable is not None:
            if not isinstance(variable, str) or not environ.get(variable):
                raise ConfigError(
                    f"{where}.token_env", f"environment variable {variable!r} is not set"
                )
            token = environ[variable].strip()
        else:
            if not isinstance(file, str):
                raise ConfigError(f"{where}.token_file", "must be a path")
            try:
                token = Path(file).expanduser().read_text(encoding="utf-8").strip()
            except OSError as error:
                raise ConfigError(
                    f"{where}.token_file", f"cannot read it: {error.strerror}"
                ) from None
        if len(token) < 16:
            raise ConfigError(
                f"{where}.token_env" if variable else f"{where}.token_file",
                "the token must be at least 16 characters",
            )
        if token in tokens:
            raise ConfigError(f"{where}.name", "two users share a token")
        tokens.add(token)
        roots = None if "roots" not in table else _root_list(f"{where}.roots", table["roots"])
        users.append(
            UserConfig(
                name=name,
                token=token,
                admin=admin,
                roots=roots,
                token_file=None if file is None else str(Path(file).expanduser().absolute()),
            )
        )
    return tuple(users)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(_flatten(value, key + "."))
        else:
            flat[key] = value
    return flat


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Defaults < TOML file < ``AHP_SERVER_*`` < ``overrides`` (dotted TOML keys)."""
    values: dict[str, object] = {}
    agent_tables: object = None
    user_tables: object = None
    if path is not None:
        try:
            with open(path, "rb") as handle:
                table = tomllib.load(handle)
        except OSError as error:
            raise ConfigError("config", f"cannot read {path}: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError("config", f"{path} is not valid TOML: {error}") from None
        agent_tables = table.pop("agents", None)
        user_tables = table.pop("users", None)
        if isinstance(agent_tables, dict):  # the pre-[[agents]] [agents] settings table
            for name, value in agent_tables.items():
                values[_LEGACY_AGENTS_TABLE.get(name, f"agents.{name}")] = value
            agent_tables = None
        values.update(_flatten(table))
    for variable, key in ENVIRONMENT.items():
        if environ is not None and variable in environ:
            values[key] = _from_env(_KEYS[key][1], environ[variable])
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    fields: dict[str, object] = _secrets(values)
    for key, value in values.items():
        if key not in _KEYS:
            raise ConfigError(key, "unknown setting")
        field, kind = _KEYS[key]
        fields[field] = _check(key, kind, value)
    data_dir = fields.get("data_dir")
    if isinstance(data_dir, str) and data_dir.startswith("~"):
        fields["data_dir"] = str(Path(data_dir).expanduser())
    fields["agents"] = _agents(agent_tables, environ)
    # Tokens named by [[users]] come from the real environment unless one is given.
    fields["users"] = _users(user_tables, os.environ if environ is None else environ)
    if fields["users"] and fields.get("token"):
        raise ConfigError("server.token", "set either server.token or [[users]], not both")
    if path is not None:
        fields["config_file"] = str(Path(path).absolute())
    settings = dataclasses.replace(Settings(), **fields)  # type: ignore[arg-type]
    names = {"echo", *(agent.name for agent in settings.agents)}
    if settings.default_provider not in names:
        raise ConfigError(
            "providers.default",
            f"{settings.default_provider!r} is not an agent here "
            f"(one of {', '.join(sorted(names))})",
        )
    # A resourceRead answer is one frame in the client's outbox: a read cap
    # whose base64 form cannot fit would disconnect every client that used it.
    if 4 * ((settings.max_read_bytes + 2) // 3) + READ_FRAME_OVERHEAD > settings.outbox_max_bytes:
        raise ConfigError(
            "workspace.max_read_bytes",
            f"{settings.max_read_bytes} bytes read make a base64 answer larger than "
            f"limits.outbox_max_bytes ({settings.outbox_max_bytes}): lower it or raise that",
        )
    # A changeset's snapshot carries its content as base64 data: URIs, in one frame.
    if 4 * ((settings.changeset_total_bytes + 2) // 3) * 2 > settings.outbox_max_bytes:
        raise ConfigError(
            "workspace.changeset_total_bytes",
            f"{settings.changeset_total_bytes} bytes of content make a changeset snapshot "
            f"larger than half of limits.outbox_max_bytes ({settings.outbox_max_bytes})",
        )
    # A chat's snapshot is one frame in the client's outbox; its turns are
    # what makes it large.
    if settings.snapshot_turn_bytes * 2 > settings.outbox_max_bytes:
        raise ConfigError(
            "storage.snapshot_turn_bytes",
            f"{settings.snapshot_turn_bytes} bytes of turns make a chat snapshot larger than "
            f"half of limits.outbox_max_bytes ({settings.outbox_max_bytes})",
        )
    # Reads reserve the budget less one outbox (host/core/fanout.py OutboxBudget.headroom).
    if settings.outbox_total_bytes < 2 * settings.outbox_max_bytes:
        raise ConfigError(
            "limits.outbox_total_bytes",
            f"{settings.outbox_total_bytes} is less than twice limits.outbox_max_bytes "
            f"({settings.outbox_max_bytes}): one client's outbox, beside what reads hold",
        )
    if settings.bus is not None and settings.store is None:
        raise ConfigError(
            "cluster.bus", "cluster mode needs storage.store: the PostgreSQL the nodes share"
        )
    if settings.bus is not None:
        _check_cluster(settings)
    if settings.heartbeat * 3 > settings.lease_ttl:
        raise ConfigError(
            "cluster.heartbeat",
            f"three heartbeats ({settings.heartbeat * 3:g} s) must fit in cluster.lease_ttl "
            f"({settings.lease_ttl:g} s)",
        )
    # A gap is read from the log after the grace: a stall bound below it would give
    # up before the node ever tried (docs/scale-out.md "One ``serverSeq``").
    if settings.feed_stall <= settings.feed_grace:
        raise ConfigError(
            "cluster.feed_stall",
            f"must be longer than cluster.feed_grace ({settings.feed_grace:g} s): a gap is "
            "read from the log only after the grace",
        )
    if not is_loopback(settings.host) and not settings.token and not settings.users:
        raise ConfigError(
            "server.token",
            f"required to listen on {settings.host}: set AHP_SERVER_TOKEN (or bind 127.0.0.1)",
        )
    return settings


@dataclass(frozen=True, slots=True)
class Problem:
    """A setting that loads but cannot work on this machine: a program or folder it names is
    missing. ``check-config`` lists every one and fails; ``serve`` refuses to start on a
    ``fatal`` one and warns of the rest (docs/deploy.md "Checking a configuration")."""

    #: The setting's key (``agents[2].command``, ``users[0].roots``).
    key: str
    message: str
    #: A missing workspace root is fatal: sessions rooted there could never work. A missing
    #: agent program is not: it may be installed later, and until then only that agent's
    #: sessions fail to start (saying so).
    fatal: bool

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


#: How to install the programs docs/agents.md "Recipes" runs, by the command's file name: what
#: ``check-config`` adds to "not on PATH" so the fix is in the message. One line each, and only
#: where the install is one command; anything else gets the bare problem.
INSTALL_HINTS: dict[str, str] = {
    "claude-agent-acp": (
        "npm install -g @agentclientprotocol/claude-agent-acp (Node.js 22 or later)"
    ),
    "claude-code-acp": "npm install -g @zed-industries/claude-code-acp",
    "gemini": "npm install -g @google/gemini-cli (Node.js 20 or later)",
    "codex-acp": "npm install -g @zed-industries/codex-acp",
    "fast-agent": "pip install fast-agent-mcp, in a Python 3.12 or later virtual environment",
    "npx": "install Node.js, which brings npm and npx",
}


def _missing_program(command: str, problem: str) -> str:
    """``problem``, with the install line of a program the recipes name."""
    hint = INSTALL_HINTS.get(os.path.basename(command))
    if hint is None:
        return problem
    return (
        f"{problem}: install it with {hint}, then put its directory on the host's PATH or "
        'give its full path (docs/agents.md "Recipes")'
    )


#: The optional Python packages a setting needs, with the extra that installs them
#: (pyproject.toml ``[project.optional-dependencies]``): a plain ``pip install ahp-server``
#: runs the embedded default without them.
OPTIONAL_DRIVERS: dict[str, tuple[tuple[str, str], ...]] = {
    "storage.store": (("asyncpg", "postgres"),),
    "cluster.bus": (("nats", "cluster"), ("asyncpg", "cluster")),
}


def driver_problems(settings: Settings) -> list[Problem]:
    """A PostgreSQL store or a cluster bus whose driver is not installed: fatal, with the fix.

    Checked by importing it, as the host will: a package that is present but broken
    (built for another Python, say) counts as missing too.
    """
    problems: list[Problem] = []
    configured = {"storage.store": settings.store, "cluster.bus": settings.bus}
    for key, drivers in OPTIONAL_DRIVERS.items():
        if configured[key] is None:
            continue
        for module, extra in drivers:
            try:
                importlib.import_module(module)
            except ImportError:
                problem = (
                    f"needs the Python package {module!r}, which is not installed: "
                    f"pip install 'ahp-server[{extra}]'"
                )
                problems.append(Problem(key, problem, fatal=True))
    return problems


def machine_problems(settings: Settings) -> list[Problem]:
    """Every agent's program, every configured workspace root and every optional driver a
    setting needs, checked on this machine.

    An ``acp`` agent's ``command`` is looked up on the ``PATH`` the agent will get (its own
    ``env`` may set one), as the host does when it starts the agent; an absolute path must
    be an executable file. A relative path with a ``/`` is not checked: it is resolved in
    each session's working directory. Roots (``workspace.roots``, each user's ``roots``)
    must be existing directories; the default root (the home directory) is not checked.
    """
    problems: list[Problem] = []
    for agent in settings.agents:
        if agent.kind != "acp":
            continue
        key = agent.command_key or "agents.command"
        command = agent.command
        if "/" not in command:
            path = dict(agent.env).get("PATH", os.environ.get("PATH", os.defpath))
            if shutil.which(command, path=path) is None:
                problem = _missing_program(command, f"{command!r} is not on PATH")
                problems.append(Problem(key, problem, fatal=False))
        elif os.path.isabs(command):
            if not os.path.isfile(command):
                problem = _missing_program(command, f"{command!r} does not exist")
                problems.append(Problem(key, problem, fatal=False))
            elif not os.access(command, os.X_OK):
                problems.append(Problem(key, f"{command!r} is not executable", fatal=False))
    rooted: list[tuple[str, tuple[str, ...]]] = [
        ("workspace.roots", settings.workspace_roots or ())
    ]
    rooted += [(f"users[{i}].roots", user.roots or ()) for i, user in enumerate(settings.users)]
    for key, roots in rooted:
        for root in roots:
            if not os.path.exists(root):
                problems.append(Problem(key, f"{root!r} does not exist", fatal=True))
            elif not os.path.isdir(root):
                problems.append(Problem(key, f"{root!r} is not a directory", fatal=True))
    return problems + driver_problems(settings)
