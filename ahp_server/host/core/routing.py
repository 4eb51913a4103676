"""Sharded mode's seam between the host's commands and the nodes that own other sessions.

Layer: host core (no I/O here). docs/scale-out.md "Routing". In a sharded
cluster (``cluster.mode = "sharded"``) every node serves any client, but a
session — its chats, its agent, its commits — lives on the one node that owns
it. The commands ask the host's :class:`Router` whether a request's channel
is owned elsewhere and, if it is, forward the request to that node and answer
with what it answered; the envelopes themselves reach the client from this
node's own delivery of the feed (``transport/node_feed.py``), in ``serverSeq``
order with everyone else's. ``transport/routing.py`` implements it; a host
without one (every other mode) owns everything.
"""

from __future__ import annotations

from typing import Protocol

from ahp_server.host.core.fanout import Connection
from ahp_server.protocol.errors import InternalError

__all__ = ["RESOURCES", "ROUTED", "Router", "Unreachable"]

#: The requests and notifications whose ``channel`` names what the owner decides
#: (``createSession``: the node placement picks; ``dispatchAction`` on the root
#: channel: the root's owner; a terminal's: the node that made it, which reported it;
#: a changeset's — ``invokeChangesetOperation`` too — its session's owner, a chat's
#: changeset its chat's; ``moveChat``: its chat's session's owner, which refuses a
#: destination session of another node). Everything else — the handshake,
#: ``createTerminal`` — is this node's, and the file requests go by their paths
#: (:data:`RESOURCES`).
ROUTED = frozenset(
    {
        "subscribe",
        "createSession",
        "disposeSession",
        "createChat",
        "disposeChat",
        "fetchTurns",
        "dispatchAction",
        "unsubscribe",
        "disposeTerminal",
        "invokeChangesetOperation",
        "moveChat",
    }
)


#: The requests that name files (WIRE-SUMMARY §4.1): answered by a node serving a root that
#: holds their paths — this one when it does (``Router.resource``; docs/scale-out.md
#: "Resources").
RESOURCES = frozenset(
    {
        "resourceRead",
        "resourceWrite",
        "resourceList",
        "resourceCopy",
        "resourceMove",
        "resourceDelete",
        "resourceResolve",
        "resourceMkdir",
        "resourceRequest",
        "createResourceWatch",
    }
)


class Unreachable(InternalError):
    """A ``createSession`` placed on a node whose route could not be opened (it is gone,
    or did not answer within three heartbeats): nothing reached it, so the next
    candidate may be tried (docs/scale-out.md "Placement")."""

    def __init__(self, node: str, why: str) -> None:
        super().__init__(f"node {node} did not answer ({why}): try again")
        self.node = node


class Router(Protocol):
    """Where a sharded node's requests go (see the module docstring)."""

    async def owner(
        self,
        method: str,
        channel: str,
        *,
        directory: str | None = None,
        exclude: frozenset[str] = frozenset(),
    ) -> str | None:
        """The node that must decide ``method`` on ``channel``; ``None``: this one (it owns
        the channel's session, or nobody knows the channel: this node answers that).
        ``directory``: a new session's working directory (placement goes by it);
        ``exclude``: nodes placement must not pick (they were :class:`Unreachable`)."""
        ...

    def mine(self, channel: str) -> bool:
        """Whether this node owns ``channel``'s session now (a forwarded request's check)."""
        ...

    async def request(
        self,
        connection: Connection,
        node: str,
        method: str,
        params: bytes,
        *,
        client: tuple[str, str] | None = None,
    ) -> bytes:
        """``method`` (``params`` encoded, protocol 1.0) run by ``node`` for ``connection``'s
        client; its encoded result, returned once this node has delivered every envelope
        ``node`` had delivered when it answered. ``client``: the client id and version
        when ``connection`` is not initialized yet. Raises ``ProtocolError``: the owner's
        error, or the route failing (the client's connection is then closed, 1012) —
        except :class:`Unreachable` for a ``createSession`` whose route could not be
        opened (the client stays: placement tries the next node)."""
        ...

    async def notify(self, connection: Connection, node: str, method: str, params: bytes) -> None:
        """Forward a notification (``dispatchAction``, ``unsubscribe``) to ``node``, in order
        with what this connection forwarded before."""
        ...

    async def resource(self, connection: Connection, method: str, params: bytes) -> bytes | None:
        """A file request (:data:`RESOURCES`, ``params`` encoded, 1.0) answered by the node
        serving its paths, as :meth:`request`; ``None``: this node serves them (or nobody
        does: this node refuses them). Raises ``ProtocolError`` (-32603) when the nodes
        serving a path are not answering, or no node serves both paths of a copy or move."""
        ...

    async def caught_up(self, seq: int) -> bool:
        """Wait (bounded) until this node has delivered ``seq``; False if it did not."""
        ...

    async def client(self, client_id: str) -> tuple[str, str | None] | None:
        """A client another node remembers (its version and user), for ``reconnect`` here."""
        ...

    async def catalogue(self) -> None:
        """Read the whole catalogue again (sessions made or disposed on other nodes)."""
        ...

    def forget(self, connection: Connection) -> None:
        """``connection`` closed: close what was opened on other nodes for it."""
        ...
