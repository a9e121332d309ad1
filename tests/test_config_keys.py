"""Issue 20 items 28 and 29 (config set): a provider's cap needs an installed
provider (or --force), server status shows every configured cap, config unset
removes a key; a tmux.socket path needs a directory that exists."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("key, near", [("concurrency.mx", "max"), ("concurrency.claud", "claude")])
def test_a_cap_for_a_provider_that_is_not_installed_is_refused(orcr_home, key, near):
    path = orcr_home.path / "config.toml"
    before = path.read_text()
    r = orcr_home.run("config", "set", key, "3")
    assert r.returncode == 1, r
    assert "is not an installed provider" in r.stderr and f"concurrency.{near}?" in r.stderr
    assert "--force" in r.stderr and "testp" in r.stderr  # what is installed
    assert path.read_text() == before


def test_force_accepts_a_third_party_cap_and_status_shows_every_cap(server):
    server.run("config", "set", "concurrency.testp", "2", check=True)
    r = server.run("config", "set", "--force", "concurrency.later_cli", "4", check=True)
    assert r.stdout.strip() == "concurrency.later_cli = 4"
    providers = server.status()["providers"]
    assert providers["testp"] == {"live": 0, "cap": 2, "installed": True}
    assert providers["later_cli"] == {"live": 0, "cap": 4, "installed": False}
    text = server.run("server", "status", check=True).stdout
    assert "later_cli: 0/4  (not installed)" in text and "testp: 0/2" in text


def test_config_unset_removes_a_key_and_its_default_applies(server):
    path = server.path / "config.toml"
    server.run("config", "set", "concurrency.max", "3", check=True)
    server.run("config", "set", "concurrency.testp", "2", check=True)
    assert server.status()["caps"]["max"] == 3
    r = server.run("config", "unset", "concurrency.max", check=True)
    assert r.stdout.strip() == "concurrency.max unset (was 3)"
    r = server.run("config", "unset", "concurrency.max", check=True)
    assert "not set in the file" in r.stdout
    assert server.status()["caps"]["max"] == 25  # the server reloaded it
    server.run("config", "unset", "concurrency.testp", check=True)
    assert "concurrency" not in json.dumps(_file_keys(path))
    r = server.run("config", "unset", "concurency.max")
    assert r.returncode == 1 and "did you mean concurrency.max?" in r.stderr


def _file_keys(path):
    import tomllib

    doc = tomllib.loads(path.read_text())
    return {k: v for k, v in doc.items() if v}


def test_a_tmux_socket_in_a_missing_directory_is_refused(orcr_home, short_tmp):
    missing = short_tmp / "nope" / "tmux.sock"
    r = orcr_home.run("config", "set", "tmux.socket", str(missing))
    assert r.returncode == 1, r
    assert f"the directory {missing.parent} does not exist" in r.stderr
    assert (
        "mkdir -p" in r.stderr and "tmux.socket" not in (orcr_home.path / "config.toml").read_text()
    )
    orcr_home.run("config", "set", "tmux.socket", str(short_tmp / "tmux.sock"), check=True)
    orcr_home.run("config", "set", "tmux.socket", "plainname", check=True)  # tmux -L


def test_unset_of_a_tables_last_key_removes_the_emptied_tables(orcr_home):
    """Planted: the emptied-table pruning removed -> a bare [providers.echo] stays
    (and [concurrency]), fails."""
    path = orcr_home.path / "config.toml"
    orcr_home.run("config", "set", "providers.echo.argv", '["echo", "hi"]', check=True)
    orcr_home.run("config", "set", "providers.echo.allow_unpinned", "true", check=True)
    assert "[providers.echo]" in path.read_text()
    orcr_home.run("config", "unset", "providers.echo.argv", check=True)
    assert "[providers.echo]" in path.read_text()  # still holds allow_unpinned
    orcr_home.run("config", "unset", "providers.echo.allow_unpinned", check=True)
    text = path.read_text()
    assert "echo" not in text and "[providers" not in text, text
    assert "[driver]" in text and "[timings]" in text  # the others stay as written
