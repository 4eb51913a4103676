"""The docs a user reads hold to the code: commands parse, links resolve, quoted errors
are the host's own words, the quickstart runs as written against a real host, and the
memory bound docs/reliability.md states is the one its test holds a host to."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import websockets

import ahp_server
from ahp_server.cli import _chat_arguments_problem, build_parser
from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.protocol.types import RootState
from ahp_server.transport.websocket import READ_AHEAD_FRAMES
from tests.agents.openai_server import MODEL, OpenAIServer
from tests.conftest import TEST_ROOTS
from tests.docs_recipes import recipe
from tests.e2e.helpers import Daemon, http_get
from tests.e2e.test_cli import SCRIPTED, run_cli
from tests.e2e.test_memory_budget import MIB, PER_CONNECTION, READERS, stated_worst_case

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTART = DOCS / "quickstart.md"
TROUBLESHOOTING = DOCS / "troubleshooting.md"


def pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), ROOT / "README.md", ROOT / "bench" / "README.md"]


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def fenced(text: str, language: str | None = None) -> list[str]:
    """The fenced blocks of ``text`` (of ``language`` only, when given), in order."""
    return [m[2] for m in _FENCE.finditer(text) if language is None or m[1] == language]


def prose(text: str) -> str:
    """``text`` without its fenced blocks."""
    return _FENCE.sub("", text)


# -- every command line parses ----------------------------------------------------------------

#: The commands of the CLI and the actions of ``sessions``, as the parser has them.
_COMMANDS = ("serve", "check-config", "backup", "chat", "sessions")
_ACTIONS = ("list", "archive", "unarchive", "read", "unread", "move", "rename", "delete")
_NAMES = {*_COMMANDS, *_ACTIONS, "changes"}
#: The top-level flags (``ahp-server --port 0`` is ``serve``).
_FLAGS = ("-h", "--help", "--version", "--config", "--host", "--port", "--data-dir")
_FLAGS += ("--durability", "--log-format", "--log-level")
_INVOCATION = re.compile(r"(?:^|(?<=[\s(|;&]))(?:[\w./-]*/)?ahp-server\s+(.*)")


def command_lines(text: str) -> Iterator[str]:
    """Each ``ahp-server …`` command line of a page: every line of its fenced blocks and
    every inline code span of its prose (headings aside). Not one: a synopsis
    (``[-h]``, ``[--json]``, ``archive|unarchive``), a bare name (``ahp-server backup``
    in a sentence), ``ahp-server`` after an option (``--name ahp-server``) or followed by
    anything but a command or a top-level flag (a container's name, a sentence)."""
    blocks = [block.replace("\\\n", " ") for block in fenced(text)]  # continued lines
    candidates = [line for block in blocks for line in block.splitlines()]
    sentences = re.sub(r"^#.*$", "", prose(text), flags=re.M)
    spans = re.findall(r"`([^`\n]+)`", sentences)
    for candidate, span in [(c, False) for c in candidates] + [(c, True) for c in spans]:
        rest = candidate
        while (match := _INVOCATION.search(rest)) is not None:
            before = rest[: match.start()].split()
            rest = match[1]
            words = rest.split()
            if before and before[-1].startswith("-"):
                continue  # the value of an option: a container's name
            if not words or (words[0] not in _COMMANDS and words[0] not in _FLAGS):
                continue  # a name: of a container, in a sentence
            line = re.split(r"\s(?:\||&&|;|#)\s?", rest)[0].strip()
            synopsis = "[" in line or re.search(r"\w\|\w", line)
            if not synopsis and not (span and set(line.split()) <= _NAMES):
                yield line
            break


def parse(line: str) -> str | None:
    """What the real parser says of ``ahp-server LINE``: None when it takes it."""
    # $(…) is the shell's: one word here.
    try:
        words = shlex.split(re.sub(r"\$\([^)]*\)", "X", line))
    except ValueError as error:
        return f"not one shell command line: {error}"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(words)
    except SystemExit as leaving:
        return None if leaving.code == 0 else stderr.getvalue().strip() or "exit"
    if args.command == "chat":
        return _chat_arguments_problem(args)
    return None


def test_the_extraction_finds_command_lines_and_skips_synopses() -> None:
    text = (
        "Run `ahp-server chat --cwd DIR` or `.venv/bin/ahp-server serve --port 0`.\n"
        "`docker exec ahp-server ahp-server backup /data/b.db`; ahp-server is a host.\n"
        "`ahp-server backup` copies; `docker run --name ahp-server --rm ahp-server -c x`\n"
        "## `ahp-server sessions move`\n"
        "```sh\ngit diff | ahp-server chat --agent claude   # stdin\n"
        "ahp-server sessions --json | jq .\nahp-server sessions archive|unarchive CHAT\n"
        "ahp-server serve [-h] [--config CONFIG]\n```\n"
    )
    assert list(command_lines(text)) == [
        "chat --agent claude",
        "sessions --json",
        "chat --cwd DIR",
        "serve --port 0",
        "backup /data/b.db",
    ]
    assert parse("chat --cwd DIR") is None
    assert parse("chat --no-such-flag") is not None
    assert parse("chat --session 3f2a --agent claude") is not None  # a usage error
    assert parse("backup /backups/ahp-$(date +%F).db") is None


def test_every_command_line_in_the_docs_parses_with_the_real_cli() -> None:
    """docs/*.md and the READMEs: each ``ahp-server …`` line is one the CLI takes."""
    problems: list[str] = []
    checked = 0
    for page in pages():
        for line in command_lines(page.read_text(encoding="utf-8")):
            checked += 1
            problem = parse(line)
            if problem is not None:
                problems.append(f"{page.relative_to(ROOT)}: ahp-server {line}: {problem}")
    assert checked > 60  # the extraction still finds what the pages hold
    assert not problems, "\n".join(problems)


# -- every relative link resolves ---------------------------------------------------------------


def anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a page's headings (lower case, punctuation dropped,
    spaces to hyphens; a repeated one gets -1, -2…)."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def test_the_anchors_are_githubs() -> None:
    text = '# Agents\n## Models behind an OpenAI-compatible endpoint (`kind = "openai"`)\n'
    text += "### llama.cpp's server (OpenAI-compatible) — tested\n## Agents\n"
    assert anchors(text) == {
        "agents",
        "models-behind-an-openai-compatible-endpoint-kind--openai",
        "llamacpps-server-openai-compatible--tested",
        "agents-1",
    }


