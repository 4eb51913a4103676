"""Every recipe of docs/agents.md loads through the configuration loader, and check-config
reads it as the page says.

The tested recipes also answer a real turn: fast-agent in
tests/agents/test_fast_agent.py, llama.cpp's server in tests/agents/test_real_model.py.
The written ones (Ollama, Claude Code, Gemini CLI, Codex) are checked here as far
as this machine allows: their agents need accounts and networks it does not have.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_recipes import AGENTS_DOC, load_recipe, recipe, recipes
from tests.test_config import programs, run_cli

#: What each ACP recipe runs, and the install line check-config gives when it is missing
#: (the page's own install command for it).
ACP_RECIPES = {
    "claude-code": ("claude-agent-acp", "npm install -g @agentclientprotocol/claude-agent-acp"),
    "gemini": ("gemini", "npm install -g @google/gemini-cli"),
    "codex": ("codex-acp", "npm install -g @zed-industries/codex-acp"),
}


def test_the_page_has_every_recipe() -> None:
    assert set(recipes()) == {"fast-agent", "llama.cpp", "ollama", *ACP_RECIPES}


@pytest.mark.parametrize("name", sorted(recipes()))
def test_each_recipe_loads_as_one_agent(name: str, tmp_path: Path) -> None:
    settings, _ = load_recipe(recipe(name), tmp_path)
    (agent,) = settings.agents
    assert agent.display_name, "a recipe names what clients show"
    if agent.kind == "openai":
        assert agent.base_url.startswith("http://127.0.0.1:")
        assert agent.model
        assert not agent.api_key_env, "local servers take no key"
    else:
        assert agent.kind == "acp"
        assert agent.pass_env, "a recipe names the key the agent reads"


def test_the_ollama_recipe_asks_ollamas_endpoint_for_a_pulled_model(tmp_path: Path) -> None:
    settings, path = load_recipe(recipe("ollama"), tmp_path)
    (agent,) = settings.agents
    assert (agent.name, agent.kind) == ("ollama", "openai")
    assert agent.base_url == "http://127.0.0.1:11434/v1"
    page = AGENTS_DOC.read_text(encoding="utf-8")
    assert f"ollama pull {agent.model}\n" in page, "the model is named as ollama pull names it"
    result = run_cli("check-config", "--config", str(path))
    assert result.returncode == 0, result.stderr
    assert f"configuration ok ({path})" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("name", sorted(ACP_RECIPES))
def test_check_config_names_a_missing_recipe_program_and_how_to_install_it(
    name: str, tmp_path: Path
) -> None:
    command, install = ACP_RECIPES[name]
    settings, path = load_recipe(recipe(name), tmp_path)
    (agent,) = settings.agents
    assert agent.command == command
    page = AGENTS_DOC.read_text(encoding="utf-8")
    assert f"```sh\n{install}\n```" in page, "the page gives the same install command"
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_cli("check-config", "--config", str(path), env={"PATH": str(empty)})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ahp-server: agents[0].command: {command!r} is not on PATH: ")
    assert f"install it with {install}" in line
    assert 'docs/agents.md "Recipes"' in line
    # Installed (a program of that name on the host's PATH), the same recipe passes.
    result = run_cli("check-config", "--config", str(path), env={"PATH": programs(empty, command)})
    assert result.returncode == 0, result.stderr
    assert "configuration ok" in result.stdout


def test_check_config_gives_no_install_line_for_a_program_it_does_not_know(
    tmp_path: Path,
) -> None:
    text = recipe("codex", {'command = "codex-acp"': 'command = "my-own-agent"'})
    _, path = load_recipe(text, tmp_path)
    result = run_cli("check-config", "--config", str(path), env={"PATH": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "ahp-server: agents[0].command: 'my-own-agent' is not on PATH"
    ]
