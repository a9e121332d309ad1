"""Fixtures for the herdr plugin: short tmp dirs, in-process emulators, drivers, raw requests."""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

import pytest
from orcr_herdr.driver import HerdrDriver
from orcr_herdr.paths import session_socket
from orcr_testing.herdr.emulator import Emulator

from orcr_core.config import DEFAULTS, Config


@pytest.fixture
def short_tmp(monkeypatch):
    """A short dir under /tmp (AF_UNIX paths are limited to 107 bytes), set as
    XDG_CONFIG_HOME parent and ORCR_HOME so nothing touches the user's home."""
    d = Path(tempfile.mkdtemp(dir="/tmp", prefix="hd"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(d / "xdg"))
    monkeypatch.setenv("ORCR_HOME", str(d / "orcr"))
    for var in ("HERDR_SOCKET_PATH", "HERDR_SESSION", "HERDR_CLIENT_SOCKET_PATH"):
        monkeypatch.delenv(var, raising=False)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_emulator(short_tmp):
    """Start emulators on the socket herdr would use for session ``orcr``; stopped at teardown."""
    made: list[Emulator] = []

    def make(**kwargs) -> Emulator:
        kwargs.setdefault("shell", ["/bin/sh"])
        kwargs.setdefault("session", "orcr")
        sock = session_socket("orcr")
        emu = Emulator(sock, sock.parent, **kwargs)
        made.append(emu)
        return emu.start()

    yield make
    for emu in made:
        emu.stop()


@pytest.fixture
def emulator(make_emulator):
    """A strict emulator; the test fails if any message broke the schema."""
    emu = make_emulator()
    yield emu
    assert [(v.kind, v.errors) for v in emu.violations] == []


@pytest.fixture
def emulator09(make_emulator):
    """A strict herdr 0.9.3 emulator (protocol 22, validated against the 0.9 schema)."""
    emu = make_emulator(protocol=22)
    yield emu
    assert [(v.kind, v.errors) for v in emu.violations] == []


@pytest.fixture
def config_factory():
    return make_config


def make_config(**herdr) -> Config:
    """A config on the session ``orcr`` (``session=""`` gives the instance default)."""
    data = copy.deepcopy(DEFAULTS)
    herdr.setdefault("session", "orcr")
    data["herdr"].update(herdr)
    return Config(data, Path("/nonexistent/config.toml"))


@pytest.fixture
def driver(emulator) -> HerdrDriver:
    return HerdrDriver(make_config())
