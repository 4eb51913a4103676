"""The machinery every channel runs on, whatever its kind (layer: host, its bottom).

``runtime`` (what an actor needs of its host) → ``sequencer`` (the hub: one
``serverSeq``, replay buffers, subscriptions) → ``fanout`` (per-connection
outboxes and their writers) | ``mailbox`` (actor inboxes) | ``edge`` (each
connection's version view) | ``looplag`` (event-loop lag and collector pauses).
Nothing here imports the host above it.
"""
