"""The host: gateway, commands, channel kinds, registry, agent sessions, actors, turns, core.

Layer: host. Inside, imports run one way (``[tool.importlinter]`` contract
``host-rooms``); the layout shows the layers::

    gateway                      one frame in, routed by (method, channel)
    commands/ | channels/ | metrics
                                 command families; the channel kinds beyond
                                 root, session and chat (terminals, resource
                                 watches, changesets); /metrics
    host                         the registry: hub, store, actors, providers
    sessions                     agent sessions: a provider's session hooks
    actors                       root, session and chat actors: each the sole
                                 writer of its state
    turns                        the turn engine: a provider's turn as chat actions
    core/                        the machinery every channel runs on: the
                                 runtime seam, the hub (serverSeq, replay,
                                 subscriptions), outboxes and their writers,
                                 mailboxes, the edge's version views, loop health
"""
