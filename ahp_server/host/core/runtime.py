"""What a channel actor, a turn and a session's agent need from the host that runs them.

Layer: host (asyncio), below the actors: this module names the seam, it holds
no state. :class:`~ahp_server.host.host.Host` implements :class:`Runtime`
structurally; actors, the turn engine and the agent sessions depend on this
narrow interface, never on the ``Host`` class, so imports run one way:

    gateway → commands → host → sessions → actors → turns → runtime → sequencer → fanout

(``import-linter`` checks it in CI: ``pyproject.toml``, ``[tool.importlinter]``.)
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from ahp_server.agents.base import AgentTerminal, FileChange, Provider, TurnRequest
from ahp_server.config import Settings
from ahp_server.host.core.sequencer import Hub
from ahp_server.host.core.turnstile import Turnstile
from ahp_server.workspace.roots import Roots

__all__ = ["Counters", "Runtime"]


@dataclass(slots=True)
class Counters:
    """Counters ``/metrics`` exposes: each an integer bump where the event happens."""

    rejected: int = 0
    reconnect_replay: int = 0
    reconnect_snapshot: int = 0
    slow_consumers: int = 0


class Runtime(Protocol):
    """The host as an actor sees it: configuration, sequencing, time, tasks, agents."""

    @property
    def settings(self) -> Settings: ...

    @property
    def hub(self) -> Hub:
        """Sequencing, persistence (``hub.store``) and fan-out."""
        ...

    @property
    def counters(self) -> Counters: ...

    @property
    def turnstile(self) -> Turnstile:
        """Spreads bursts of ready work over turns of the loop (``turnstile.py``)."""
        ...

    @property
    def roots(self) -> Roots:
        """Where working directories may lie (docs/workspace.md "Roots")."""
        ...

    def now(self) -> float:
        """The host's clock in epoch milliseconds (injected: tests freeze it)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a background coroutine the host owns (cancelled when it stops)."""
        ...

    def provider(self, name: str) -> Provider:
        """The provider called ``name`` (``ProtocolError`` -32002 when there is none)."""
        ...

    def agent_session_ready(self, session: str) -> Coroutine[Any, Any, None]:
        """Wait until the provider holds ``session`` (restoring it once after a restart).

        Raises :class:`~ahp_server.agents.base.AgentError` when it cannot.
        """
        ...

    def agent_terminal_started(
        self, request: TurnRequest, terminal: AgentTerminal
    ) -> Coroutine[Any, Any, None]:
        """Show a command the agent of ``request``'s turn started as a terminal channel.

        A no-op when no terminal service runs (``host/channels/terminals.py``).
        """
        ...

    def turn_ended(self, chat: str, turn_id: str) -> None:
        """A turn of ``chat`` ended (completed, failed or cancelled): what it started and
        left running becomes the chat's background work (``host/channels/terminals.py``)."""
        ...

    def file_changed(self, request: TurnRequest, change: FileChange) -> Coroutine[Any, Any, None]:
        """Record a file the agent of ``request``'s turn changed in the turn's changeset.

        A no-op when no changeset service runs (``host/channels/changesets.py``); never raises.
        """
        ...

    def owns(self, session: str) -> bool:
        """Sharded mode: whether this node owns ``session`` — or the root channel — now
        (docs/scale-out.md "Sharded mode"); one host owns everything."""
        ...

    def owner_of(self, session: str) -> str | None:
        """The user who created ``session`` (multi-user mode), if any."""
        ...

    def notify_root(self, method: str, params: Any, *, session: str, owner: str | None) -> None:
        """A ``root/session*`` notification about ``session`` to the root's subscribers who
        may see what ``owner`` owns (sharded mode: every node's)."""
        ...
