"""``orcr top --once [--json]``: one frame of the model the screen shows, for scripts."""

from __future__ import annotations

import json

import pytest

from orcr_core.kit.testing import until


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_once_prints_the_fleet_grouped_with_header_and_answers(live):
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\n[concurrency]\nmax = 2\n')
    live.start_server()
    live.run(
        "agent",
        "run",
        "--provider",
        "echo",
        "--path",
        "demo/a",
        "hello world\nsecond line",
        check=True,
    )
    live.run("agent", "wait", "demo/a", "--timeout", "30s", check=True)
    live.run(
        "agent", "run", "--provider", "echo", "--path", "demo/b", "[sleep 60] slow", check=True
    )
    live.run("agent", "run", "--provider", "echo", "--path", "other/x/c", "hi", check=True)

    def frame(*args):
        return json.loads(live.run("top", "--once", "--json", *args, check=True).stdout)

    f = until(
        lambda: (f := frame())["header"]["statuses"]["working"] == 1 and f,
        what="demo/b working, other/x/c queued",
    )
    h = f["header"]
    assert (h["queue_depth"], h["live"], h["cap"]) == (1, 2, 2)
    assert h["providers"]["echo"] == {"live": 2, "cap": None}
    assert h["driver"] == {"name": "tmux", "error": None}
    assert set(h["drift"]) >= {"lost", "repaired", "orphan_agent_panes", "unmarked_panes"}
    assert [g["name"] for g in f["groups"]] == ["demo", "other"]
    rows = {a["path"]: a for g in f["groups"] for a in g["agents"]}
    assert rows["demo/a"]["status"] == "idle" and rows["demo/a"]["turn"] == 1
    assert rows["demo/a"]["answer"] == "hello world"  # the first line of the last answer
    assert rows["other/x/c"]["status"] == "queued"
    assert f["seq"] == f["snapshot_seq"] > 0

    text = live.run("top", "--once", check=True).stdout
    assert "queue 1  live 2/2  echo 2/-" in text
    assert "demo/ (1 working, 1 idle)" in text and "other/ (1 queued)" in text
    assert any(
        ln.split()[:3] == ["demo/a", "echo", "idle"] and "hello world" in ln
        for ln in text.splitlines()
    )

    only = frame("--filter", "idle", "--sort", "status")
    assert [a["path"] for g in only["groups"] for a in g["agents"]] == ["demo/a"]
    assert only["filter"] == "idle" and only["sort"] == "status"

    live.run("agent", "kill", "demo/a", check=True)
    until(
        lambda: "demo/a" not in {a["path"] for g in frame()["groups"] for a in g["agents"]},
        what="demo/a out of the active frame",
    )
    ended = {a["path"]: a for g in frame("--all")["groups"] for a in g["agents"]}
    assert ended["demo/a"]["status"] == "ended" and ended["demo/a"]["exit_reason"] == "killed"


def test_once_flags_are_checked(orcr_home):
    r = orcr_home.run("top", "--json")
    assert r.returncode == 2 and "--json needs --once" in r.stderr
    r = orcr_home.run("top", "--once", "--sort", "size")
    assert r.returncode == 2 and "'size' is not one of" in r.stderr


def test_top_without_a_terminal_says_to_use_once(server):
    r = server.run("top")
    assert r.returncode == 1 and "orcr top --once" in r.stderr


def test_once_shows_why_the_queue_is_held(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmin_free_memory = "100000GiB"\n'
        '[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "h/a", "x", check=True)
    f = until(
        lambda: (
            (f := json.loads(orcr_home.run("top", "--once", "--json", check=True).stdout))[
                "header"
            ]["held_back"]
            and f
        ),
        what="a held-back reason",
    )
    assert "memory" in f["header"]["held_back"] and f["header"]["queue_depth"] == 1
    text = orcr_home.run("top", "--once", check=True).stdout
    assert "held back: " in text and "memory" in text.splitlines()[1]
