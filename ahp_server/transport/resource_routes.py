"""Sharded mode: which node answers a file request (``resource*``, ``createResourceWatch``).

Layer: transport (pure: no I/O). ``transport/routing.py``'s ``Routes.resource`` reads the
nodes' rows, asks :func:`serving_node` and forwards; docs/scale-out.md "Resources"
says why it decides so.

A file lies on the disks of the nodes that declare a root holding it (their
``cluster_nodes`` row: ``workspace.roots`` and every user's ``roots``). Every node
declaring a root sees the same files there — a session moves to any node serving its
directory on takeover, so placement and takeover assume it already — so which of them
answers does not change the answer: this node when it is one of them (no hop), else the
first live one by name (the same node every time). Paths are compared as named, ``..``
folded (:func:`request_paths`): links are followed by the node that serves the path,
which confines it as for a local client (``workspace/paths.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import msgspec

from ahp_server.protocol.errors import InternalError
from ahp_server.store.ownership import Node
from ahp_server.workspace.paths import PathInvalid, file_uri_to_path, inside

__all__ = ["request_paths", "serves", "serving_node"]


class _Paths(msgspec.Struct):
    """The path parameters of the file requests (``uri``; a copy's or a move's two)."""

    uri: str | None = None
    source: str | None = None
    destination: str | None = None


_PATHS = msgspec.json.Decoder(_Paths)


def request_paths(params: bytes) -> list[str]:
    """The absolute paths ``params`` names (``uri``, or ``source`` and ``destination``),
    ``..`` folded. A value that is not a local ``file:`` URI nor an absolute path is left
    out: the node reached refuses it as it would anyway (-32602)."""
    try:
        named = _PATHS.decode(params)
    except msgspec.DecodeError:
        return []  # the handler's decoding says what is wrong
    paths: list[str] = []
    for uri in (named.uri, named.source, named.destination):
        if uri is None:
            continue
        try:
            path = uri if uri.startswith("/") else file_uri_to_path(uri)
        except PathInvalid:
            continue
        paths.append(os.path.normpath(path))
    return paths


def serves(roots: Sequence[str], path: str) -> bool:
    """Whether one of ``roots`` holds ``path``."""
    return any(inside(path, root) for root in roots)


def serving_node(
    method: str,
    paths: Sequence[str],
    me: str,
    roots: Sequence[str],
    nodes: Sequence[tuple[Node, bool]],
    alive: Callable[[str], bool],
) -> str | None:
    """The node that answers ``method`` on ``paths``; ``None``: this one (``me``, serving
    ``roots``). ``nodes``: every node's row and whether its lease is live; ``alive``:
    whether a node is answering (heard on the bus).

    ``None`` too when a path lies in no node's root: this node refuses it, as a single
    host refuses a path outside every root (-32009). -32603 (:class:`InternalError`)
    naming the path and the nodes when the only nodes serving a path are not answering,
    or when two paths (a copy's, a move's) have no node serving both.
    """
    candidates: list[set[str]] = []
    for path in paths:
        declared = [(n, live) for n, live in nodes if n.node != me and serves(n.roots, path)]
        serving = {n.node for n, live in declared if live and alive(n.node)}
        if serves(roots, path):
            serving.add(me)
        elif not declared:
            return None
        elif not serving:
            gone = ", ".join(n.node for n, _ in declared)
            where = next(r for n, _ in declared for r in n.roots if inside(path, r))
            raise InternalError(
                f"{path} lies in {where}, which only {gone} serves, not answering: "
                "try again once it is back"
            )
        candidates.append(serving)
    if not candidates:
        return None
    common = set.intersection(*candidates)
    if me in common:
        return None
    if common:
        return min(common)
    first, second = (min(c) for c in candidates[:2])
    raise InternalError(
        f"{method}: {paths[0]} is on node {first} and {paths[1]} on node {second}; "
        "no node serves both: read the file and write it instead"
    )
