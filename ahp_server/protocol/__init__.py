"""The Agent Host Protocol as code: wire types, JSON-RPC framing, reducers, rules.

Layer: protocol (pure). Imports only the standard library and msgspec, never
the rest of ``ahp_server`` and never an I/O module (checked by
``tests/protocol/test_purity.py``).

Modules:

* :mod:`~ahp_server.protocol.types` — every 1.0 wire type (generated from the
  schemas): the shape of the host's canonical state and log.
* :mod:`~ahp_server.protocol.v0_7` — the 0.7 wire types and reducers: what a 0.7
  peer speaks and computes.
* :mod:`~ahp_server.protocol.views` — an older version's view of the canonical
  1.0 JSON, and its messages translated to 1.0.
* :mod:`~ahp_server.protocol.codec` — encode/decode with open-union support.
* :mod:`~ahp_server.protocol.jsonrpc` — JSON-RPC framing and error mapping.
* :mod:`~ahp_server.protocol.errors` — error codes and :class:`ProtocolError`.
* :mod:`~ahp_server.protocol.versions` — the protocol version table.
* :mod:`~ahp_server.protocol.reducers` — the pure 1.0 reducers of every channel kind.
* :mod:`~ahp_server.protocol.dispatch_rules` — may this client dispatch this action?
* :mod:`~ahp_server.protocol.uris` — channel URIs: built, parsed (which session a
  channel is) and normalized, in one place.
"""

from ahp_server.protocol.versions import PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION"]
