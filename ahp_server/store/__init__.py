"""Persistence: the store interface (``base``) and the embedded SQLite store (layer: store)."""
