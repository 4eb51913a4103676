"""The host: gateway, commands, registry, agent sessions, actors, turns, hub (layer: host).

Inside, imports run one way (``[tool.importlinter]`` contract ``host-rooms``)::

    gateway → commands | metrics → host → sessions → actors → turns → runtime
        → sequencer → fanout | mailbox
"""
