"""Config: defaults, durations, set keeps comments, bad values refused, ORCR_HOME."""

from __future__ import annotations

import pytest

from orcr_core import config, dirs
from orcr_core.kit.testing import until


def test_orcr_home_moves_everything(orcr_home):
    assert dirs.config_path() == orcr_home.path / "config.toml"
    assert dirs.store_path() == orcr_home.path / "store.db"
    assert dirs.socket_path() == orcr_home.path / "run" / "orcr.sock"
    assert orcr_home.run("config", "path", check=True).stdout.strip() == str(
        orcr_home.path / "config.toml"
    )


@pytest.mark.parametrize(
    "text, seconds", [("2m", 120), ("30s", 30), ("1h30m", 5400), ("250ms", 0.25), (5, 5)]
)
def test_durations(text, seconds):
    assert config.parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["2x", "m", "", "1h 30m", "-3s", True])
def test_bad_durations_say_what_is_allowed(bad):
    with pytest.raises(config.ConfigError, match="duration"):
        config.parse_duration(bad)


def test_set_keeps_comments_and_validates(orcr_home):
    path = orcr_home.path / "config.toml"
    path.write_text(
        '# my caps\n[concurrency]\nmax = 25  # RAM\nclaude = 10\n\n[driver]\nname = "test"\n'
    )
    orcr_home.run("config", "set", "concurrency.max", "3", check=True)
    orcr_home.run("config", "set", "--force", "concurrency.my_provider", "2", check=True)
    orcr_home.run("config", "set", "tmux.socket", "x", check=True)
    orcr_home.run("config", "set", "timings.max_starting", "90s", check=True)
    orcr_home.run("config", "set", "providers.claude.argv", '["claude", "--verbose"]', check=True)
    text = path.read_text()
    assert "# my caps" in text and "# RAM" in text
    cfg = config.load(path)
    assert cfg.cap() == 3 and cfg.cap("my_provider") == 2 and cfg.cap("claude") == 10
    assert cfg.get("tmux.socket") == "x" and cfg.duration("timings.max_starting") == 90
    assert cfg.provider_options("claude")["argv"] == ["claude", "--verbose"]
    assert orcr_home.run("config", "get", "concurrency.max", check=True).stdout.strip() == "3"


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("concurrency.max", "0", "whole number from 1 to 10,000"),
        ("concurrency.max", "lots", "whole number from 1 to 10,000"),
        ("concurrency.max", "-1", "whole number from 1 to 10,000"),  # no -- needed
        ("concurrency.max", "99999999999999999999999", "whole number from 1 to 10,000"),
        ("concurrency.claude", "20000", "whole number from 1 to 10,000"),
        ("events.retention", "0", "whole number from 1 to 100,000,000"),
        ("timings.max_starting", "0", "duration from 1s to 1d"),
        ("timings.poll_every", "1ms", "duration from 10ms to 1h"),
        ("timings.poll_every", "-5s", "not a duration"),
        ("timings.prompt_confirm", "2h", "duration from 100ms to 1m"),
        ("tmux.binary", '""', "non-empty string"),
        ("driver.name", "nosuch", "is not installed; use one of: auto, herdr, test, tmux"),
        ("agent.provider", "cladue", "did you mean claude?"),
        ("concurrency.Bad-Name", "3", "unknown config key"),
        ("timings.max_starting", "soon", "not a duration"),
        ("driver.name", '"Tmux!"', "[a-z0-9_]+"),
        ("nosuch.key", "1", "unknown config key"),
        ("concurency.max", "1", "did you mean concurrency.max?"),
        ("providers.codex.modle", '"x"', "did you mean providers.codex.model?"),
        ("providers.claude.allow_unpinned", "maybe", "true or false"),
    ],
)
def test_set_refuses_bad_values_and_writes_nothing(orcr_home, key, value, words):
    path = orcr_home.path / "config.toml"
    before = path.read_text()
    r = orcr_home.run("config", "set", key, value)
    assert r.returncode == 1
    assert key in r.stderr and words in r.stderr
    assert path.read_text() == before


def test_bad_file_is_named_on_load(short_tmp):
    p = short_tmp / "c.toml"
    p.write_text("[concurrency]\nmax = -1\n")
    with pytest.raises(config.ConfigError, match="concurrency.max = -1"):
        config.load(p)
    p.write_text("[concurrency\n")
    with pytest.raises(config.ConfigError, match="not valid TOML"):
        config.load(p)


