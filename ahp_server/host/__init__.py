"""The host: actors, sequencing, fan-out, the gateway and commands (layer: host, asyncio)."""
