"""Host settings: one frozen object, built once and passed down.

Layer: app support (imported by host, transport and cli; imports nothing of theirs).

Every bound the host enforces lives here with its default, so limits are
visible in one place (docs/architecture.md explains what happens at each).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the host needs to know to run."""

    host: str = "127.0.0.1"
    port: int = 8765

    #: Largest accepted WebSocket message (bytes); larger ones close with 1009.
    max_message_bytes: int = 4 * 1024 * 1024
    #: permessage-deflate costs CPU on every frame; off by default.
    compression: bool = False
    #: WebSocket keepalive pings (seconds; None disables).
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0

    #: Per-connection outbox: frames and bytes a client may lag behind before it
    #: is disconnected (close 1013; it reconnects and replays).
    outbox_max_frames: int = 20_000
    outbox_max_bytes: int = 32 * 1024 * 1024

    #: Per-channel actor inbox; producers wait when it is full.
    actor_inbox: int = 1_024
    #: Actions an actor may have applied but not yet committed before it waits
    #: for the disk (bounds the memory held by uncommitted states).
    actor_in_flight: int = 64

    #: Per-channel replay buffer for ``reconnect``.
    replay_max_envelopes: int = 4_096
    replay_max_bytes: int = 4 * 1024 * 1024

    #: Client ids remembered for ``reconnect`` after their connection closed.
    known_clients: int = 10_000

    #: Where the SQLite database lives; ``None`` keeps everything in memory
    #: (nothing survives a restart: for tests and throw-away hosts).
    data_dir: str | None = None
    #: SQLite ``synchronous``: "normal" (WAL: survives process crashes) or
    #: "full" (also survives power loss). docs/durability.md.
    synchronous: str = "normal"
    #: Snapshot a channel after this many actions — and at least as many log
    #: bytes as its last snapshot — and at every turn end.
    snapshot_every: int = 256
    #: Completed turns a chat keeps in memory when loaded from disk (older
    #: ones are paged in by ``fetchTurns``).
    retained_turns: int = 200

    #: Provider used by ``createSession`` without ``provider``.
    default_provider: str = "echo"
    #: Seconds a client-provided tool may take before the host fails it.
    client_tool_timeout: float = 300.0
