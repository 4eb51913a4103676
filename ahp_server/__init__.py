"""ahp-server: a host for the Agent Host Protocol (AHP).

Layer map (imports flow one way, see docs/architecture.md): ``protocol`` is the
pure spec as code; everything else (host, transport, store, agents, cli) builds
on it and is never imported by it.
"""

__version__ = "0.1.0"