def test_get_refuses_an_unknown_key_but_not_an_unset_one(orcr_home):
    r = orcr_home.run("config", "get", "timings.poll_evry")
    assert r.returncode == 1
    assert "unknown config key 'timings.poll_evry'" in r.stderr
    assert "did you mean timings.poll_every?" in r.stderr and "not set" not in r.stderr
    r = orcr_home.run("config", "get", "concurrency.claude")  # valid, no cap of its own
    assert r.returncode == 1 and "concurrency.claude is not set" in r.stderr
    r = orcr_home.run("config", "get", "timings")  # a table of known keys
    assert r.returncode == 0 and '"poll_every": "50ms"' in r.stdout
    assert orcr_home.run("config", "get", "timing").returncode == 1


def test_set_on_a_corrupted_file_says_what_get_says(orcr_home):
    path = orcr_home.path / "config.toml"
    path.write_text("[concurrency\nmax = 3\n")
    get = orcr_home.run("config", "get")
    put = orcr_home.run("config", "set", "concurrency.max", "4")
    assert get.returncode == put.returncode == 1
    assert f"{path}: not valid TOML" in put.stderr
    assert put.stderr == get.stderr and "Traceback" not in put.stderr
    assert path.read_text() == "[concurrency\nmax = 3\n"  # nothing written


def test_ranges_hold_when_loading_a_hand_edited_file(short_tmp):
    p = short_tmp / "c.toml"
    p.write_text('[timings]\npoll_every = "1ms"\n')
    with pytest.raises(config.ConfigError, match="poll_every = '1ms' is out of range"):
        config.load(p)
    p.write_text(
        '[timings]\npoll_every = "50ms"\nmax_starting = "1d"\n[concurrency]\nmax = 10000\n'
    )
    assert config.load(p).cap() == 10000  # the bounds themselves are allowed


_PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['orcr'] + sys.argv[1:]\n"
    "try:\n    runpy.run_module('orcr_core.cli', run_name='__main__')\n"
    "except SystemExit:\n    pass\n"
    "sys.stderr.write('PLUGGY=%s\\n' % ('pluggy' in sys.modules))\n"
)


@pytest.mark.parametrize(
    "args, loads",
    [
        (["config", "get", "driver.name"], False),
        (["config", "set", "concurrency.max", "3"], False),
        (["config", "set", "tmux.socket", "x"], False),
        (["config", "set", "driver.name", "test"], True),
        (["config", "set", "agent.provider", "echo"], True),
    ],
)
def test_only_setting_a_driver_or_provider_loads_plugins(orcr_home, args, loads):
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env=orcr_home.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert f"PLUGGY={loads}" in r.stderr.splitlines(), r.stderr
    assert "Error" not in r.stderr


def test_switching_the_multiplexer_is_refused_while_agents_are_live(live):
    """Changing which multiplexer server orcr drives would orphan live agents:
    refused (how many, how to drain), nothing written, the agent untouched."""
    live.start_server()
    path = live.path / "config.toml"
    live.run("agent", "run", "--provider", "echo", "--path", "m/x", "hi", check=True)
    live.run("agent", "wait", "m/x", "--timeout", "30s", check=True)
    before = path.read_text()
    key = "tmux.socket" if live.mux.kind == "tmux" else "herdr.socket"
    for k, v in ((key, str(live.path / "other.sock")), ("driver.name", "auto")):
        r = live.run("config", "set", k, v)
        assert r.returncode == 1, r.stdout
        assert f"{k} is not changed: 1 agent is live" in r.stderr
        assert "orcr agent kill '**'" in r.stderr
        assert path.read_text() == before
    same = live.run("config", "set", key, str(live.mux.socket))  # the value it has
    assert same.returncode == 0, same.stderr
    live.run("agent", "send", "m/x", "again", check=True)  # still driven, not lost
    live.run("agent", "wait", "m/x", "--timeout", "30s", check=True)
    assert live.mux.labels() == ["m/x"]
    live.stop_server()  # a stopped server does not free the panes: still refused
    r = live.run("config", "set", key, str(live.path / "other.sock"))
    assert r.returncode == 1 and "1 agent is live" in r.stderr
    live.start_server()
    live.run("agent", "kill", "m/x", check=True)
    r = live.run("config", "set", key, str(live.path / "other.sock"))
    assert r.returncode == 0, r.stderr


def test_naming_the_instances_own_socket_is_no_switch(server):
    """tmux.socket / herdr.session empty means this instance's own name: setting
    that name explicitly changes nothing and is allowed with agents live."""
    import subprocess
    import sys

    own = subprocess.run(
        [sys.executable, "-c", "from orcr_core import dirs; print(dirs.mux_name())"],
        env=server.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert own.startswith("orcr-")
    with server.sdk() as o:
        o.run("x", provider="testp", path="n/a", cwd="/")
        until(lambda: o.get("n/a")["status"] == "working")
    for key in ("tmux.socket", "herdr.session"):
        assert server.run("config", "set", key, own).returncode == 0
        r = server.run("config", "set", key, "elsewhere")
        assert r.returncode == 1 and "1 agent is live" in r.stderr
