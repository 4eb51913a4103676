"""Cluster nodes: several processes sharing PostgreSQL and NATS (docs/scale-out.md).

Layer: cluster (above ``app``; only ``cli`` imports it). ``bus.py``: what
every node shares (its name, its NATS connection); ``primary.py``: the
active/passive node (one primary owns everything, the others relay);
``sharded.py``: the sharded node (each owns some sessions).
"""

from ahp_server.cluster.bus import NodeFailed, default_node_id, masked_bus
from ahp_server.cluster.primary import ClusterNode
from ahp_server.cluster.sharded import ShardedNode

__all__ = ["ClusterNode", "NodeFailed", "ShardedNode", "default_node_id", "masked_bus"]
