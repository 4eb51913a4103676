"""The channel kinds beyond root, session and chat: each its actor, URI scheme and commands.

Layer: host, above the registry (``ahp_server.host.host``) and beside the
command families; the gateway wires them in. ``terminals``
(``ahp-terminal:/<id>``: shells on a pty, agents' commands), ``watches``
(``ahp-resource-watch:/<id>``), ``changesets`` (``ahp-changeset:``: the files
each turn changed). None imports another, nor the commands.
"""
