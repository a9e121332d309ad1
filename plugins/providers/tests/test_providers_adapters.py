"""EchoProvider and CommandProvider against the contracts, and their registration."""

from __future__ import annotations

import sys

import orcr_providers
import pytest
from orcr_providers import plugin as providers_plugin
from orcr_providers.command import CommandProvider
from orcr_providers.echo import EchoProvider
from orcr_providers.echo_reader import EchoTranscriptReader

from orcr_core.contracts import LaunchSpec, Provider, ProviderError, SessionPointer
from orcr_core.pm.plugins import build_registry, get_plugin_manager


def _spec(tmp_path, **options) -> LaunchSpec:
    return LaunchSpec(
        uuid="u", path="a/b", cwd=str(tmp_path), data_dir=str(tmp_path), options=options
    )


def test_both_register_through_the_hook():
    pm = get_plugin_manager(load=False)
    pm.register(providers_plugin, name="providers")
    reg = build_registry(pm)
    assert set(reg.providers) == {"echo", "command"}
    for provider in reg.providers.values():
        assert isinstance(provider, Provider)


def test_echo_launch(tmp_path):
    echo = EchoProvider()
    path = str(tmp_path / "echo.jsonl")
    assert echo.launch_argv(_spec(tmp_path)) == [
        sys.executable,
        "-m",
        "orcr_providers.echo_agent",
        "--transcript",
        path,
    ]
    assert echo.launch_argv(_spec(tmp_path, argv=["py", "-m", "x"])) == [
        "py",
        "-m",
        "x",
        "--transcript",
        path,
    ]
    pointer = echo.launch_session(_spec(tmp_path))
    assert pointer == SessionPointer(source="orcr", kind="path", value=path)
    assert echo.locate_transcript(pointer, _spec(tmp_path)) is None
    (tmp_path / "echo.jsonl").write_text("")
    assert echo.locate_transcript(pointer, _spec(tmp_path)) == path
    assert isinstance(echo.open_reader(path), EchoTranscriptReader)


def test_echo_versions():
    echo = EchoProvider()
    assert echo.supported_versions == ">=0.1,<0.2"
    assert echo.check_version(orcr_providers.__version__, {}) is None
    assert echo.check_version(None, {}) is None
    with pytest.raises(ProviderError) as err:
        echo.check_version("0.2.0", {})
    assert err.value.code == "unsupported_provider_version"
    assert "allow_unpinned" in echo.check_version("0.2.0", {"allow_unpinned": True})


def test_command_uses_the_configured_argv(tmp_path):
    command = CommandProvider()
    assert command.has_transcript is False
    assert command.launch_argv(_spec(tmp_path, argv=["htop", "-d", "5"])) == ["htop", "-d", "5"]
    assert command.launch_session(_spec(tmp_path)) is None
    pointer = SessionPointer(source="orcr", kind="path", value=str(tmp_path))
    assert command.locate_transcript(pointer, _spec(tmp_path)) is None
    assert command.check_version("anything", {}) is None


def test_command_without_argv_names_the_config_key(tmp_path):
    with pytest.raises(ProviderError) as err:
        CommandProvider().launch_argv(_spec(tmp_path))
    assert "[providers.command] argv" in str(err.value)
    with pytest.raises(ProviderError):
        CommandProvider().launch_argv(_spec(tmp_path, argv="htop -d 5"))


def test_command_has_no_reader(tmp_path):
    with pytest.raises(ProviderError, match="no transcript"):
        CommandProvider().open_reader(str(tmp_path / "x"))


def test_an_echo_agent_starts_without_the_plugin_machinery():
    """``python -m orcr_providers.echo_agent`` imports the package first: its hook lives
    in ``orcr_providers.plugin``, so an echo agent's start loads no pluggy (~15 ms of
    every agent start in the suite). Planted: the hook back in ``__init__`` -> fails."""
    import subprocess

    code = "import sys, orcr_providers.echo_agent; print(sorted(m for m in ('pluggy', 'orcr_core.hookspecs') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
