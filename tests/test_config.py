"""Configuration: the shipped file, environment overrides, and errors that name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ahp_server.config import ConfigError, Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "config" / "ahp-server.toml"


def test_the_shipped_file_holds_the_built_in_defaults() -> None:
    loaded = load_settings(SHIPPED, environ={})
    assert loaded == Settings()  # every documented value is the real default


def test_environment_overrides_the_file_and_flags_override_both() -> None:
    settings = load_settings(
        SHIPPED,
        environ={
            "AHP_SERVER_HOST": "0.0.0.0",
            "AHP_SERVER_PORT": "9000",
            "AHP_SERVER_TOKEN": "s3cret",
            "AHP_SERVER_ALLOWED_ORIGINS": "https://a.example, https://b.example",
            "AHP_SERVER_DATA_DIR": "/var/lib/ahp",
            "AHP_SERVER_LOG_FORMAT": "json",
        },
        overrides={"server.port": 9100},
    )
    assert settings.host == "0.0.0.0"
    assert settings.port == 9100
    assert settings.token == "s3cret"
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    assert settings.data_dir == "/var/lib/ahp"
    assert settings.log_format == "json"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[server]\nport = 70000\n", "server.port"),
        ('[server]\nport = "http"\n', "server.port"),
        ("[server]\nallowed_origins = 'x'\n", "server.allowed_origins"),
        ('[storage]\ndurability = "sometimes"\n', "storage.durability"),
        ("[limits]\nmax_connections = 0\n", "limits.max_connections"),
        ("[server]\nhots = 'typo'\n", "server.hots"),
        ('[server]\nhost = "0.0.0.0"\n', "server.token"),
        ("not = [valid toml", "config"),
    ],
)
def test_invalid_settings_name_their_key(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == key
    assert str(caught.value).startswith(key)


def test_a_bad_environment_value_names_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"AHP_SERVER_PORT": "eighty"})
    assert caught.value.key == "server.port"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_config_accepts_the_shipped_default() -> None:
    result = run_cli("check-config", "--config", str(SHIPPED))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_serve_with_a_bad_config_exits_with_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server]\nport = -1\n", encoding="utf-8")
    result = run_cli("serve", "--config", str(path))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "server.port" in lines[0]


def test_serve_refuses_a_public_address_without_a_token() -> None:
    result = run_cli("serve", "--host", "0.0.0.0", "--data-dir", ":memory:")
    assert result.returncode != 0
    assert "server.token" in result.stderr
