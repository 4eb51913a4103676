"""The configured roots (``ahp_server/workspace/roots.py``; docs/workspace.md "Roots"):
defaults per mode, the places refused always, the checks and their messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from ahp_server.config import ConfigError, Settings, UserConfig, load_settings
from ahp_server.workspace.paths import PathInvalid, PathOutside, confine_path
from ahp_server.workspace.roots import SESSION_FOLDERS, Roots

ALICE = UserConfig(name="alice", token="a" * 16)
BOB = UserConfig(name="bob", token="b" * 16)


def test_the_default_is_the_home_directory_only_when_single_user_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Roots.from_settings(Settings()).default == (str(tmp_path),)
    # Reachable from elsewhere, or shared by users: nothing unless configured.
    assert Roots.from_settings(Settings(host="0.0.0.0", token="t" * 16)).default == ()
    assert Roots.from_settings(Settings(users=(ALICE,))).default == ()
    assert Roots.from_settings(Settings(users=(ALICE,))).allowed("alice") == ()


def test_configured_roots_replace_the_default_and_users_have_their_own(tmp_path: Path) -> None:
    shared, own = tmp_path / "shared", tmp_path / "alice"
    alice = UserConfig(name="alice", token="a" * 16, roots=(str(own),))
    roots = Roots.from_settings(Settings(users=(alice, BOB), workspace_roots=(str(shared),)))
    assert roots.allowed("alice") == (str(own),)
    assert roots.allowed("bob") == (str(shared),)  # no roots of his own: workspace.roots
    assert set(roots.allowed(None)) == {str(shared), str(own)}  # admins, the host
    assert roots.setting("alice") == "users[0].roots"
    assert roots.setting("bob") == "workspace.roots, or users[1].roots for this user"


def test_the_data_directory_configuration_and_token_files_are_refused_always(
    tmp_path: Path,
) -> None:
    token = tmp_path / "alice.token"
    token.write_text("a" * 20)
    config = tmp_path / "ahp.toml"
    config.write_text(
        f'[workspace]\nroots = ["{tmp_path}"]\n[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        f'[[users]]\nname = "alice"\ntoken_file = "{token}"\n'
    )
    roots = Roots.from_settings(load_settings(config, environ={}))
    for place in ("/proc", "/sys", "/dev", str(tmp_path / "data"), str(config), str(token)):
        assert place in roots.forbidden
    # The root holds them: it is allowed; what lies in them is not.
    assert roots.check_directory(tmp_path.as_uri(), "alice") == str(tmp_path)
    with pytest.raises(PathOutside, match="never serves"):
        roots.check_directory((tmp_path / "data" / "x").as_uri(), "alice")
    with pytest.raises(PathOutside, match="never serves"):
        confine_path(str(tmp_path / "data" / "ahp-server.db"), [str(tmp_path)], roots.forbidden)
    with pytest.raises(PathOutside, match="never serves"):
        confine_path(str(token), [str(tmp_path)], roots.forbidden)


def test_a_working_directory_must_lie_inside_a_root_and_the_refusal_names_the_setting(
    tmp_path: Path,
) -> None:
    inside = tmp_path / "projects"
    (inside / "app").mkdir(parents=True)
    (inside / "escape").symlink_to("/etc")
    roots = Roots.from_settings(Settings(workspace_roots=(str(inside),)))
    assert roots.check_directory(str(inside / "app"), None) == str(inside / "app")
    assert roots.check_directory((inside / "app").as_uri(), None) == str(inside / "app")
    for outside in ("file:///", "/", (inside / "escape").as_uri(), f"{inside}/../..", "/proc"):
        with pytest.raises(PathOutside, match=r"workspace\.roots|never serves"):
            roots.check_directory(outside, None)
    with pytest.raises(PathInvalid):
        roots.check_directory("relative/path", None)
    with pytest.raises(PathOutside, match=r"no workspace root is configured \(set workspace"):
        Roots.from_settings(Settings(users=(ALICE,))).check_directory(str(inside), "alice")


def test_usable_keeps_only_directories_the_roots_still_allow(tmp_path: Path) -> None:
    roots = Roots.from_settings(Settings(workspace_roots=(str(tmp_path),)))
    kept = tmp_path.as_uri()
    assert roots.usable(["file:///", kept, "/etc", "ahp-session:/x", str(tmp_path)], None) == [
        kept,
        str(tmp_path),
    ]


def test_a_session_without_a_working_directory_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    roots = Roots.from_settings(Settings(workspace_roots=(str(tmp_path), "/elsewhere")))
    first = roots.session_folder("0b1c/../weird id", None)
    assert first.parent == tmp_path / SESSION_FOLDERS
    assert first.name == "0b1c_.._weird_id"
    assert first.is_dir()
    # The same name again (another id that reads the same): a folder of its own all the same.
    second = roots.session_folder("0b1c/../weird:id", None)
    assert second != first
    assert second.is_dir()
    assert second.parent == first.parent
    with pytest.raises(PathOutside, match="no workspace root"):
        Roots.from_settings(Settings(users=(ALICE,))).session_folder("x", "alice")


def test_no_session_folder_is_made_through_an_ahp_sessions_link(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "elsewhere").mkdir(parents=True)
    outside.mkdir()
    roots = Roots.from_settings(Settings(workspace_roots=(str(root),)))
    for target in (outside, root / "elsewhere"):  # out of the root, or even inside it
        (root / SESSION_FOLDERS).symlink_to(target)
        with pytest.raises(PathOutside, match="symbolic link"):
            roots.session_folder("s1", None)
        assert list(target.iterdir()) == []
        (root / SESSION_FOLDERS).unlink()
    assert roots.session_folder("s1", None) == root / SESSION_FOLDERS / "s1"


def test_roots_in_the_configuration_are_checked(tmp_path: Path) -> None:
    config = tmp_path / "ahp.toml"
    for roots, message in (
        ('["relative"]', "not an absolute path"),
        ('["/proc/self"]', "never serves"),
        ('"/tmp"', "list of absolute paths"),
    ):
        config.write_text(f"[workspace]\nroots = {roots}\n")
        with pytest.raises(ConfigError, match=message) as caught:
            load_settings(config, environ={})
        assert caught.value.key == "workspace.roots"
    settings = load_settings(None, environ={"AHP_SERVER_WORKSPACE_ROOTS": f"~/code:{tmp_path}"})
    assert settings.workspace_roots == (str(Path("~/code").expanduser()), str(tmp_path))
