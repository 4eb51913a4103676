"""Protocol 1.0: its wire types (generated) and the reducers every 1.0 peer runs.

Layer: protocol (pure). ``types`` is generated from ``../shared/spec-1.0`` by
``.ci/gen_types.py``; ``reducers`` port the 1.0 semantics
(``shared/spec-1.0/REDUCER-CHANGES.md``). The 0.7 modules beside this package
stay what a 0.7 client computes.
"""
