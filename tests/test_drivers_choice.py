"""[driver] name: auto prefers herdr, then tmux, else a message saying how to install either."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from orcr_core.config import DEFAULTS, Config
from orcr_core.pm.drivers import NoDriver, choose_driver
from orcr_core.pm.plugins import build_registry, get_plugin_manager


def _cfg(**over):
    data = copy.deepcopy(DEFAULTS)
    for key, value in over.items():
        section, name = key.split("__")
        data[section][name] = value
    return Config(data, Path("/nonexistent"))


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.delenv("ORCR_PLUGIN_MODULES", raising=False)
    monkeypatch.setenv("ORCR_LOAD_PLUGINS", "herdr,tmux")
    return build_registry(get_plugin_manager())


def test_auto_picks_tmux_without_herdr(registry, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", os.environ["PATH"])
    factory, why = choose_driver(_cfg(herdr__binary=str(tmp_path / "no-herdr")), registry)
    assert factory.name == "tmux" and why.startswith("auto: tmux")


def test_auto_picks_herdr_when_its_binary_is_on_path(registry, tmp_path):
    from orcr_testing.herdr.shim import write_herdr_shim

    shim = write_herdr_shim(tmp_path)
    factory, why = choose_driver(_cfg(herdr__binary=str(shim)), registry)
    assert factory.name == "herdr" and "auto: herdr" in why


def test_auto_with_neither_says_how_to_install(registry, tmp_path):
    cfg = _cfg(herdr__binary=str(tmp_path / "no-herdr"), tmux__binary=str(tmp_path / "no-tmux"))
    with pytest.raises(NoDriver) as e:
        choose_driver(cfg, registry)
    assert "apt-get install tmux" in str(e.value) and "herdr" in str(e.value)


def test_forced_driver_that_cannot_run_is_named(registry, tmp_path):
    with pytest.raises(NoDriver, match="driver 'herdr' cannot run"):
        choose_driver(_cfg(driver__name="herdr", herdr__binary=str(tmp_path / "x")), registry)
    with pytest.raises(NoDriver, match="installed drivers: herdr, tmux"):
        choose_driver(_cfg(driver__name="screen"), registry)
