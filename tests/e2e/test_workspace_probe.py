"""What an IDE does right after creating a session, as a client written by someone else would.

VS Code's AHP client, once a session is ready, lists the working directory,
resolves and reads a file, writes one, and opens a terminal there. This test
sends exactly those frames from a raw ``websockets`` client — plain JSON, no
code of ours on the client side — to a real host with the echo agent and a
real shell, and checks every answer against the spec's shapes (WIRE-SUMMARY
§4.1, terminal-channel.md).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import uuid
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from ahp_server.config import Settings
from tests.conftest import start_host

TIMEOUT = 10.0
ROOT = "ahp-root://"


class Probe:
    """A raw JSON-RPC client: requests by id, every notification kept."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.seqs = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []
        self.replies: dict[int, dict[str, Any]] = {}
        self.changed = asyncio.Event()
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.ws:
            message = json.loads(frame)
            if "id" in message and "method" not in message:
                self.replies[message["id"]] = message
            else:
                self.notifications.append(message)
            self.changed.set()

    async def until(self, predicate: Any, what: str) -> Any:
        async with asyncio.timeout(TIMEOUT):
            while (found := predicate()) is None or found is False:
                self.changed.clear()
                await self.changed.wait()
        assert found, what
        return found

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self.ids)
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        reply = await self.until(lambda: self.replies.get(request_id), f"reply to {method}")
        assert "error" not in reply, (method, reply)
        return reply["result"]

    async def dispatch(self, channel: str, action: dict[str, Any]) -> None:
        params = {"channel": channel, "clientSeq": next(self.seqs), "action": action}
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "method": "dispatchAction", "params": params})
        )

    def actions(self, channel: str) -> list[dict[str, Any]]:
        return [
            n["params"]["action"]
            for n in self.notifications
            if n.get("method") == "action" and n["params"]["channel"] == channel
        ]


async def test_list_read_write_and_a_terminal_right_after_creating_a_session(
    tmp_path: Path,
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "README.md").write_text("# Probe\nhello from disk\n", encoding="utf-8")
    (work / "src").mkdir()
    root_uri = work.as_uri()
    running = await start_host(Settings(terminal_shell=("/bin/sh",)))
    try:
        async with connect(running.url) as ws:
            probe = Probe(ws)
            init = await probe.call(
                "initialize",
                {
                    "channel": ROOT,
                    "protocolVersions": ["0.7.0"],
                    "clientId": "vscode-probe",
                    "initialSubscriptions": [ROOT],
                },
            )
            assert init["protocolVersion"] == "0.7.0"
            session = f"ahp-session:/{uuid.uuid4()}"
            assert (
                await probe.call(
                    "createSession", {"channel": session, "workingDirectories": [root_uri]}
                )
                is None
            )
            snapshot = (await probe.call("subscribe", {"channel": session}))["snapshot"]
            if snapshot["state"]["lifecycle"] != "ready":
                await probe.until(
                    lambda: any(a["type"] == "session/ready" for a in probe.actions(session)),
                    "session/ready",
                )

            # The explorer: list the working directory, resolve and read a file.
            listed = await probe.call("resourceList", {"channel": ROOT, "uri": root_uri})
            entries = {e["name"]: e["type"] for e in listed["entries"]}
            assert entries == {"README.md": "file", "src": "directory"}
            readme = f"{root_uri}/README.md"
            resolved = await probe.call("resourceResolve", {"channel": ROOT, "uri": readme})
            assert resolved["type"] == "file"
            assert resolved["size"] == len("# Probe\nhello from disk\n")
            read = await probe.call("resourceRead", {"channel": ROOT, "uri": readme})
            assert read["encoding"] == "utf-8"
            assert read["data"] == "# Probe\nhello from disk\n"
            # An editor save, then the explorer sees the new file.
            await probe.call(
                "resourceWrite",
                {
                    "channel": ROOT,
                    "uri": f"{root_uri}/src/main.py",
                    "data": base64.b64encode(b"print('hi')\n").decode(),
                    "encoding": "base64",
                },
            )
            assert (work / "src" / "main.py").read_bytes() == b"print('hi')\n"
            src = await probe.call("resourceList", {"channel": ROOT, "uri": f"{root_uri}/src"})
            assert src["entries"] == [{"name": "main.py", "type": "file"}]

            # The integrated terminal, in the working directory.
            terminal = f"ahp-terminal:/{uuid.uuid4()}"
            claim = {"kind": "client", "clientId": "vscode-probe"}
            assert (
                await probe.call(
                    "createTerminal",
                    {"channel": terminal, "claim": claim, "cwd": root_uri, "cols": 100, "rows": 30},
                )
                is None
            )
            listed_terminals = [
                t["resource"]
                for a in probe.actions(ROOT)
                if a["type"] == "root/terminalsChanged"
                for t in a["terminals"]
            ]
            assert terminal in listed_terminals
            state = (await probe.call("subscribe", {"channel": terminal}))["snapshot"]["state"]
            assert (state["cwd"], state["cols"], state["rows"]) == (root_uri, 100, 30)
            await probe.dispatch(
                terminal, {"type": "terminal/input", "data": "echo probe-$((2+3)); pwd\n"}
            )

            def output() -> str:
                return "".join(
                    a["data"] for a in probe.actions(terminal) if a["type"] == "terminal/data"
                )

            await probe.until(lambda: "probe-5" in output(), "the command's output")
            await probe.until(lambda: str(work.resolve()) in output(), "pwd in the project")
            assert await probe.call("disposeTerminal", {"channel": terminal}) is None
            probe.reader.cancel()
    finally:
        await running.stop()
