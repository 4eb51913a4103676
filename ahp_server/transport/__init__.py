"""Transports that carry AHP frames to the host (layer: transport)."""
