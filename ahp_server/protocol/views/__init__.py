"""Views: what a connection at an older protocol version sees of the one 1.0 state.

Layer: protocol (pure: no I/O, no asyncio; builtins in, builtins out).

The host keeps one canonical state and one log, both in the AHP 1.0 shape.
A connection that negotiated an older version gets a *view* of it: every
snapshot, action, notification and command result it receives is projected
from the 1.0 wire JSON at the edge, and everything it sends is translated into
1.0 before the host looks at it. A view is pure code over the JSON builtins
``msgspec.json.decode`` gives (dicts, lists, str, int, float, bool, None); it
never holds a second copy of any state, never mutates its input, never raises
on peer data, and returns its input object itself when nothing changes, so a
caller can skip re-encoding.

One module per version, each one table from 1.0 type name to projection:

* :mod:`~ahp_server.protocol.views.v0_7` — the 0.7.0 view (also served to the
  0.6.0/0.5.x rows of :data:`~ahp_server.protocol.versions.FULL_TABLE`).
"""
