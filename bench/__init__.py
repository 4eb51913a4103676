"""Benchmarks for ahp-server (run as modules, e.g. ``python -m bench.persistence``).

They print figures and write JSON under ``bench/results/``; they never assert
on timings. See ``bench/README.md``.
"""
