"""A sandboxed agent orchestrating its children through its own socket (issue 36, item 5):
the verbs a parent needs work from inside (``agent run``, ``wait``, ``read``, ``get``,
``ls``, ``send``, ``kill``, the SDK's ``watch``), on the agents it started and nothing
else (:mod:`orcr_core.server.sandboxed`).

The scope rule and the stream's filter are tested directly; one end-to-end test runs
the real ``orcr`` CLI inside a sandboxed command agent on a real pane (tmux, the herdr
emulator) against a real echo child.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from orcr_core.kit.testing import until
from orcr_core.protocol import ProtocolError
from orcr_core.sandbox import bwrap
from orcr_core.server import sandboxed


class _Rows:
    """Agent rows by uuid, each with the lineage its policy records."""

    def __init__(self, **lineages):
        self.rows = {u: SimpleNamespace(uuid=u, path=f"p/{u}") for u in lineages}
        self.lineage = lineages

    def policy(self, server, row):
        return {"lineage": self.lineage[row.uuid]}


@pytest.fixture
def fleet(monkeypatch):
    # lead started kid, kid started grand; other is the user's; peer is another
    # sandboxed agent's child
    rows = _Rows(lead=[], kid=["lead"], grand=["lead", "kid"], other=[], peer=["x"])
    monkeypatch.setattr(sandboxed, "_policy", rows.policy)
    monkeypatch.setattr(sandboxed, "_row", lambda uuid: rows.rows.get(uuid))
    return rows


def test_scope_is_the_caller_and_what_it_started(fleet):
    """Itself and its descendants at any depth; not its parent, the user's agents or
    another sandbox's. Planted: ``descends`` ignoring the lineage beyond the parent
    (``lineage[-1:]``) -> the grandchild is out and fails."""
    rows = fleet.rows
    assert [u for u in rows if sandboxed.descends(None, rows[u], "lead")] == [
        "lead",
        "kid",
        "grand",
    ]
    assert [u for u in rows if sandboxed.descends(None, rows[u], "kid")] == ["kid", "grand"]


def test_the_stream_keeps_the_callers_events_only(fleet):
    """A sandboxed caller's event stream: its subtree's events, none of another agent's
    nor the fleet's own (no agent). Planted: ``visible`` returning True for an event
    with no agent -> the server's event leaks and fails."""
    see = sandboxed.visible_events(None, "kid")
    kinds = [
        ev["kind"]
        for ev in (
            {"agent": "kid", "kind": "a"},
            {"agent": "grand", "kind": "b"},
            {"agent": "lead", "kind": "c"},
            {"agent": "other", "kind": "d"},
            {"agent": None, "kind": "server.started"},
            {"agent": "gone", "kind": "e"},  # a row deleted meanwhile
            {"agent": "grand", "kind": "f"},  # from the cache
        )
        if see(ev)
    ]
    assert kinds == ["a", "b", "f"]


def test_a_watch_on_another_agent_is_refused(fleet, monkeypatch):
    """``watch.open`` / ``events.subscribe`` are served, a target outside the subtree
    is ``forbidden``, the snapshot keeps the subtree. Planted: ``watch.open`` left out
    of the targeted methods -> a watch on ``other`` is served and fails."""
    monkeypatch.setattr(sandboxed, "parent_policy", lambda server, caller: {})
    monkeypatch.setattr(
        "orcr_core.server.targets.resolve", lambda target: fleet.rows[target.split("/")[-1]]
    )
    sandboxed.guard(None, "kid", "watch.open", {"target": "p/grand"})
    sandboxed.guard(None, "kid", "events.subscribe", {"since_seq": 3})
    with pytest.raises(ProtocolError) as exc:
        sandboxed.guard(None, "kid", "watch.open", {"target": "p/other"})
    assert exc.value.code == "forbidden" and "p/other" in str(exc.value)
    with pytest.raises(ProtocolError) as exc:
        sandboxed.guard(None, "kid", "server.status", {})
    assert "watch.open" in str(exc.value)  # it names what is served
    snap = {"agents": [{"uuid": u} for u in ("lead", "kid", "grand", "other")]}
    assert sandboxed.filter_rows(None, "kid", snap["agents"]) == [
        {"uuid": "kid"},
        {"uuid": "grand"},
    ]


def test_a_listing_ends_at_the_callers_last_event(short_tmp, monkeypatch):
    """``events.subscribe``'s ``last_seq`` for a sandboxed caller (where ``orcr events``
    stops listing) is its subtree's last event, on a real store: not a later one of
    another agent or of the server. Planted: the caller's own row left out
    (``Agent.id > me.id``) -> its own event is not the last seen and fails."""
    from orcr_core.store import db as store_db
    from orcr_core.store import events
    from orcr_core.store.models import Agent

    store_db.open_store(short_tmp / "store.db")
    try:
        lineage = {"other": [], "lead": [], "kid": ["lead"], "late": []}
        monkeypatch.setattr(
            sandboxed, "_policy", lambda server, row: {"lineage": lineage[row.uuid]}
        )
        for i, uuid in enumerate(lineage):
            Agent.create(uuid=uuid, path=uuid, name=uuid, provider="p", status="idle",
                         queue_seq=i, cwd="/", created_at=0.0)  # fmt: skip
        events.emit("a", "kid")
        mine = events.emit("b", "lead")
        events.emit("c", "other")
        events.emit("d", "late")
        events.emit("server.started")
        assert sandboxed.last_seen_seq(None, "lead") == mine
        assert sandboxed.last_seen_seq(None, "kid") == mine - 1
    finally:
        store_db.close_store()


