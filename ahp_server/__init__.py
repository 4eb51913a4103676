"""ahp-server: a host for the Agent Host Protocol (AHP).

Layer map (imports flow one way, checked by ``lint-imports``; see
docs/architecture.md)::

    cli → cluster → app → transport → host → agents | store → protocol

``protocol`` is the pure spec as code; ``client`` uses only ``protocol``;
``config`` and ``logging`` import none of the layers they configure.
"""

__version__ = "0.1.0"
