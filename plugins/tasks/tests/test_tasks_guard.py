"""Two hosts sharing one queue (issue 33): a reap from another host ends the agent on
its own host (item 1), and a task's cost counts every host's agents (item 4).

Two hosts simulated on one machine, as in test_tasks_hosts.py: each its own
``ORCR_HOME`` (so its own orcr server, store and tmux server), both sharing one
queue (a directory both reach, or one PostgreSQL database). Host A's worker
alone is SIGKILLed while its orcr server and its agent live on; host B reaps
the claim, and can end nothing itself (its orcr never ran the agent). A's claim
guard (orcr_tasks.guard) must end the agent within the bound docs/tasks.md gives
(one ``--heartbeat`` after the reap, plus one sweep), and then exit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from orcr_testing.tasks import spec

from orcr_core.kit.testing import until

HEARTBEAT = 0.5
#: a sweep on this shared, loaded 2-core machine: a list call and a read of the claims
SLACK = 20.0


class Host:
    def __init__(self, base: Path, name: str):
        self.home = base / name
        self.home.mkdir()
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ORCR_", "TMUX", "HERDR_")) or k == "ORCR_TASKS_PG"
        }
        self.env["ORCR_HOME"] = str(self.home)
        (self.home / "config.toml").write_text(
            f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{base / f"tmux-{name}.sock"}"\n'
            '[timings]\npoll_every = "50ms"\n'
        )

    def orcr(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "orcr_core.cli", *args],
            env=self.env, capture_output=True, text=True, timeout=180, cwd=self.home,
        )  # fmt: skip

    def agent(self, uuid: str) -> tuple[str, str | None]:
        """(status, exit reason) of one of this host's agents, from its store."""
        conn = sqlite3.connect(f"file:{self.home / 'store.db'}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(
                "SELECT status, exit_reason FROM agent WHERE uuid = ?", [uuid]
            ).fetchone()
        finally:
            conn.close()

    def processes(self, marker: str = "") -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter():
            try:
                if p.environ().get("ORCR_HOME") == str(self.home) and marker in " ".join(
                    p.cmdline()
                ):
                    found.append(p)
            except (psutil.Error, OSError):
                continue
        return found

    def kill_all(self) -> None:
        for p in self.processes():
            try:
                p.kill()
            except psutil.Error:
                pass


@pytest.mark.timeout(300)
def test_a_reap_from_another_host_ends_the_agent_on_its_own_host(q, short_tmp):
    """Planted: the worker starts no claim guard (Worker.guard off in `tasks work`) ->
    fails (A's agent is still working 20 s after B's reap)."""
    a, b = Host(short_tmp, "a"), Host(short_tmp, "b")
    q.add("[sleep 600] build it\nREVISION: r1", "VERDICT: pass", task_id="T1")
    log = a.home / "worker.log"
    with open(log, "w") as fh:
        worker = subprocess.Popen(
            [sys.executable, "-m", "orcr_core.cli", "tasks", "work", spec(q), "--role",
             "builder", "--provider", "echo", "--heartbeat", f"{HEARTBEAT}s", "--stale", "3s",
             "--timeout", "10m"],
            env=a.env, stderr=fh, cwd=a.home,
        )  # fmt: skip
    try:
        until(lambda: (q.read_heartbeat("T1") or {}).get("uuid"), 120, what="A's agent started")
        hb = q.read_heartbeat("T1")
        # the claim records which host and which orcr instance run which agent
        assert hb["host"] == socket.gethostname() and hb["orcr_data"] == str(a.home), hb
        assert hb["agent"].endswith(f"/build_{hb['token']}") and hb["orcr"], hb
        until(lambda: a.agent(hb["uuid"])[0] == "working", 60, what="A's agent working")

        os.kill(worker.pid, signal.SIGKILL)  # the worker alone: A's orcr lives on
        worker.wait()
        assert a.processes("orcr_core.server"), "A's orcr server went with its worker"
        time.sleep(2 * HEARTBEAT)
        assert a.agent(hb["uuid"])[0] == "working", "ended before any reap"

        # host B reaps once the claim is stale; its own orcr never ran the agent
        until(lambda: q.age("doing", "T1") > 3, 30, what="the claim to go stale")
        r = b.orcr("tasks", "reap", spec(q), "--stale", "3s")
        assert r.returncode == 0 and "T1 doing -> todo" in r.stdout, (r.stdout, r.stderr)
        assert "that host's claim guard ends it" in r.stderr, r.stderr

        until(
            lambda: a.agent(hb["uuid"])[0] == "ended",
            HEARTBEAT + SLACK,
            what="A's agent ended by A's claim guard",
        )
        assert a.agent(hb["uuid"])[1] == "killed", a.agent(hb["uuid"])
        until(
            lambda: "its claim was reaped or taken over" in log.read_text(),
            10,
            what="the guard's line in A's worker log",
        )
        # its worker gone and nothing of the queue left to guard, the guard exits
        until(lambda: not a.processes("orcr_tasks.guard"), 30, what="the guard to exit")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        a.kill_all()
        b.kill_all()


