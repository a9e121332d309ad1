"""Pure helpers: tmux argument escaping, versions, key names, one-argument argv."""

from __future__ import annotations

import os

import pytest
from orcr_tmux.driver import safe_argv
from orcr_tmux.keys import tmux_key
from orcr_tmux.tmuxcli import Tmux, classify, no_format, parse_version, tmux_arg, version_ok

from orcr_core.contracts import DriverError


@pytest.mark.parametrize(
    "arg, sent",
    [("a", "a"), (";", "\\;"), ("x;", "x\\;"), ("x\\;", "x\\\\;"), ("a;b", "a;b"), ("", "")],
)
def test_tmux_arg(arg, sent):
    assert tmux_arg(arg) == sent


def test_argv_joins_commands_and_picks_the_socket_flag():
    assert Tmux("tmux", "orcr").argv(["a", "x;"], ["b"]) == [
        "tmux", "-u", "-f", "/dev/null", "-L", "orcr", "a", "x\\;", ";", "b",
    ]  # fmt: skip
    assert Tmux("tmux", "/tmp/s/o.sock").socket_flags == ["-S", "/tmp/s/o.sock"]


def test_no_format():
    assert no_format("/a/#{x}/##") == "/a/##{x}/####"


@pytest.mark.parametrize(
    "text, ok",
    [
        ("tmux 3.3a", True),
        ("tmux 3.2", True),
        ("tmux 3.1c", False),
        ("tmux 2.9", False),
        ("tmux 10.0", True),
        ("tmux next-3.4", True),
        ("tmux master", True),
        ("tmux openbsd-7.4", True),
        ("tmux", False),
    ],
)
def test_version_ok(text, ok):
    assert version_ok(text) is ok


def test_parse_version():
    assert parse_version("tmux 3.3a") == (3, 3)
    assert parse_version("tmux master") is None


@pytest.mark.parametrize(
    "stderr, code",
    [
        ("no server running on /tmp/tmux-0/orcr", "server_not_running"),
        ("error connecting to /tmp/x (No such file or directory)", "server_not_running"),
        ("error connecting to /tmp/x (Connection refused)", "server_not_running"),
        ("error connecting to /tmp/x (Permission denied)", "tmux_error"),
        ("can't find pane: %9", "not_found"),
        ("can't find session: =orcr-x", "not_found"),
        ("no current target", "not_found"),  # a live server holding no session
        ("duplicate session: orcr-a", "tmux_error"),
    ],
)
def test_classify(stderr, code):
    assert classify(stderr) == code


@pytest.mark.parametrize(
    "key, sent",
    [
        ("enter", (False, "Enter")),
        ("Enter", (False, "Enter")),
        ("escape", (False, "Escape")),
        ("esc", (False, "Escape")),
        ("tab", (False, "Tab")),
        ("shift+tab", (False, "BTab")),
        ("ctrl+c", (False, "C-c")),
        ("ctrl+C", (False, "C-c")),
        ("alt+enter", (False, "M-Enter")),
        ("ctrl+shift+up", (False, "C-S-Up")),
        ("up", (False, "Up")),
        ("pagedown", (False, "NPage")),
        ("f5", (False, "F5")),
        ("x", (True, "x")),
        ("+", (True, "+")),
        (";", (True, ";")),
    ],
)
def test_tmux_key(key, sent):
    assert tmux_key(key) == sent


@pytest.mark.parametrize("key", ["", "hyper+x", "ctrl+", "nonsense", "ctrl+nonsense", "\x1b"])
def test_unknown_keys_are_refused(key):
    with pytest.raises(DriverError) as err:
        tmux_key(key)
    assert err.value.code == "unknown_key"


def test_safe_argv():
    assert safe_argv(("a", "b")) == ["a", "b"]
    assert safe_argv(("my prog",)) == ["env", "--", "my prog"]
    assert safe_argv(("/x/a=b",)) == ["nice", "-n", "0", "--", "/x/a=b"]


def test_the_default_socket_is_this_instances_own(tmp_path, monkeypatch):
    """``orcr`` for the default data directory; per data directory under ORCR_HOME."""
    from orcr_tmux import TmuxDriver

    from orcr_core.config import DEFAULTS, Config

    def socket(**tmux):
        data = {k: dict(v) for k, v in DEFAULTS.items()}
        data["tmux"].update(tmux)
        return TmuxDriver(Config(data, tmp_path / "config.toml")).tmux.socket

    monkeypatch.setenv("ORCR_HOME", str(tmp_path / "a"))
    a = socket()
    monkeypatch.setenv("ORCR_HOME", str(tmp_path / "b"))
    b = socket()
    assert a != b and a.startswith("orcr-") and b.startswith("orcr-")
    monkeypatch.delenv("ORCR_HOME")
    assert socket() == "orcr"
    assert socket(socket="shared") == "shared"


def test_the_clients_environment_never_carries_the_users_tmux(monkeypatch):
    """Without ``$TMUX``/``$TMUX_PANE`` a client inherits orcr's environment as it is
    (None: no copy built per call); with either, a copy without both; a pane's PATH
    always gets a copy. Planted: ``_env`` returning None whenever ``path`` is None ->
    fails (the user's ``$TMUX`` reaches the client)."""
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    assert Tmux._env() is None
    assert Tmux._env("/p")["PATH"] == "/p"
    for name in ("TMUX", "TMUX_PANE"):
        monkeypatch.setenv(name, "/tmp/tmux-1/default,1,0")
        env = Tmux._env()
        assert env is not None and "TMUX" not in env and "TMUX_PANE" not in env
        assert env["PATH"] == os.environ["PATH"]
        monkeypatch.delenv(name)
