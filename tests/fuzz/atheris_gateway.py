"""Coverage-guided fuzzing of the JSON-RPC layer with atheris (libFuzzer).

Issue 16 item 3 ("atheris where it helps"). Run it by hand, never in CI::

    .venv/bin/pip install -e ".[atheris]"
    .venv/bin/python -m tests.fuzz.atheris_gateway -max_total_time=300 -print_final_stats=1

Any libFuzzer flag may follow (``-runs=N``, ``-jobs``, a corpus directory).
Without a corpus directory it writes a seed corpus of valid frames for every
method (``tests/fuzz/gateway_fuzz.py``'s generator) into a temporary one.

Every input is one frame (its bytes as UTF-8 text, invalid bytes replaced, as
websockets only delivers valid text; an input starting with ``0xff`` goes as
a binary frame) fed through the real ``Gateway.handle_frame`` (which runs the
frame decoder, ``protocol/jsonrpc.py``) of a real in-memory ``Host``, on a
connection that has said ``initialize``. ``ahp_server`` is instrumented, so
libFuzzer is guided by the host's own branches. A crash is what the other
fuzzer calls a violation: an exception escaping ``handle_frame``, or a reply
that is not exactly what ``expected_reply`` (the independent reading of the
frame) says is due — one response with the request's id, one error with id
null, nothing for a notification. docs/reliability.md has the figures.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path

import atheris
import structlog

with atheris.instrument_imports(include=["ahp_server"]):
    from ahp_server.agents.echo import EchoAgent
    from ahp_server.config import Settings
    from ahp_server.host.core.fanout import Connection, ConnState
    from ahp_server.host.gateway import Gateway
    from ahp_server.host.host import Host
    from ahp_server.protocol.versions import PROTOCOL_VERSION

from tests.fuzz.gateway_fuzz import Generator, Recorder, expected_reply

#: Seeds written when no corpus directory is given.
SEEDS = 400
#: Sessions kept alive (older ones are disposed through the protocol).
MAX_SESSIONS = 24


class Harness:
    """One host, one gateway and one initialized connection, across every input."""

    def __init__(self, workdir: str) -> None:
        self.loop = asyncio.new_event_loop()
        settings = Settings(
            host="127.0.0.1",
            port=0,
            data_dir=None,
            max_terminals=4,
            terminal_shell=("/bin/cat",),
            dispatch_rate=1e9,
            dispatch_burst=1_000_000_000,
        )
        self.host = Host(settings, providers=[EchoAgent()])
        self.loop.run_until_complete(self.host.start())
        self.gateway = Gateway(self.host)
        self.workdir = workdir
        self.connection, self.recorder = self.loop.run_until_complete(self._fresh())
        self.inputs = 0

    async def _fresh(self) -> tuple[Connection, Recorder]:
        recorder = Recorder()
        connection = self.gateway.open(recorder)
        hello = {
            "jsonrpc": "2.0",
            "id": "hello",
            "method": "initialize",
            "params": {
                "channel": "ahp-root://",
                "protocolVersions": [PROTOCOL_VERSION],
                "clientId": f"atheris-{connection.id}",
            },
        }
        await self.gateway.handle_frame(connection, json.dumps(hello))
        await _drain(connection)
        recorder.frames.clear()
        return connection, recorder

    def one(self, data: bytes) -> None:
        frame: str | bytes = (
            data[1:] if data.startswith(b"\xff") else data.decode("utf-8", "replace")
        )
        self.loop.run_until_complete(self._check(frame))
        self.inputs += 1
        if self.inputs % 500 == 0:
            self.loop.run_until_complete(self._prune())

    async def _check(self, frame: str | bytes) -> None:
        connection, recorder = self.connection, self.recorder
        await self.gateway.handle_frame(connection, frame)  # nothing may escape it
        if connection.state is ConnState.CLOSING:  # closed by policy (-32005): a new one
            await self.gateway.close(connection)
            self.connection, self.recorder = await self._fresh()
            return
        await _drain(connection)
        responses = [f for f in recorder.frames if "method" not in f]
        recorder.frames.clear()
        expect, request_id = expected_reply(frame)
        if expect == "none":
            if responses:
                raise AssertionError(f"a notification was answered: {responses!r}")
        elif len(responses) != 1 or responses[0].get("id") != request_id:
            got = [r.get("id") for r in responses]
            raise AssertionError(f"expected one {expect} reply with id {request_id!r}, got {got}")
        elif expect == "error" and "error" not in responses[0]:
            raise AssertionError(f"an invalid frame got a result: {responses[0]!r}")

    async def _prune(self) -> None:
        """Keep the host's population bounded, through the protocol."""
        await asyncio.sleep(0.01)  # let agents and actors run
        for uri in list(self.host.sessions)[:-MAX_SESSIONS]:
            dispose = {
                "jsonrpc": "2.0",
                "id": "prune",
                "method": "disposeSession",
                "params": {"channel": uri},
            }
            await self.gateway.handle_frame(self.connection, json.dumps(dispose))
        await _drain(self.connection)
        self.recorder.frames.clear()


async def _drain(connection: Connection) -> None:
    for _ in range(1000):
        if connection.queued_frames == 0:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"connection {connection.id} outbox did not drain")


def write_seeds(directory: Path, workdir: str, count: int = SEEDS) -> None:
    """Valid frames for every method (and a few of each other kind) as seed inputs."""
    generator = Generator(seed=1, corpus_size=8, workdir=workdir)
    for number in range(count):
        if number % 4 == 0:
            _, frame = generator.frame()
        else:
            frame = json.dumps(generator.valid())
        data = frame if isinstance(frame, bytes) else frame.encode("utf-8", "surrogatepass")
        (directory / f"seed-{number:04d}").write_bytes(data)


def main(argv: list[str]) -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        cache_logger_on_first_use=False,
    )
    with tempfile.TemporaryDirectory(prefix="ahp-atheris-") as workdir:
        args = list(argv)
        if not any(not a.startswith("-") for a in args[1:]):
            corpus = Path(workdir) / "corpus"
            corpus.mkdir()
            write_seeds(corpus, workdir)
            args.append(str(corpus))
        harness = Harness(workdir)

        def test_one_input(data: bytes) -> None:
            harness.one(data)

        atheris.Setup(args, test_one_input)
        atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
