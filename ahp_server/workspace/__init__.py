"""The workspace around a chat: path confinement and the processes it runs (layer: workspace).

Below agents and host, above protocol: both the ACP bridge and the host's
commands use it; it knows nothing of either.
"""
