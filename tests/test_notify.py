"""Notifications end to end (issue 23 items 4-8): a real local HTTP receiver, a command
sink, retries with backoff, undeliverable, idempotency across a SIGKILL between the send
and its record, the digest under a burst, the rate limit, the default rules."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orcr_core.kit.testing import until


class Receiver:
    """A webhook receiver on loopback: answers 500 to the first ``fail`` posts."""

    def __init__(self, fail: int = 0):
        self.posts: list[dict] = []
        self.fail = fail
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                rec.posts.append(
                    {"at": time.monotonic(), "headers": dict(self.headers), "body": body}
                )
                ok = len(rec.posts) > rec.fail
                self.send_response(200 if ok else 500)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_port}/hook"

    def notes(self) -> list[dict]:
        return [json.loads(p["body"]) for p in self.posts]

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def receiver():
    rec = Receiver()
    yield rec
    rec.close()


def _configure(home, url: str, extra: str = "", command_out=None, webhook: str = "") -> None:
    text = (home.path / "config.toml").read_text()
    text += f'[notify]\ngather = "0s"\n{extra}[notify.webhook]\nurl = "{url}"\n{webhook}'
    if command_out is not None:
        code = f"import sys; open({str(command_out)!r}, 'a').write(sys.stdin.read() + chr(10))"
        text += (
            f"[notify.command]\nargv = [{json.dumps(sys.executable)}, '-c', {json.dumps(code)}]\n"
        )
    (home.path / "config.toml").write_text(text)


def _failing_run(home, name: str = "bad") -> str:
    home.run("loop", "create", name, "0 0 1 1 *", "--", "false", check=True)
    out = home.run("loop", "run", "start", name, check=True).stdout
    return out.split()[0].split("/")[1]  # the run id


def _insert_events(home, rows: list[tuple[str, str | None, dict]]) -> None:
    """Event rows written into the store while the server is stopped, as a crash of
    the multiplexer would have had the monitor write them (40 agents lost at once)."""
    conn = sqlite3.connect(home.path / "store.db")
    with conn:
        for kind, agent, data in rows:
            conn.execute(
                "INSERT INTO event (ts, kind, agent, loop, run, data) VALUES (?, ?, ?, NULL, NULL, ?)",
                (time.time(), kind, agent, json.dumps(data)),
            )
    conn.close()


def _lost(path: str) -> tuple[str, str, dict]:
    data = {"from": "lost", "to": "ended", "path": path, "provider": "testp", "exit_reason": "lost"}
    return ("agent.status", f"uuid-{path}", data)


def test_a_failed_loop_run_reaches_the_webhook_and_the_command_once(orcr_home, receiver, short_tmp):
    out = short_tmp / "command.jsonl"
    _configure(orcr_home, receiver.url, command_out=out)
    orcr_home.start_server()
    run_id = _failing_run(orcr_home)
    until(lambda: receiver.posts and out.exists() and out.read_text(), 30, what="both sinks")
    time.sleep(1.0)  # nothing more comes
    (note,) = receiver.notes()
    seq = next(
        e["seq"]
        for e in orcr_home.events()
        if e["kind"] == "run.status" and e["data"]["to"] == "failed"
    )
    assert note["key"] == str(seq) and receiver.posts[0]["headers"]["Idempotency-Key"] == str(seq)
    assert note["rule"] == "loop_failed" and note["loop"] == "bad" and note["run"] == run_id
    assert note["action"] == f"orcr loop logs bad --run {run_id}"
    assert (
        "bad" in note["title"]
        and "failed" in note["text"]
        and note["event"]["kind"] == "run.status"
    )
    (cmd_note,) = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert cmd_note == note
    ls = orcr_home.run("notify", "ls", check=True).stdout
    assert "sink webhook" in ls and "last sent" in ls and f"key {seq}" in ls
    assert "sink command" in ls and "rule blocked       on" in ls and "rule loop_ok       off" in ls


def test_retries_with_backoff_after_a_500(orcr_home, short_tmp):
    rec = Receiver(fail=2)
    try:
        _configure(orcr_home, rec.url)
        orcr_home.start_server()
        _failing_run(orcr_home)
        until(lambda: len(rec.posts) >= 3, 60, what="three attempts")
        time.sleep(1.0)
        assert len(rec.posts) == 3
        keys = {p["headers"]["Idempotency-Key"] for p in rec.posts}
        assert len(keys) == 1  # one notification, retried
        gaps = [b["at"] - a["at"] for a, b in zip(rec.posts, rec.posts[1:], strict=False)]
        assert gaps[0] >= 0.9 and gaps[1] >= 1.9, gaps  # 1 s, then 2 s
        s = orcr_home.status()["notify"]
        assert s["sent"] == 1 and s["undeliverable"] == 0
    finally:
        rec.close()


def test_undeliverable_after_retry_for(orcr_home, short_tmp):
    rec = Receiver(fail=10**6)
    try:
        _configure(orcr_home, rec.url, extra='retry_for = "2s"\n')
        orcr_home.start_server()
        _failing_run(orcr_home)
        until(
            lambda: any(e["kind"] == "notify.undeliverable" for e in orcr_home.events()),
            60,
            what="notify.undeliverable",
        )
        ev = next(e for e in orcr_home.events() if e["kind"] == "notify.undeliverable")
        assert ev["data"]["sink"] == "webhook" and "HTTP 500" in ev["data"]["error"]
        n = len(rec.posts)
        assert n >= 2
        text = orcr_home.run("server", "status", check=True).stdout
        assert "undeliverable 1" in text and "via webhook (loop_failed" in text
        time.sleep(2.5)
        assert len(rec.posts) == n  # given up: no more attempts
    finally:
        rec.close()


def test_at_least_once_across_a_sigkill_between_send_and_record(orcr_home, receiver):
    """The server dies right after the receiver got the notification and before the
    outbox row says sent: the next server sends it again, with the same key (the one
    documented duplicate), and then never again."""
    _configure(orcr_home, receiver.url)
    orcr_home.start_server(extra_env={"ORCR_FAULT": "notify_after_send"})
    _failing_run(orcr_home)
    until(lambda: orcr_home.proc.poll() is not None, 30, what="the fault to kill the server")
    assert orcr_home.proc.returncode == -9
    assert len(receiver.posts) == 1
    orcr_home.start_server()
    until(lambda: len(receiver.posts) >= 2, 30, what="the resend")
    time.sleep(1.5)
    keys = [p["headers"]["Idempotency-Key"] for p in receiver.posts]
    assert len(keys) == 2 and keys[0] == keys[1], keys
    assert orcr_home.status()["notify"]["sent"] == 1


def test_a_burst_of_50_is_one_digest(orcr_home, receiver):
    _configure(orcr_home, receiver.url)
    orcr_home.start_server()  # the notifier's cursor is persisted: from now on
    orcr_home.stop_server()
    _insert_events(orcr_home, [_lost(f"fleet/a{i}") for i in range(50)])
    orcr_home.start_server()
    until(lambda: receiver.posts, 30, what="the digest")
    time.sleep(1.5)
    (note,) = receiver.notes()
    assert note["count"] == 50 and note["rule"] == "agent_failed"
    assert note["key"].startswith("digest-") and len(note["digest"]) == 50
    assert "fleet/a0" in note["text"] and "40 more" in note["text"]


def test_a_few_at_once_are_single_and_one_agent_waits_its_window(orcr_home, receiver):
    _configure(orcr_home, receiver.url)
    orcr_home.start_server()
    orcr_home.stop_server()
    _insert_events(orcr_home, [_lost("few/a"), _lost("few/b")])
    orcr_home.start_server()
    until(lambda: len(receiver.posts) >= 2, 30, what="two notifications")
    assert sorted(n["subject"] for n in receiver.notes()) == ["few/a", "few/b"]
    orcr_home.stop_server()
    _insert_events(orcr_home, [_lost("few/a")])  # the same agent and rule within a minute
    orcr_home.start_server()
    until(
        lambda: "waiting 1" in orcr_home.run("notify", "ls", check=True).stdout,
        30,
        what="the third to be held",
    )
    time.sleep(1.5)
    assert len(receiver.posts) == 2


def test_defaults_a_blocked_agent_notifies_an_ordinary_idle_does_not(orcr_home, receiver):
    _configure(orcr_home, receiver.url)
    orcr_home.start_server()
    # an ordinary turn: the agent goes idle, nothing is worth a notification
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "d/idle", check=True)
    orcr_home.run("agent", "wait", "d/idle", check=True)
    orcr_home.stop_server()
    blocked = {
        "path": "d/asks",
        "dialog": "permission",
        "reason": "Bash(rm -rf build)?",
        "status": "working",
    }
    _insert_events(orcr_home, [("agent.blocked", "uuid-asks", blocked)])
    orcr_home.start_server()
    until(lambda: receiver.posts, 30, what="the blocked notification")
    time.sleep(1.0)
    (note,) = receiver.notes()
    assert note["rule"] == "blocked" and note["agent"] == "d/asks"
    assert note["action"] == "orcr agent attach d/asks" and "rm -rf build" in note["text"]


def test_notify_test_says_what_each_sink_did(orcr_home, receiver, short_tmp):
    out = short_tmp / "cmd.jsonl"
    _configure(orcr_home, receiver.url, command_out=out)
    orcr_home.start_server()
    r = orcr_home.run("notify", "test", check=True)
    assert "webhook: ok HTTP 200" in r.stdout and "command: ok" in r.stdout
    # notify ls shows the test's answer, not just "nothing sent yet" (planted: the
    # handler not recording it -> fails)
    ls = {ln.split()[1]: ln for ln in orcr_home.run("notify", "ls", check=True).stdout.splitlines()}
    assert "nothing sent yet; last test ok " in ls["webhook"] and "(HTTP 200)" in ls["webhook"]
    assert "; last test ok " in ls["command"] and "last test" not in ls["desktop"]
    assert "desktop: off: not configured" in r.stdout
    assert receiver.notes()[0]["rule"] == "test" and json.loads(out.read_text())["rule"] == "test"
    r = orcr_home.run("notify", "test", "nosuch")
    assert r.returncode != 0 and "no sink 'nosuch'" in r.stderr
    # a bad option leaves that sink off, with the reason, and the others on
    orcr_home.run("config", "set", "notify.command.argv", "[]", check=True)
    until(
        lambda: "non-empty list" in orcr_home.run("notify", "ls", check=True).stdout,
        30,
        what="the command sink off",
    )
    r = orcr_home.run("notify", "test", "command")
    assert r.returncode == 1 and "command: off: notify.command.argv" in r.stdout


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_the_herdr_sink_shows_a_herdr_notification(live, receiver):
    """Through orcr's herdr driver to ``notification.show`` on the schema-checked emulator
    (the request and the reply are validated against herdr's published schema)."""
    _configure(live, receiver.url)
    live.start_server()
    run_id = _failing_run(live)
    until(lambda: getattr(live.mux.emulator, "notifications", None), 30, what="herdr's toast")
    (shown,) = live.mux.emulator.notifications
    assert shown["title"] == f"loop bad run {run_id} failed"
    assert f"orcr loop logs bad --run {run_id}" in shown["body"] and shown["sound"] == "request"
    ls = live.run("notify", "ls", check=True).stdout
    assert "sink herdr         on" in ls and "last sent" in ls


def test_the_herdr_sink_is_off_with_another_driver(orcr_home, receiver):
    _configure(orcr_home, receiver.url)
    orcr_home.start_server()
    assert "sink herdr         off" in orcr_home.run("notify", "ls", check=True).stdout


def _session_bus(tmp):
    """A private session bus and a notification service on it, or why not."""
    import shutil
    import subprocess

    system_python = "/usr/bin/python3"
    for need, why in (
        ("dbus-daemon", "no dbus-daemon (Debian package dbus-daemon)"),
        ("gdbus", "no gdbus (Debian package libglib2.0-bin)"),
    ):
        if shutil.which(need) is None:
            return None, why
    probe = subprocess.run([system_python, "-c", "import dbus, gi"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, "no python3-dbus and python3-gi for the test's notification service"
    sock = tmp / "bus"
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", f"--address=unix:path={sock}", "--print-address"],
        stdout=subprocess.PIPE,
        text=True,
    )
    address = daemon.stdout.readline().strip()
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address)
    out = tmp / "notifications.jsonl"
    fake = Path(__file__).parent / "fakes" / "notification_daemon.py"
    service = subprocess.Popen(
        [system_python, str(fake), str(out)], env=env, stdout=subprocess.PIPE, text=True
    )
    if service.stdout.readline().strip() != "ready":
        daemon.kill()
        return None, "the test's notification service did not start"
    return (daemon, service, address, out), None


def test_the_desktop_sink_over_a_real_session_bus(orcr_home, short_tmp):
    found, why = _session_bus(short_tmp)
    if found is None:
        pytest.skip(f"did not run: {why}")
    daemon, service, address, out = found
    try:
        text = (orcr_home.path / "config.toml").read_text()
        text += '[notify]\ngather = "0s"\n[notify.desktop]\nenabled = true\n'
        (orcr_home.path / "config.toml").write_text(text)
        orcr_home.start_server(extra_env={"DBUS_SESSION_BUS_ADDRESS": address})
        run_id = _failing_run(orcr_home)
        until(lambda: out.exists() and out.read_text(), 30, what="a Notify call on the bus")
        (call,) = [json.loads(ln) for ln in out.read_text().splitlines()]
        assert call["app"] == "orcr" and call["summary"] == f"loop bad run {run_id} failed"
        assert f"orcr loop logs bad --run {run_id}" in call["body"]
    finally:
        for p in (service, daemon):
            p.kill()
            p.wait()


def test_a_task_parked_in_inbox_or_sent_to_failed_notifies(orcr_home, receiver, short_tmp):
    from orcr_tasks.queue import Queue

    _configure(orcr_home, receiver.url)
    orcr_home.start_server()
    q = Queue.init(short_tmp / "queue")
    q.add("t", "x", task_id="asks")
    q.claim("builder", token="w")
    q.moves.park("asks", "w", "which port?")
    q.add("t", "x", task_id="breaks")
    for _ in range(3):
        q.claim("builder", token="w")
        q.moves.fail_build("breaks", "w", "tests fail")
    assert q.where("breaks") == ["failed"]
    until(lambda: len(receiver.posts) >= 2, 30, what="two task notifications")
    time.sleep(1.0)
    by_task = {n["task"]: n for n in receiver.notes()}
    assert set(by_task) == {"asks", "breaks"} and len(receiver.posts) == 2
    asks, breaks = by_task["asks"], by_task["breaks"]
    assert asks["rule"] == breaks["rule"] == "task_parked"
    assert asks["action"] == f"orcr tasks answer {q.root} asks ANSWER"
    assert "which port?" in asks["text"] and "inbox/" in asks["text"]
    assert breaks["action"] == f"orcr tasks show {q.root} breaks" and "failed/" in breaks["text"]


def test_a_slow_sink_holds_only_its_own_thread(orcr_home, short_tmp):
    """A webhook that hangs: while it holds a request, the command sink delivers the next
    notification at once and agents run and finish (the monitor and the queue never
    wait on a sink)."""
    gate, entered = threading.Event(), threading.Event()
    rec = Receiver()
    handler = rec.http.RequestHandlerClass
    handler.do_POST_orig = handler.do_POST

    def slow(self):
        entered.set()
        gate.wait(25)
        self.do_POST_orig()

    handler.do_POST = slow
    out = short_tmp / "cmd.jsonl"
    lines = lambda: out.read_text().splitlines() if out.exists() else []  # noqa: E731
    try:
        _configure(orcr_home, rec.url, command_out=out, webhook="timeout = 60\n")
        orcr_home.start_server()
        _failing_run(orcr_home, "bad")
        until(lambda: entered.is_set() and lines(), 30, what="the webhook to hang")
        t0 = time.monotonic()
        _failing_run(orcr_home, "bad2")
        until(lambda: len(lines()) == 2, 40, what="the command sink's second")
        # delivered while the webhook still hangs (it would wait 25 s behind it)
        assert time.monotonic() - t0 < 15 and not rec.posts
        orcr_home.run("agent", "run", "--provider", "testp", "--path", "s/a", check=True)
        orcr_home.run("agent", "wait", "s/a", check=True, timeout=60)
        assert not rec.posts  # and so did an agent's whole start
    finally:
        gate.set()
        rec.close()


def _turn(path: str) -> tuple[str, str, dict]:
    data = {"from": "working", "to": "idle", "path": path, "provider": "testp", "turn_status": "ok"}
    return ("agent.status", f"uuid-{path}", data)


def test_turn_ended_is_opt_in_and_limited_to_its_paths(orcr_home, receiver):
    _configure(orcr_home, receiver.url)
    orcr_home.start_server()
    orcr_home.stop_server()
    _insert_events(orcr_home, [_turn("watched/a"), _turn("other/b")])
    orcr_home.start_server()  # off by default: turns notify nobody
    time.sleep(2.0)
    assert receiver.posts == []
    orcr_home.stop_server()
    text = (orcr_home.path / "config.toml").read_text()
    text += '[notify.rules.turn_ended]\nenabled = true\nmatch = ["watched/**"]\n'
    (orcr_home.path / "config.toml").write_text(text)
    _insert_events(orcr_home, [_turn("watched/a"), _turn("other/b")])
    orcr_home.start_server()
    until(lambda: receiver.posts, 30, what="the turn_ended notification")
    time.sleep(1.5)
    (note,) = receiver.notes()
    assert note["rule"] == "turn_ended" and note["agent"] == "watched/a"
    assert note["action"] == "orcr agent read watched/a"


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_real_dialog_at_start_notifies_by_default(live, short_tmp, receiver):
    """The fake Claude Code asks whether to trust its folder: orcr sees it on the screen,
    records agent.blocked, and the default rule reaches the webhook with the command
    that answers it."""
    from fake_clis import configure, run_agent

    cwd = short_tmp / "fresh_worktree"
    cwd.mkdir()
    configure(live, short_tmp, claude=["--fake-dialogs", "trust"], timings='max_starting = "60s"\n')
    _configure(live, receiver.url)
    live.start_server()
    run_agent(live, "claude", "w/one", "fix the bug", cwd=cwd)
    until(lambda: receiver.posts, 60, what="the blocked notification")
    time.sleep(1.0)
    (note,) = receiver.notes()
    assert note["rule"] == "blocked" and note["agent"] == "w/one"
    assert note["action"] == "orcr agent attach w/one" and "trust" in note["text"]
    live.run("agent", "kill", "w/one", check=True)


def test_slack_and_ntfy_bodies(orcr_home, receiver):
    _configure(orcr_home, receiver.url, webhook='format = "slack"\n')
    orcr_home.start_server()
    orcr_home.run("notify", "test", "webhook", check=True)
    (post,) = receiver.posts
    assert json.loads(post["body"]) == {
        "text": "*orcr test notification*\nthis is a test from orcr notify test\n`orcr notify ls`"
    }
    assert post["headers"]["Content-Type"] == "application/json"
    orcr_home.run("config", "set", "notify.webhook.format", "ntfy", check=True)
    until(
        lambda: (
            orcr_home.run("notify", "test", "webhook").returncode == 0
            and len(receiver.posts) > 1
            and receiver.posts[-1]["headers"].get("Title")
        ),
        30,
        what="an ntfy body",
    )
    post = receiver.posts[-1]
    assert (
        post["headers"]["Title"] == "orcr test notification" and post["headers"]["Tags"] == "test"
    )
    assert post["body"].decode() == "this is a test from orcr notify test\norcr notify ls"
    assert post["headers"]["Idempotency-Key"].startswith("test-")
    r = orcr_home.run("config", "set", "notify.webhook.format", "xml", check=True)
    until(
        lambda: "use one of orcr, slack, ntfy" in orcr_home.run("notify", "ls", check=True).stdout,
        30,
        what="the bad format reported",
    )
    assert r.returncode == 0


def test_a_spent_budget_notifies_once_per_scope_and_window(orcr_home, receiver):
    """``budget_reached`` (on by default): the first queued agent a spent budget holds
    writes one ``budget.reached`` event for the scope and its window, however many
    agents it holds and however often the server restarts."""
    _configure(orcr_home, receiver.url, extra='[budget."b"]\ntokens = 10\n')
    orcr_home.start_server()
    conn = sqlite3.connect(orcr_home.path / "store.db", timeout=10)
    with conn:  # a turn's usage, as the monitor writes it: the scope's budget is spent
        conn.execute(
            "INSERT INTO turn_usage (agent, turn, path, provider, model, ended_at, input, "
            "output, cache_read, cache_write) VALUES ('x', 1, 'b/x', 'testp', 'm', ?, 10, 0, 0, 0)",
            (time.time(),),
        )
    conn.close()
    for i in range(3):
        orcr_home.run("agent", "run", "--provider", "testp", "--path", f"b/a{i}", "hi", check=True)
    until(lambda: receiver.posts, 30, what="the budget notification")
    orcr_home.stop_server()
    orcr_home.start_server()  # the held rows are looked at again: no second event
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "b/a3", "hi", check=True)
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "c/z", "hi", check=True)
    until(lambda: orcr_home.get("c/z")["status"] != "queued", what="c/z promoted")
    time.sleep(1.0)
    reached = [e for e in orcr_home.events() if e["kind"] == "budget.reached"]
    assert len(reached) == 1, reached
    assert reached[0]["data"]["scope"] == "b" and reached[0]["data"]["spent"] == 10
    (note,) = receiver.notes()
    assert note["rule"] == "budget_reached" and "budget b: 10/10 tokens" in note["text"]