def test_every_relative_link_in_the_docs_resolves() -> None:
    """Each ``[text](target)`` of docs/*.md and the READMEs that is not a URL names a
    file that exists, and its ``#anchor`` a heading of that page."""
    broken: list[str] = []
    checked = 0
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(text)):
            if re.match(r"[a-z]+:", target):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif (
                anchor
                and linked.suffix == ".md"
                and anchor not in anchors(linked.read_text(encoding="utf-8"))
            ):
                broken.append(f"{where}: no heading makes #{anchor}")
    assert checked > 40
    assert not broken, "\n".join(broken)


# -- quoted errors are the code's ---------------------------------------------------------------


def _templates(source: str) -> Iterator[tuple[re.Pattern[str], int]]:
    """Each string literal of a module as a pattern (an f-string's fields match anything)
    and the number of literal characters it holds."""
    for node in ast.walk(ast.parse(source)):
        parts: list[str | None] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts = [node.value]
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                is_text = isinstance(value, ast.Constant) and isinstance(value.value, str)
                parts.append(value.value if is_text else None)  # type: ignore[attr-defined]
        if parts and parts[-1] is not None:
            parts[-1] = parts[-1].rstrip("\n")  # an HTTP body's end of line
        literal = sum(len(p) for p in parts if p is not None)
        if 12 <= literal <= 400:
            pattern = "".join(".+?" if p is None else re.escape(p) for p in parts)
            yield re.compile(pattern), literal


def _sources() -> Iterator[Path]:
    yield from Path(ahp_server.__file__).parent.rglob("*.py")
    # What the WebSocket library answers itself (a failed upgrade, a refused handshake).
    yield from Path(websockets.__file__).parent.rglob("*.py")


def quoted_errors() -> list[str]:
    """The messages troubleshooting.md quotes: every line of its ```text blocks."""
    text = TROUBLESHOOTING.read_text(encoding="utf-8")
    return [line for block in fenced(text, "text") for line in block.splitlines() if line]


def test_every_error_troubleshooting_quotes_is_in_the_code() -> None:
    """Each quoted line holds a string of the host's code (or of websockets, for what the
    library says) with at least 12 literal characters: the docs quote real messages."""
    templates = [t for path in _sources() for t in _templates(path.read_text(encoding="utf-8"))]
    quoted = quoted_errors()
    assert len(quoted) >= 10
    unknown = [q for q in quoted if not any(pattern.search(q) for pattern, _ in templates)]
    assert not unknown, "quoted, but said nowhere in the code:\n" + "\n".join(unknown)
    assert not any(p.search("the host is out of memory, please reconnect") for p, _ in templates)


# -- the quickstart runs --------------------------------------------------------------------------


def quickstart_steps() -> list[str]:
    """The quickstart's shell lines, in order."""
    text = QUICKSTART.read_text(encoding="utf-8")
    return [line for block in fenced(text, "sh") for line in block.splitlines() if line]


def quickstart_agents() -> str:
    """The quickstart's agent blocks: the llama.cpp and Claude Code recipes of docs/agents.md."""
    model, agent = fenced(QUICKSTART.read_text(encoding="utf-8"), "toml")
    assert model == recipe("llama.cpp").removeprefix("# recipe: llama.cpp\n")
    assert agent == recipe("claude-code").removeprefix("# recipe: claude-code\n")
    return model + "\n" + agent


