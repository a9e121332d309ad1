"""Config: defaults, durations, set keeps comments, bad values refused, ORCR_HOME."""

from __future__ import annotations

import pytest

from orcr_core import config, dirs


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
    orcr_home.run("config", "set", "concurrency.my_provider", "2", check=True)
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
        ("concurrency.max", "0", "whole number >= 1"),
        ("concurrency.max", "lots", "whole number >= 1"),
        ("concurrency.Bad-Name", "3", "unknown config key"),
        ("timings.max_starting", "soon", "not a duration"),
        ("driver.name", '"Tmux!"', "[a-z0-9_]+"),
        ("nosuch.key", "1", "unknown config key"),
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
