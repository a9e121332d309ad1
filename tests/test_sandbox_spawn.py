"""Agents spawning agents stay inside (issue 36, item 5): a sandboxed agent reaches orcr
through a socket of its own, the server knows it by that socket, and every agent it
starts (and they start) is sandboxed and no wider than its parent.

The rule itself (:func:`orcr_core.sandbox.inherit.narrow`) is tested directly; one
end-to-end test runs the real ``orcr`` CLI inside a sandboxed command agent on a real
pane (tmux, the herdr emulator).
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from orcr_core.kit.testing import until
from orcr_core.sandbox import SandboxError, bwrap, inherit

PARENT = {
    "uuid": "p-uuid",
    "path": "team/lead",
    "provider": "claude",
    "cwd": "/w/app",
    "allow_read": ["/opt/ref"],
    "allow_write": ["/w/cache"],
    "deny_read": ["/h/.ssh"],
    "hide": ["/h/.orcr"],
    "allow_net": ["api.anthropic.com", "127.0.0.1:8080"],
    "pass_env": ["GITHUB_TOKEN"],
    "state": ["/h/.claude/"],
    "env": ["ANTHROPIC_API_KEY"],
    "lineage": ["g-uuid"],
}


def _narrow(**kw):
    args = dict(
        requested=None, allow_net=None, source_cwd="/w/app/sub", provider="claude",
        state=["/h/.claude/"], env=["ANTHROPIC_API_KEY"], deny_read=["/h/secret"],
        hide=["/h/.orcr"], env_allow=("PATH", "HOME"),
    )  # fmt: skip
    args.update(kw)
    return inherit.narrow(PARENT, **args)


def test_child_inherits_the_parents_lists():
    """Nothing asked: the parent's lists, its deny list plus the config's, the lineage.
    Planted: deny_read not carrying the parent's -> fails."""
    child = _narrow()
    assert child["allow_net"] == PARENT["allow_net"]
    assert child["allow_write"] == ["/w/cache"] and child["pass_env"] == ["GITHUB_TOKEN"]
    assert child["deny_read"] == ["/h/.ssh", "/h/secret"]
    assert child["parent"] == "p-uuid" and child["lineage"] == ["g-uuid", "p-uuid"]
    assert _narrow(allow_net=["127.0.0.1:8080"])["allow_net"] == ["127.0.0.1:8080"]
    assert _narrow(allow_net=["api.anthropic.com:443"])["allow_net"]  # a host allows 443


@pytest.mark.parametrize(
    "kw, named",
    [
        (dict(requested=False), "--no-sandbox"),
        (dict(allow_net=["evil.example.com"]), "allow_net evil.example.com"),
        (dict(allow_net=["*"]), "allow_net *"),
        (dict(allow_net=["api.anthropic.com:22"]), "api.anthropic.com:22"),
        (dict(source_cwd="/w"), "cwd /w is outside"),
        (dict(source_cwd="/w/application"), "cwd /w/application"),
        (dict(provider="codex", state=["/h/.codex/"], env=[]), "writes /h/.codex/"),
        (dict(provider="codex", state=[], env=["OPENAI_API_KEY"]), "OPENAI_API_KEY"),
    ],
)
def test_wider_is_refused_naming_it(kw, named):
    """Each way wider is refused ``sandbox_wider``, naming what. Planted: the allow_net
    check dropped (``wider = []``) -> the allow_net cases fail; ``within`` as a plain
    prefix test -> /w/application is admitted and fails."""
    with pytest.raises(SandboxError) as exc:
        _narrow(**kw)
    assert exc.value.code == "sandbox_wider"
    assert named in str(exc.value) and "team/lead" in str(exc.value)


def test_a_whole_network_parent_allows_any_host():
    whole = dict(PARENT, allow_net=["*"])
    got = inherit.narrow(
        whole, requested=None, allow_net=["example.org:22"], source_cwd="/w/app",
        provider="claude", state=[], env=[], deny_read=[], hide=[], env_allow=(),
    )  # fmt: skip
    assert got["allow_net"] == ["example.org:22"]
    with pytest.raises(SandboxError):
        inherit.narrow(
            dict(PARENT, allow_net=[]), requested=True, allow_net=["a.example"],
            source_cwd="/w/app", provider="claude", state=[], env=[], deny_read=[], hide=[],
            env_allow=(),
        )  # fmt: skip


