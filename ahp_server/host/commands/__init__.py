"""The command families: every JSON-RPC method the host answers, a module per family.

Layer: host, under the gateway and above the registry. ``dispatcher`` (the
command dispatcher: lifecycle, subscriptions, sessions and chats, turns),
``resources`` (the nine ``resource*`` commands on ``ahp-root://``) and
``moves`` (``moveChat``). They import the registry and the core, never a
channel kind nor one another's internals.
"""
