"""send_prompt, send_keys and read against real programs in real tmux panes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest

from orcr_core.contracts import DriverError, StartSpec

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

TEXT = "hello world $HOME ; \"dq\" 'sq' `tick` #{pane_id} x\\; é ✓ \t tab"


def _ready(h, pane, marker="ready"):
    h.wait_for(lambda: marker in h.driver.read(pane), what=f"{marker!r} on screen")


def test_send_prompt_delivers_text_exactly_once_then_enter(h, sandbox):
    out = sandbox.root / "lines.jsonl"
    pane = h.start_script("print('ready', flush=True)\n" + h.LINE_READER, str(out))
    _ready(h, pane)
    h.driver.send_prompt(pane, TEXT)
    h.wait_for(lambda: h.read_json_lines(out), what="the line to arrive")
    h.driver.send_prompt(pane, "second")
    h.wait_for(lambda: len(h.read_json_lines(out)) >= 2, what="the second line")
    assert h.read_json_lines(out) == [TEXT + "\n", "second\n"]


def _chunks(h, path):
    return [(c["t"], bytes.fromhex(c["hex"])) for c in h.read_json_lines(path)]


def test_multiline_prompt_is_one_bracketed_paste_and_enter_comes_later(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    text = "first line\nsecond $HOME line\n\nlast é"
    h.driver.send_prompt(pane, text)
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="Enter")
    chunks = _chunks(h, out)
    received = b"".join(d for _, d in chunks)
    # One paste, newlines inside the bracket (a TUI does not submit on them), then Enter.
    paste = b"\x1b[200~" + text.replace("\n", "\r").encode() + b"\x1b[201~"
    assert received == paste + b"\r"
    paste_end = max(t for t, d in chunks if b"\x1b[201~" in d)
    enter_at = chunks[-1][0]
    assert chunks[-1][1] == b"\r"
    assert enter_at - paste_end >= 0.15  # prompt_delay is 0.3; slack for a loaded machine


def test_send_prompt_strips_paste_end_markers(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    h.driver.send_prompt(pane, "a\x1b[201~b")
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="Enter")
    assert b"".join(d for _, d in _chunks(h, out)) == b"\x1b[200~ab\x1b[201~\r"


def test_send_keys_maps_logical_names(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    keys = ["escape", "ctrl+c", "up", "tab", "shift+tab", "x", "-", ";", "backspace", "enter"]
    h.driver.send_keys(pane, keys)
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="the keys")
    received = b"".join(d for _, d in _chunks(h, out))
    assert received == b"\x1b\x03\x1b[A\t\x1b[Zx-;\x7f\r"


def test_a_paste_refused_for_its_marks_leaves_no_buffer(h, driver, sandbox, socket_path):
    """The driver suite shows a pane with other marks gets no text (a pane id tmux
    handed out again after a restart); the refused paste must not leave its tmux
    buffer behind either. Planted: the refusal's ``delete-buffer`` dropped -> fails."""
    from orcr_core.contracts import PaneRef

    ws = driver.ensure_workspace("alpha")
    ref = driver.start(StartSpec(ws, "alpha/one", str(h.workdir), ("cat",), instance="i1",
                                 launch_token="tb"))  # fmt: skip
    with pytest.raises(DriverError) as exc:
        driver.paste_prompt(PaneRef(ws, ref.tab_id, ref.pane_id, "i1", "ta"), "intruder")
    assert exc.value.code == "pane_not_found" and "not this agent's" in str(exc.value)
    assert sandbox.tmux(["-S", socket_path], "list-buffers").stdout == ""


def _wait_reaped(h, pane, code: str) -> None:
    """Until tmux has reaped the pane's program and shows its exit status ``code``; a
    tmux that missed the SIGCHLD (see ``Prompt._dead_status``) is sent one."""
    fmt = ["display-message", "-p", "-t", pane.pane_id, "#{pane_dead_status}|#{pid}"]

    def reaped() -> bool:
        status, _, server = h.driver.tmux.run(fmt).strip().partition("|")
        if status != code:
            os.kill(int(server), signal.SIGCHLD)
        return status == code

    h.wait_for(reaped, what="tmux to reap it")


def _alive(h) -> bool:
    return h.sandbox.tmux(h.driver.tmux.socket_flags, "list-sessions").returncode == 0


def test_a_prompt_for_a_dead_pane_is_refused_and_the_server_lives(h, sandbox):
    """tmux 3.3a's server dies when a paste lands in a dead pane: the check and the
    paste are one server-side step, and a dead pane is an error naming the exit."""
    out = sandbox.root / "lines.jsonl"
    other = h.start_script("print('ready', flush=True)\n" + h.LINE_READER, str(out), label="b/x")
    # (the pause lets tmux read the line: output of a program that exits at once can be lost)
    dead = h.start(["sh", "-c", "echo 'sh: 1: boom: not found'; sleep 0.2; exit 3"], label="a/d")
    h.wait_for(
        lambda: any(p.dead for p in h.driver.snapshot() if p.pane_id == dead.pane_id),
        what="the pane to die",
    )
    with pytest.raises(DriverError) as err:
        h.driver.send_prompt(dead, "hello")
    assert err.value.code == "pane_dead"
    assert "status 3" in str(err.value) and "boom: not found" in str(err.value)
    assert _alive(h)
    # no buffer was left behind, and the live pane still takes prompts
    assert sandbox.tmux(h.driver.tmux.socket_flags, "list-buffers").stdout == ""
    _ready(h, other)
    h.driver.send_prompt(other, "still here")
    h.wait_for(lambda: h.read_json_lines(out) == ["still here\n"], what="the live pane's line")