PROBE = r"""
import json, os, subprocess, sys
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client, ServerError
def orcr(*args):  # the real CLI
    p = subprocess.run([sys.executable, "-c", "from orcr_core.cli import main; main()", *args],
                       capture_output=True, text=True, timeout=60)
    return {"code": p.returncode, "out": p.stdout.strip(), "err": p.stderr.strip()}
me = sys.argv[1]
out = {"socket": os.environ.get("ORCR_SOCKET")}
child = [sys.executable, "probe.py", "grandchild"] if me == "parent" else ["sleep", "60"]
name = "child" if me == "parent" else "grand"
sdk = Orcr(Client(os.environ["ORCR_SOCKET"], autostart=False))
def call(fn):
    try:
        return {"code": 0, "out": json.dumps(fn())}
    except ServerError as exc:
        return {"code": exc.code, "err": exc.message}
if me == "parent":  # the real CLI; one level down the SDK, in this process (faster)
    out["ok"] = orcr("agent", "run", "--provider", "command", "--name", name, "--json",
                     "--", *child)
    out["no_sandbox"] = orcr("agent", "run", "--provider", "command", "--name", "x",
                             "--no-sandbox", "--", "true")
else:
    out["ok"] = call(lambda: sdk.run(None, provider="command", name=name, argv=child))
    out["no_sandbox"] = call(lambda: sdk.run(None, provider="command", name="x",
                                             sandbox=False, argv=["true"]))
out["wider_net"] = call(lambda: sdk.run(None, provider="command", name="y",
                                        allow_net=["evil.example.com"], argv=["true"]))
out["server_stop"] = call(lambda: sdk.client.call("server.stop"))
out["ls"] = call(lambda: sdk.list())
json.dump(out, open(me + ".tmp", "w"))
os.rename(me + ".tmp", me + ".json")
"""


def _result(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


pytestmark_engine = pytest.mark.skipif(
    bwrap.unavailable() is not None, reason=f"no sandbox engine: {bwrap.unavailable()}"
)


@pytestmark_engine
def test_sandboxed_agent_spawns_no_wider(live, short_tmp):
    """A sandboxed command agent runs the real ``orcr agent run`` inside: its child is
    admitted sandboxed (its parent named, the parent's allow_net), ``--no-sandbox`` and
    a wider ``--allow-net`` are refused ``sandbox_wider``, ``server stop`` is forbidden,
    ``agent ls`` shows only itself and what it started; the child does the same one
    level down (the grandchild's lineage names both). The socket is the user's alone
    (0600 in 0700 folders).

    Planted: the guard skipped (``dispatch`` ignoring ``conn.caller``) -> ``server stop``
    is served (the server stops) and fails; the socket not bound into the
    sandbox (``socket=None`` in ``wrap``) -> every call inside fails (no socket);
    ``parent=None`` in agent_run (the caller's policy not applied) -> ``--no-sandbox``
    is admitted and fails."""
    work = short_tmp / "work"
    work.mkdir()
    (work / "probe.py").write_text(PROBE)
    live.start_server()
    with live.sdk() as orcr:
        parent = orcr.run(None, provider="command", path="box/lead", cwd=str(work),
                          argv=[sys.executable, "probe.py", "parent"], sandbox=True,
                          allow_net=["127.0.0.1:9"])  # fmt: skip
        mine = until(lambda: _result(work / "parent.json"), 60, "the parent's probe")
        theirs = until(lambda: _result(work / "grandchild.json"), 60, "the child's probe")
        child = json.loads(mine["ok"]["out"])
        assert child["path"] == "box/lead/child", mine
        got = orcr.get(child["uuid"])["sandbox"]
        assert got["parent"] == parent["uuid"] and got["allow_net"] == ["127.0.0.1:9"]
        grand = json.loads(theirs["ok"]["out"])
        grand_path = [grand["path"]]
        assert orcr.get(grand["uuid"])["sandbox"]["lineage"] == [parent["uuid"], child["uuid"]]
        folder = live.socket.parent / "sbx" / grand["uuid"]  # (the parent's: gone, ended)
        sock = folder / "orcr.sock"
        until(sock.exists, 30, "the grandchild's own socket (made before its pane starts)")
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert mine["socket"] == "/run/orcr/orcr.sock"
    for result in (mine, theirs):
        assert result["no_sandbox"]["code"] != 0 and "--no-sandbox" in result["no_sandbox"]["err"]
        assert "no wider than its parent" in result["no_sandbox"]["err"]
        assert "evil.example.com" in result["wider_net"]["err"], result["wider_net"]
        assert result["wider_net"]["code"] == "sandbox_wider"
        assert result["server_stop"]["code"] == "forbidden"
        assert "not served to a sandboxed agent" in result["server_stop"]["err"]
    seen = {a["path"] for a in json.loads(mine["ls"]["out"])}  # the grandchild: maybe yet
    assert {"box/lead", "box/lead/child"} <= seen <= {"box/lead", "box/lead/child", *grand_path}
    assert sorted(a["path"] for a in json.loads(theirs["ls"]["out"])) == [
        "box/lead/child",
        "box/lead/child/grand",
    ]
