"""Config that applies when edited (issue 38 part 4): the running server follows a hand
edit of config.toml within 2 s, ``orcr config reload`` says what changed, a bad edit
keeps the last good config in force and says why, and ``config set`` refuses a webhook
URL that would leave the webhook off."""

from __future__ import annotations

import json
import os
import time

from orcr_core.config.watch import changes
from orcr_core.kit.testing import until

BASE = '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\n'


def test_changes_names_each_leaf_that_moved():
    old = {"concurrency": {"max": 4}, "notify": {"window": "1m"}}
    new = {"concurrency": {"max": 2, "echo": 1}, "notify": {"window": "1m"}}
    assert changes(old, new) == {"concurrency.echo": [None, 1], "concurrency.max": [4, 2]}
    assert changes(new, new) == {}
    assert changes({"notify": {}}, {"notify": {"rules": {"x": {"enabled": False}}}}) == {
        "notify.rules.x.enabled": [None, False]
    }


def test_a_hand_edit_applies_and_a_bad_one_keeps_the_last_good(orcr_home):
    """Three agents under a cap of 1; raising the cap by editing the file starts the two
    queued ones with no other call; a bad edit (max = 0) leaves cap 3 in force and says
    why everywhere; reload reports a change; fixing the file clears the error.

    Planted: the config-watch thread not started -> fails (the cap stays 1).
    Planted: reload_config not keeping config_error -> fails (the bad edit is silent).
    Planted: refuse_mux_switch not called -> fails (tmux.socket applied under live agents)."""
    path = orcr_home.path / "config.toml"
    path.write_text(BASE + "[concurrency]\nmax = 1\n")
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(3):
            o.run("x", provider="testq", path=f"j/{i}", cwd="/")
        until(lambda: o.get("j/0")["status"] == "working", 10, "j/0 to work")
        assert o.get("j/2")["held"] == "cap global 1/1"
        edited = time.monotonic()
        path.write_text(BASE + "[concurrency]\nmax = 3\n")  # a plain hand edit, no CLI
        until(lambda: o.status()["caps"]["max"] == 3, 5, "the edit to apply")
        assert time.monotonic() - edited < 2.5
        until(lambda: o.get("j/2")["status"] == "working", 10, "j/2 to start under cap 3")

        path.write_text(BASE + "[concurrency]\nmax = 0\n")
        until(lambda: o.status()["config_error"], 5, "the bad edit to be noticed")
        s = o.status()
        assert s["caps"]["max"] == 3, "the last good cap stays in force"
        assert "concurrency.max" in s["config_error"]["error"]
        assert "1 to 10,000" in s["config_error"]["error"]
    r = orcr_home.run("config", "reload")
    assert r.returncode == 1 and "concurrency.max" in r.stderr and "1 to 10,000" in r.stderr
    assert "last good config" in r.stderr
    assert "config not applied" in orcr_home.run("server", "status", check=True).stdout
    doctor = orcr_home.run("doctor").stdout
    assert "config in force" in doctor and "concurrency.max" in doctor
    got = orcr_home.run("config", "get", "concurrency.max")
    assert got.returncode == 1 and "concurrency.max = 0" in got.stderr
    out = orcr_home.run("events", "--kind", "config", "--json", check=True).stdout
    evs = [json.loads(line) for line in out.splitlines()]
    kinds = [e["kind"] for e in evs]
    assert kinds.count("config.invalid") == 1, kinds  # said once, not per look
    assert any(e["data"].get("changed", {}).get("concurrency.max") == [1, 3] for e in evs)

    # the fix keeps the bad file's size, inode and mtime, so the watcher cannot tell it
    # changed: only the reload applies it (and says what changed) - no race with the watcher
    st = path.stat()
    with open(path, "r+") as f:
        f.write(BASE + "[concurrency]\nmax = 2\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = orcr_home.run("config", "reload", check=True)
    assert r.stdout == "concurrency.max: 3 -> 2\n", r.stdout
    assert orcr_home.status()["config_error"] is None
    assert "nothing changed" in orcr_home.run("config", "reload", check=True).stdout

    # a hand edit that moves orcr to another multiplexer is not applied under live agents
    path.write_text(BASE + '[concurrency]\nmax = 2\n[tmux]\nsocket = "elsewhere"\n')
    with orcr_home.sdk() as o:
        until(lambda: o.status()["config_error"], 5, "the switch to be refused")
        assert "tmux.socket changed while 3 agents are live" in o.status()["config_error"]["error"]


def test_set_refuses_a_webhook_url_that_is_not_http(orcr_home):
    """Planted: _refuse_silent_off not called -> fails (URL written, webhook silently off)."""
    before = (orcr_home.path / "config.toml").read_text()
    for bad in ("URL", "ftp://x"):
        r = orcr_home.run("config", "set", "notify.webhook.url", bad)
        assert r.returncode == 1, r.stdout
        assert "http:// or https://" in r.stderr and repr(bad) in r.stderr
    assert (orcr_home.path / "config.toml").read_text() == before
    orcr_home.run("config", "set", "notify.webhook.url", "https://example.test/h", check=True)


def test_doctor_warns_of_a_memory_floor_above_the_machines_ram(orcr_home):
    """Planted: the memory floor check left out of check_caps -> fails."""
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmin_free_memory = "1000TiB"\n')
    out = orcr_home.run("doctor").stdout
    assert "memory floor" in out and "no agent is ever promoted" in out, out
