"""Issue 20 item 33: inside a scope (``ORCR_PATH``), a target is relative to it as
``agent run --path`` places one, in the CLI and the SDK; ``/path`` names a path
from the top; the full path ``run`` printed, and a uuid, still work."""

from __future__ import annotations

import pytest

from orcr_core import paths
from orcr_core.sdk.client import ServerError


def test_the_rule():
    s = "loop/r1"
    assert paths.in_scope("kid", s) == "loop/r1/kid"
    assert paths.in_scope("a/b", s) == "loop/r1/a/b"
    assert paths.in_scope("loop/r1/kid", s) == "loop/r1/kid"  # what run printed
    assert paths.in_scope("/other/x", s) == "other/x"
    assert paths.in_scope("**", s) == "loop/r1/**"
    uuid = "df72bd17-9455-4c3b-a672-16436ee6e32a"
    assert paths.in_scope(uuid, s) == uuid
    assert paths.in_scope("kid", None) == "kid" and paths.in_scope("/kid", None) == "kid"


def test_cli_verbs_inside_a_scope_find_what_run_placed(server):
    scoped = {"ORCR_PATH": "loop/r1"}
    server.run("agent", "run", "--provider", "testp", "--path", "top", check=True)
    r = server.run("agent", "run", "--provider", "testp", "--path", "kid", env=scoped, check=True)
    assert r.stdout.split()[0] == "loop/r1/kid"
    r = server.run("agent", "wait", "kid", "--timeout", "30s", env=scoped)
    assert r.returncode == 0 and r.stdout.split()[:2] == ["loop/r1/kid", "idle"], r
    r = server.run("agent", "get", "kid", "--json", env=scoped, check=True)
    assert '"path": "loop/r1/kid"' in r.stdout
    r = server.run("agent", "send", "kid", "hello", env=scoped, check=True)
    assert r.stdout.split()[0] == "loop/r1/kid"
    # the full printed path still works; /top names the agent outside the scope
    server.run("agent", "get", "loop/r1/kid", env=scoped, check=True)
    r = server.run("agent", "get", "/top", "--json", env=scoped, check=True)
    assert '"path": "top"' in r.stdout
    # a name not in the scope says how it was read and how to name the top
    r = server.run("agent", "get", "top", env=scoped)
    assert r.returncode == 3 and "'loop/r1/top'" in r.stderr and "/top" in r.stderr, r.stderr
    r = server.run("agent", "kill", "kid", env=scoped, check=True)
    assert r.stdout.split() == ["loop/r1/kid", "killed"]
    assert server.get("top")["status"] != "ended"


def test_the_sdk_reads_targets_inside_its_scope(server, monkeypatch):
    with server.sdk() as orcr:
        orcr.run(provider="testp", path="s/kid", scope=None)
        monkeypatch.setenv("ORCR_PATH", "s")
        a = orcr.wait("kid", timeout=30)
        assert a["path"] == "s/kid"
        assert orcr.get("kid")["path"] == "s/kid"
        assert [m["path"] for m in orcr.kill_matches("*")] == ["s/kid"]
        with pytest.raises(ServerError) as e:
            orcr.wait("nope", timeout=5)
        assert e.value.code == "not_found" and "/nope" in e.value.message
        monkeypatch.delenv("ORCR_PATH")
        assert orcr.get("/s/kid")["path"] == "s/kid"