PROBE = r"""
import json, os, signal, subprocess, sys, traceback
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client
def orcr(*args):  # the real CLI
    p = subprocess.run([sys.executable, "-c", "from orcr_core.cli import main; main()", *args],
                       capture_output=True, text=True, timeout=60)
    return {"code": p.returncode, "out": p.stdout.strip(), "err": p.stderr.strip()}
def watch_turn():  # the SDK's watch on the child, across the turn a send starts
    snap, events = sdk.watch("kid")
    out["watch_snapshot"] = [a["path"] for a in snap["agents"]]
    out["send"] = sdk.send("kid", "second")
    seen = out["watch_events"] = []
    for ev in events:
        seen.append([ev["kind"], ev["data"].get("to")])
        if ev["kind"] == "agent.status" and ev["data"].get("to") == "idle":
            return
out = {}
sdk = Orcr(Client(os.environ["ORCR_SOCKET"], autostart=False))
signal.signal(signal.SIGALRM, lambda *a: sys.exit("the probe timed out"))
signal.alarm(120)
try:
    out["run"] = orcr("agent", "run", "--provider", "echo", "--name", "kid", "--json", "first")
    out["wait"] = orcr("agent", "wait", "kid", "--timeout", "30", "--json")
    out["read"] = orcr("agent", "read", "kid")
    # one level down the SDK, in this process (faster): the same socket methods
    out["get"] = sdk.get("kid")
    out["ls"] = sorted(a["path"] for a in sdk.list())
    watch_turn()
    out["read2"] = sdk.read("kid")["text"]
    out["watch_all"] = sorted(a["path"] for a in sdk.watch()[0]["agents"])
    out["wait_other"] = orcr("agent", "wait", "/out/sider", "--timeout", "5")
    out["kill"] = orcr("agent", "kill", "kid", "--json")
    out["ended"] = sdk.wait("kid", until="ended", timeout=30)
    out["events"] = orcr("events", "--json")  # the log listed: its subtree's, to its end
except BaseException:
    out["crashed"] = traceback.format_exc()
json.dump(out, open("out.tmp", "w"))
os.rename("out.tmp", "out.json")
"""


@pytest.mark.skipif(bwrap.unavailable() is not None, reason="no sandbox engine")
@pytest.mark.parametrize("live", ["tmux"], indirect=True)  # the socket is the mux's peer
def test_a_sandboxed_parent_runs_waits_reads_watches_and_kills_its_child(live, short_tmp):
    """Inside a sandboxed command agent, the real CLI: ``agent run`` an echo child,
    ``agent wait`` until its turn ends, ``agent read`` its answer, ``get``/``ls`` it,
    the SDK's ``watch`` on it sees the turn ``agent send`` starts end, ``agent kill``
    and ``agent wait --until ended``. An agent the user started stays out: not in the
    unfiltered watch's snapshot, and ``agent wait`` on it is ``forbidden``.

    Planted: ``watch.open``/``events.subscribe`` not served -> wait and watch fail
    (``forbidden``, as before this test); the stream not filtered (``visible`` always
    True) -> the watch sees the outsider's rows and fails."""
    work = short_tmp / "work"
    work.mkdir()
    (work / "probe.py").write_text(PROBE)
    live.start_server()
    with live.sdk() as orcr:
        orcr.run(None, provider="command", path="out/sider", cwd=str(work), argv=["sleep", "60"])
        lead = orcr.run(None, provider="command", path="box/lead", cwd=str(work), sandbox=True,
                 argv=[sys.executable, "probe.py"], allow_net=[])  # fmt: skip
        until(lambda: (work / "out.json").exists(), 150, "the parent's probe")
    out = json.loads((work / "out.json").read_text())
    assert "crashed" not in out, out
    cli = {k: v for k, v in out.items() if isinstance(v, dict) and "code" in v}
    assert [k for k, v in cli.items() if v["code"] != 0] == ["wait_other"], cli
    assert json.loads(out["run"]["out"])["path"] == "box/lead/kid"
    assert json.loads(out["wait"]["out"])["turn_status"] == "completed"
    assert out["read"]["out"] == "first" and out["read2"].strip() == "second"
    assert out["get"]["sandbox"]["parent"] == lead["uuid"]
    assert out["ls"] == out["watch_all"] == ["box/lead", "box/lead/kid"]
    assert out["watch_snapshot"] == ["box/lead/kid"]
    assert ["agent.status", "working"] in out["watch_events"], out["watch_events"]
    assert "not started from inside this sandboxed agent" in out["wait_other"]["err"]
    assert json.loads(out["kill"]["out"])[0]["path"] == "box/lead/kid"
    assert out["ended"]["status"] == "ended"
    logged = [json.loads(line) for line in out["events"]["out"].splitlines()]
    assert {e["agent"] for e in logged} == {lead["uuid"], out["ended"]["uuid"]}
    assert ["agent.status", "ended"] in [[e["kind"], e["data"].get("to")] for e in logged]