async def test_the_quickstart_runs_against_a_real_host(tmp_path: Path) -> None:
    """Every shell line of docs/quickstart.md, in order, against a real ``ahp-server serve``
    (a free port, a temporary data directory); the Claude Code agent is the scripted ACP
    agent under the recipe's name, the one change. A line this test does not know fails it."""
    project = tmp_path / "myproject"
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n", encoding="utf-8")
    config = tmp_path / "my.toml"
    model_server = await OpenAIServer().start()
    agents = (
        quickstart_agents()
        .replace(
            'command = "claude-agent-acp"\n',
            f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SCRIPTED))}]\n",
        )
        .replace('"http://127.0.0.1:8080/v1"', json.dumps(model_server.base_url))
        .replace('model = "smollm2"', f"model = {json.dumps(MODEL)}")
    )
    model, agent = tomllib.loads(agents)["agents"]
    assert (model["base_url"], model["model"]) == (model_server.base_url, MODEL)
    assert agent["args"] == [str(SCRIPTED)]
    config.write_text(agents, encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    daemon: Daemon | None = None
    session = ""
    ran: list[str] = []
    try:
        for step in quickstart_steps():
            words = shlex.split(step)
            env = {}
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            if step.startswith("python3 -m venv"):
                assert step in readme  # the README's install, as it gives it
                continue
            if step.startswith("cd "):
                continue  # the test's project folder stands for it
            ran.append(words[1] if words[0] == "ahp-server" else words[0])
            if words[0] == "llama-server":
                assert model_server.base_url  # the test's server stands in for it, running
                continue
            if words[0] == "curl":
                assert daemon is not None
                http = daemon.url.replace("ws://", "http://")
                path = words[1].removeprefix("http://127.0.0.1:8765")
                status, _, body = await http_get(http + path)
                assert (status, body) == (200, "ok\n")
                continue
            assert words[0] == "ahp-server", f"the quickstart runs {step!r}: teach this test"
            command, args = words[1], words[2:]
            if command == "serve":
                if daemon is not None:
                    await daemon.close()
                args = [str(config) if a == "my.toml" else a for a in args]
                daemon = Daemon(tmp_path / "data", *args, env=env)
                await daemon.start()
            elif command == "check-config":
                args = [str(config) if a == "my.toml" else a for a in args]
                code, out = await run_server_command(command, *args)
                assert code == 0, out
                assert "configuration ok" in out
            else:
                assert daemon is not None, f"{step!r} before the host is started"
                args = [session if a == "SESSION" else a for a in args]
                code, out, err = await run_cli(daemon.url, command, *args, cwd=project)
                assert code == 0, f"{step}: {err}"
                if command == "sessions":
                    listed = re.findall(r"ahp-session:/([0-9a-f-]+)", out)
                    assert listed, out
                    session = listed[0][:4]
                elif "--agent" not in args:
                    assert args[-1] in out  # the echo agent answers with the message
                elif args[args.index("--agent") + 1] == "local":
                    assert "Hello there" in out  # the model server's answer to "hello"
                    assert model_server.requests[-1].body["model"] == MODEL
                else:
                    assert f"scripted: {args[-1]}" in out
                    assert "Claude Code" in await root_agents(daemon.url)
    finally:
        if daemon is not None:
            await daemon.close()
        await model_server.stop()
    assert ran == [
        "serve",
        "curl",
        "chat",
        "sessions",
        "chat",
        "llama-server",
        "serve",
        "chat",
        "check-config",
        "serve",
        "chat",
    ], ran


async def run_server_command(*args: str) -> tuple[int, str]:
    """``python -m ahp_server ARGS`` (no ``--url``: a command of the host's own), on the
    tests' workspace roots: its exit status and what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ahp_server",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "AHP_SERVER_WORKSPACE_ROOTS": os.pathsep.join(TEST_ROOTS)},
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def root_agents(url: str) -> list[str]:
    """The display names of the agents a host offers."""
    async with AhpClient.connect(url, subscriptions=["ahp-root://"]) as client:
        return [a.display_name for a in client.confirmed("ahp-root://", RootState).agents]


# -- what reliability.md states holds to the code and its test ----------------------------------


def test_reliability_states_the_memory_bound_its_test_holds_a_host_to() -> None:
    """docs/reliability.md "Memory": the worst case for the default limits, as written,
    is the sum tests/e2e/test_memory_budget.py holds a real host under."""
    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    memory = text.split("## Memory")[1].split("\n## ")[0]
    found = re.search(
        r"For (\d+) connections sending small messages that is (\d+) \+ (\d+) \+ (\d+) = "
        r"([\d,]+) MiB",
        " ".join(memory.split()),
    )
    assert found is not None, "reliability.md no longer states the worst case for N connections"
    connections, queued, answer, own, total = (int(g.replace(",", "")) for g in found.groups())
    settings = Settings()
    assert connections == READERS
    assert queued * MIB == settings.outbox_total_bytes
    assert answer * MIB == 2 * settings.outbox_max_bytes
    assert own * MIB == connections * PER_CONNECTION
    assert total * MIB == stated_worst_case(settings, connections)
    assert f"`READ_AHEAD_FRAMES` + 1 = {READ_AHEAD_FRAMES + 1} messages" in " ".join(memory.split())
