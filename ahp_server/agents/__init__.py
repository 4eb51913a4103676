"""Agent providers: the interface (``base``) and the built-in echo agent (layer: agents)."""
