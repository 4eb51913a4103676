"""Prometheus text exposition of the host's counters and gauges (``GET /metrics``).

Layer: host. Counting happens where it is cheap (an integer increment, never
per-subscriber work); this module only reads the numbers when scraped.
"""

from __future__ import annotations

import asyncio

from ahp_server.host.core.looplag import Durations
from ahp_server.host.host import Host

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(host: Host) -> str:
    """The current metrics in the Prometheus text format 0.0.4."""
    hub = host.hub
    store = host.store
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{labels} {value:g}")

    depths = [
        host.root.inbox.qsize(),
        *(a.inbox.qsize() for a in host.sessions.values()),
        *(a.inbox.qsize() for a in host.chats.values()),
    ]
    metric("ahp_connections", "gauge", "Open client connections.", [("", len(host.connections))])
    metric(
        "ahp_subscriptions",
        "gauge",
        "Channel subscriptions over all connections.",
        [("", sum(len(c.subscriptions) for c in host.connections))],
    )
    metric(
        "ahp_actions_total",
        "counter",
        "Actions applied and published, by channel type.",
        [
            (f'{{channel_type="{kind}"}}', count)
            for kind, count in sorted(hub.published_by_kind().items())
        ],
    )
    metric(
        "ahp_rejections_total",
        "counter",
        "Client actions rejected.",
        [("", host.counters.rejected)],
    )
    metric(
        "ahp_reconnects_total",
        "counter",
        "Reconnects, by how they were resumed.",
        [
            ('{result="replay"}', host.counters.reconnect_replay),
            ('{result="snapshot"}', host.counters.reconnect_snapshot),
        ],
    )
    metric(
        "ahp_slow_consumer_disconnects_total",
        "counter",
        "Connections closed because their outbox overflowed (1013).",
        [("", host.counters.slow_consumers)],
    )
    budget = host.outbox_budget
    metric(
        "ahp_outbox_bytes",
        "gauge",
        "Bytes queued for clients (every outbox, and batches being written): now and the peak.",
        [('{stat="now"}', budget.used), ('{stat="peak"}', budget.peak)],
    )
    metric(
        "ahp_outbox_budget_bytes",
        "gauge",
        "The host-wide outbox budget (limits.outbox_total_bytes).",
        [("", budget.limit or 0)],
    )
    metric(
        "ahp_outbox_evictions_total",
        "counter",
        "Connections closed (1013) to keep the outboxes within the budget, slowest first.",
        [("", budget.evictions)],
    )
    lag = host.loop_lag

    def histogram(name: str, help_text: str, series: list[tuple[str, Durations]]) -> None:
        """A Prometheus histogram per label set (``'generation="2",'`` or ``""``)."""
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} histogram")
        for labels, durations in series:
            for bound, count in durations.cumulative():
                lines.append(f'{name}_bucket{{{labels}le="{bound}"}} {count}')
            sample = f"{{{labels.rstrip(',')}}}" if labels else ""
            lines.append(f"{name}_sum{sample} {durations.sum:g}")
            lines.append(f"{name}_count{sample} {durations.count}")

    histogram(
        "ahp_event_loop_lag_seconds",
        "How late the event loop woke a ticker due every 10 ms: time it spent on "
        "something else, or its thread waited for a CPU.",
        [("", lag)],
    )
    metric(
        "ahp_event_loop_lag_max_seconds",
        "gauge",
        "The longest the event loop was late since the host started (its longest stall).",
        [("", lag.max)],
    )
    if lag.measures_cpu_wait:  # Linux: the loop's own share, without waits for a CPU
        histogram(
            "ahp_event_loop_stall_seconds",
            "The ticker's lateness less the time the loop's thread waited meanwhile for "
            "a CPU: what held the loop itself (its work, a blocking call, a collection).",
            [("", lag.own)],
        )
        metric(
            "ahp_event_loop_stall_max_seconds",
            "gauge",
            "The longest the event loop itself was held since the host started.",
            [("", lag.own.max)],
        )
        metric(
            "ahp_event_loop_cpu_wait_seconds_total",
            "counter",
            "Time the event loop's thread was ready to run but waited for a CPU "
            "(the machine's other work).",
            [("", lag.cpu_wait)],
        )
    histogram(
        "ahp_gc_pause_seconds",
        "How long the garbage collector ran, by generation (on the loop's thread: a "
        "stall of the loop).",
        [(f'generation="{g}",', pauses) for g, pauses in enumerate(lag.gc.generations)],
    )
    metric(
        "ahp_gc_pause_max_seconds",
        "gauge",
        "The longest garbage collection since the host started, by generation.",
        [(f'{{generation="{g}"}}', p.max) for g, p in enumerate(lag.gc.generations)],
    )
    metric(
        "ahp_turnstile_held_total",
        "counter",
        "Times work that became ready at once (turns' actions, clients' frames) was held "
        "for a later turn of the event loop, to keep each turn short.",
        [("", host.turnstile.held)],
    )
    commits = getattr(store, "commits", 0)
    seconds = getattr(store, "commit_seconds", 0.0)
    metric("ahp_persist_commits_total", "counter", "Store transactions committed.", [("", commits)])
    metric(
        "ahp_persist_seconds_total",
        "counter",
        "Time spent committing (divide by commits for the mean latency).",
        [("", seconds)],
    )
    metric(
        "ahp_persist_backlog", "gauge", "Writes queued, not yet committed.", [("", store.backlog)]
    )
    metric(
        "ahp_actor_inbox_depth",
        "gauge",
        "Messages waiting in actor inboxes: total and the deepest one.",
        [
            ('{stat="total"}', sum(depths)),
            ('{stat="max"}', max(depths)),
        ],
    )
    metric("ahp_loaded_chats", "gauge", "Chats loaded in memory.", [("", len(host.chats))])
    metric(
        "ahp_tasks",
        "gauge",
        "asyncio tasks alive in the host's event loop (writers, actors, agents, timers).",
        [("", len(asyncio.all_tasks()))],
    )
    metric("ahp_server_seq", "gauge", "The last serverSeq assigned.", [("", hub.server_seq)])
    for source in host.metric_sources:
        for name, kind, help_text, samples in source():
            metric(name, kind, help_text, samples)
    return "\n".join(lines) + "\n"