def test_the_guard_ends_only_agents_whose_claim_is_gone(q):
    """What a sweep judges, on both backends: an agent of a held claim is kept, one of a
    reaped claim (its task back in todo/, or claimed again) or of a claim taken over by another worker (a
    new token) is ended, and one whose claim cannot be read is left alone.
    Planted: orphans() matching the task only, not the claim's token -> fails (the
    taken-over claim's old agent is kept); a claim that cannot be read taken as gone
    -> fails ("blind"'s agent is ended)."""
    from orcr_tasks.guard import orphans
    from orcr_testing.tasks import age_claim, is_pg

    for tid in ("held", "reaped", "taken", "blind"):
        q.add(f"work {tid}", "VERDICT: pass", task_id=tid)
    tokens = {}
    for n in range(4):
        token = f"t{n}"
        tokens[q.claim("builder", token, {"pid": os.getpid()})] = token
    base = f"tasks/{q.name}"

    def agent(tid, token):
        return {"path": f"{base}/{tid}/build_{token}", "uuid": f"u-{tid}-{token}"}

    if is_pg(q):  # a claim whose record cannot be read
        q._run("UPDATE orcr_tasks SET claim = NULL WHERE queue = %s AND id = 'blind'", [q.queue])
    else:
        q.hb("blind").write_text("{not json")
    age_claim(q, "reaped", 60)
    age_claim(q, "taken", 60)
    assert {t for t, _s, _d in q.moves.reap(30)} == {"reaped", "taken"}
    q.moves.release()
    while (tid := q.claim("builder", "new", {"pid": os.getpid()})) not in ("taken", None):
        pass  # claim again until "taken" is held by another worker (token "new")
    assert tid == "taken"
    agents = [agent(t, tok) for t, tok in tokens.items()] + [agent("taken", "new")]
    agents.append({"path": f"{base}/held", "uuid": "not-a-worker-agent"})
    ended = {a["uuid"] for a in orphans(q, agents)}
    assert ended == {f"u-reaped-{tokens['reaped']}", f"u-taken-{tokens['taken']}"}, ended
    assert orphans(q, []) == []


def test_a_tasks_cost_counts_every_hosts_agents(q, short_tmp):
    """Host A builds, host B verifies: `tasks show`/`status` give the task's whole cost
    (both hosts' agents) from A, from B, and from a host with no orcr server at all.
    Planted: the worker writes no usage record (spent.record not called) -> fails (A sees
    only its own build); usage read from the local server only (queue.spent ignored) ->
    fails the same way."""
    a, b, c = Host(short_tmp, "a"), Host(short_tmp, "b"), Host(short_tmp, "c")
    q.add("Say hello.\nREVISION: r1", "VERDICT: pass", task_id="x")
    fast = ("--provider", "echo", "--heartbeat", "0.5s", "--drain")
    try:
        r = a.orcr("tasks", "work", spec(q), "--role", "builder", *fast)
        assert r.returncode == 0 and q.is_in("review", "x"), r.stderr
        r = b.orcr("tasks", "work", spec(q), "--role", "verifier", *fast)
        assert r.returncode == 0 and q.is_in("done", "x"), r.stderr
        spent = {}
        for h in (a, b):
            agents = json.loads(h.orcr("agent", "ls", "--all", "--json").stdout)
            assert len(agents) == 1 and agents[0]["usage"]["tokens"] > 0, agents
            spent[agents[0]["path"]] = agents[0]["usage"]["tokens"]
        whole = sum(spent.values())
        for h in (a, b, c):  # c: no orcr server, only what the queue holds
            show = json.loads(h.orcr("tasks", "show", spec(q), "x", "--json").stdout)["usage"]
            assert show["tokens"] == whole, (h.home.name, show, spent)
            got = {x["path"]: x["tokens"] for x in show["agents"]}
            assert got == spent, (h.home.name, got)
            assert [x["role"] for x in show["agents"]] == ["build", "verify"]
            s = json.loads(h.orcr("tasks", "status", spec(q), "--json").stdout)["usage"]
            assert s == {"tokens": whole, "tasks": {"x": whole}}, (h.home.name, s)
        text = c.orcr("tasks", "show", spec(q), "x").stderr
        assert f"usage: {whole} tokens" in text and "verification 1: " in text, text
    finally:
        for h in (a, b, c):
            h.kill_all()