def test_enter_for_a_pane_that_died_after_the_paste_is_refused(h, sandbox, monkeypatch):
    script = (
        "import os, sys, tty\ntty.setraw(0)\nos.write(1, b'ready\\r\\n')\n"
        "os.read(0, 1)\nos.write(1, b'got input, leaving\\r\\n')\nsys.exit(4)\n"
    )
    pane = h.start([h.PY, "-c", script])
    _ready(h, pane)

    run = h.driver.tmux.run

    def run_enter_once_dead(*commands, **kw):  # the program dies between paste and Enter
        if any("send-keys" in " ".join(c) for c in commands):
            h.wait_for(
                lambda: any(p.dead for p in h.driver.snapshot() if p.pane_id == pane.pane_id),
                what="the program to exit on its input",
            )
        return run(*commands, **kw)

    monkeypatch.setattr(h.driver.tmux, "run", run_enter_once_dead)
    with pytest.raises(DriverError) as err:
        h.driver.send_prompt(pane, "x")
    assert err.value.code == "pane_dead"
    assert "status 4" in str(err.value) and "before Enter" in str(err.value)
    assert _alive(h)


def test_a_status_tmux_missed_is_fetched_by_sending_the_server_its_sigchld(h, monkeypatch):
    """A tmux built with libutempter (Debian's) can miss a program's SIGCHLD and leave
    it a zombie: the pane is dead, its status empty, for as long as no other child
    exits (seen for 15 s). The driver sends the server a SIGCHLD and asks again. Here
    a ``sleep`` stands for the unreaped program and a process that waits for SIGCHLD
    for the server: tmux's real answer is held back until that process got one."""
    pane = h.start([h.PY, "-c", "import sys; sys.exit(4)"])
    _wait_reaped(h, pane, "4")
    unreaped = subprocess.Popen(["sleep", "30"])
    wait_chld = (
        "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD]);"
        "print('ready', flush=True); signal.sigwait([signal.SIGCHLD])"
    )
    server = subprocess.Popen([h.PY, "-c", wait_chld], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline() == "ready\n"
    run = h.driver.tmux.run

    def missed_until_nudged(*commands, **kw):
        out = run(*commands, **kw)
        if server.poll() is not None:
            return out
        if any(c[0] == "if-shell" for c in commands):
            return out.replace(" 4", " ")  # the marker printed before the reap
        if "#{pane_dead_status}" in commands[0][-1]:
            return f"|{unreaped.pid}|{server.pid}\n"
        return out

    monkeypatch.setattr(h.driver.tmux, "run", missed_until_nudged)
    try:
        with pytest.raises(DriverError) as err:
            h.driver.send_prompt(pane, "x")
    finally:
        for proc in (unreaped, server):
            proc.kill()
            proc.wait()
    assert "(status 4) before its prompt was pasted" in str(err.value)


def test_a_program_killed_by_a_signal_is_reported_without_the_long_wait(h, monkeypatch):
    pane = h.start([h.PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    h.wait_for(
        lambda: any(p.dead for p in h.driver.snapshot() if p.pane_id == pane.pane_id),
        what="the program to die",
    )
    began = time.monotonic()
    with pytest.raises(DriverError) as err:
        h.driver.send_prompt(pane, "x")
    assert "killed by a signal, or its status is unknown" in str(err.value)
    assert time.monotonic() - began < 10  # reaped: no wait for a status that never comes


def test_a_program_behind_env_prefixes_is_checked_before_the_window(h, driver, sandbox):
    ws = driver.ensure_workspace("alpha")
    argv = ("env", "-u", "CLAUDECODE", "--", "no-such-claude-orcr", "--session-id", "x")
    with pytest.raises(DriverError) as err:
        driver.start(StartSpec(ws, "alpha/one", str(sandbox.root), argv))
    assert err.value.code == "command_not_found"
    assert str(err.value) == "no-such-claude-orcr: command not found"
    assert h.pane_ids() == set()


def test_a_dead_panes_status_is_waited_for_when_tmux_has_not_reaped_it_yet(h, monkeypatch):
    """tmux 3.3 calls a pane dead at its terminal's EOF, which can come before it has
    reaped the program: the guarded paste then prints the marker with no status. The
    driver asks again instead of reporting an unknown status."""
    pane = h.start([h.PY, "-c", "import sys; sys.exit(5)"])
    h.wait_for(
        lambda: any(p.dead for p in h.driver.snapshot() if p.pane_id == pane.pane_id),
        what="the program to exit",
    )
    _wait_reaped(h, pane, "5")
    run = h.driver.tmux.run

    def not_reaped_yet(*commands, **kw):  # the marker as tmux prints it before the reap
        out = run(*commands, **kw)
        return out.replace(" 5", " ") if any(c[0] == "if-shell" for c in commands) else out

    monkeypatch.setattr(h.driver.tmux, "run", not_reaped_yet)
    with pytest.raises(DriverError) as err:
        h.driver.send_prompt(pane, "x")
    assert "(status 5) before its prompt was pasted" in str(err.value)
