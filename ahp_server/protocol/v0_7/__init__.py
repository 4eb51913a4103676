"""Protocol 0.7: its wire types (generated) and the reducers a 0.7 peer runs.

Layer: protocol (pure). ``types`` is generated from ``../shared/spec`` by
``.ci/gen_types.py``; ``reducers`` are the 0.7.0 semantics the shared
fixtures check (``AHP_FIXTURES_DIR``). The host's own state is 1.0
(:mod:`ahp_server.protocol.types`); 0.7 is a view of it
(:mod:`ahp_server.protocol.views.v0_7`) and what our 0.7 client computes.
"""
