"""The control-mode query channel (orcr_tmux/channel.py): screen reads and pid lookups
answer exactly as a tmux client process does, whatever the pane prints, and fall back
to a client process whenever the channel cannot be trusted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from orcr_tmux import channel as channel_mod
from orcr_tmux.channel import QueryChannel
from orcr_tmux.tmuxcli import TmuxError

from orcr_core.contracts import DriverError
from orcr_core.kit.testing import until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

#: a screen that imitates the channel's own framing, with text tmux passes through raw
TRICKY = (
    "import sys, time\n"
    "now = int(time.time())\n"
    "lines = ['back\\\\slash \\u00e9t\\u00e9', '%begin 1 2 1', '%error 1 2 1']\n"
    "lines += [f'%end {t} {n} 1' for t in (now, now + 1) for n in range(0, 400, 37)]\n"
    "sys.stdout.write('\\n'.join(lines) + '\\nlast\\n'); sys.stdout.flush()\n"
    "time.sleep(60)\n"
)


def _answer(fn, *args):
    try:
        return ("ok", fn(*args))
    except TmuxError as exc:
        return (exc.code, str(exc))


def test_reads_answer_as_a_client_process_does(h):
    """Planted: a trailing newline lost per line, or an error's code not classified
    -> the answers differ -> fails."""
    ref = h.start([h.PY, "-c", TRICKY])
    until(lambda: "last" in h.driver.tmux.run(["capture-pane", "-p", "-t", ref.pane_id]))
    ch = QueryChannel(h.driver.tmux)
    queries = [
        ["capture-pane", "-p", "-t", ref.pane_id],
        ["display-message", "-p", "-t", ref.pane_id, "#{pane_pid} #{pane_id}"],
        ["display-message", "-p", "-t", "%999", "#{pane_pid}"],  # gone: empty, not an error
        ["capture-pane", "-p", "-t", "%999"],  # gone: not_found
    ]
    for argv in queries:
        assert _answer(ch.query, argv) == _answer(h.driver.tmux.run, argv), argv
    assert ch.answered == len(queries)  # every one over the channel, none as a process
    ch.close()


def test_the_driver_reads_screens_and_pids_over_its_channel(h):
    ref = h.start([h.PY, "-c", TRICKY])
    until(lambda: "last" in h.driver.read(ref))
    before = h.driver._channel.answered
    assert "last" in h.driver.read(ref)
    assert h.driver.pane_pid(ref) == int(
        h.driver.tmux.run(["display-message", "-p", "-t", ref.pane_id, "#{pane_pid}"])
    )
    assert h.driver._channel.answered == before + 2


def test_an_argument_the_parser_would_need_escaped_goes_as_a_process(h, monkeypatch):
    ref = h.start([h.PY, "-c", TRICKY])
    ch = QueryChannel(h.driver.tmux)
    argv = ["display-message", "-p", "-t", ref.pane_id, "it's #{pane_id}"]
    assert ch.query(argv) == h.driver.tmux.run(argv) == f"it's {ref.pane_id}\n"
    assert ch.answered == 0
    ch.close()


class _FakeClient:
    """A control client whose replies the test writes: stdout a pipe, stdin a sink."""

    def __init__(self, reply: bytes):
        r, w = os.pipe()
        os.write(w, reply)
        os.close(w)
        self.stdout = os.fdopen(r, "rb")
        self.stdin = open(os.devnull, "wb")  # noqa: SIM115

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


def _framed(*blocks: tuple[str, list[str]]) -> bytes:
    out = []
    for n, (end, lines) in enumerate(blocks, start=10):
        out += [f"%begin 99 {n} 1", *lines, f"%{end} 99 {n} 1"]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize(
    "reply, fallback",
    [
        # the screen's own "%end" ends the block early: the rest is outside any block
        (
            lambda a, b: _framed(("end", ["x", "%end 99 10 1", "y"]), ("end", [a]), ("end", [b])),
            True,
        ),
        # the screen's own "%end" as its last line: the real end is then outside a block
        (lambda a, b: _framed(("end", ["x", "%end 99 10 1"]), ("end", [a]), ("end", [b])), True),
        # a notification between blocks is fine
        (
            lambda a, b: (
                b"%sessions-changed\n" + _framed(("end", ["x"]), ("end", [a]), ("end", [b]))
            ),
            False,
        ),
    ],
)
def test_a_reply_whose_framing_does_not_add_up_is_not_trusted(monkeypatch, reply, fallback):
    """Planted: a block's end outside any block taken for a notification -> the
    second case is trusted (the screen cut) -> fails."""
    tokens = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(channel_mod.secrets, "token_hex", lambda n: next(tokens))

    class Tmux:
        timeout = 5.0

        def run(self, *commands):
            return "FALLBACK\n"

    ch = QueryChannel(Tmux())
    ch._proc = _FakeClient(reply("aaaa", "bbbb"))
    got = ch.query(["capture-pane", "-p", "-t", "%1"])
    assert got == ("FALLBACK\n" if fallback else "x\n")
    assert (ch._proc is None) == fallback  # an untrusted channel is closed


def test_a_restarted_tmux_is_read_through_a_new_client(h, monkeypatch):
    """Planted: no fallback when the client ended (its stdin closed) -> the read
    raises -> fails."""
    monkeypatch.setattr(channel_mod, "RETRY_AFTER", 0.0)
    ref = h.start([h.PY, "-c", TRICKY])
    until(lambda: "last" in h.driver.read(ref))
    h.driver.tmux.run(["kill-server"])
    time.sleep(0.2)
    with pytest.raises(DriverError) as err:
        h.driver.read(ref)  # the old client is gone; as a process: no server
    assert err.value.code == "server_not_running"
    ref = h.start([h.PY, "-c", TRICKY])
    until(lambda: "last" in h.driver.read(ref))
    answered = h.driver._channel.answered
    assert "last" in h.driver.read(ref)
    assert h.driver._channel.answered == answered + 1  # a new client answered


def test_a_stopped_tmux_times_out_and_the_next_read_answers(h):
    ref = h.start([h.PY, "-c", TRICKY])
    until(lambda: "last" in h.driver.read(ref))
    pid = int(h.driver.tmux.run(["display-message", "-p", "#{pid}"]))
    h.driver.tmux.timeout = 1.0
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(DriverError) as err:
            h.driver.read(ref)
        assert err.value.code == "tmux_timeout" and err.value.retryable
    finally:
        os.kill(pid, signal.SIGCONT)
    until(lambda: "last" in h.driver.read(ref))


def _clients(socket_flag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"-C" in argv and b"attach-session" in argv and socket_flag.encode() in argv:
                found.append(int(entry))
    return found


def test_the_client_ends_with_the_process_that_made_it(h, sandbox):
    """SIGKILL of the process holding a channel leaves no control client behind, even
    while tmux is stopped (a client's stdin at EOF ends it only once tmux reads that):
    ``PR_SET_PDEATHSIG`` on the channel's own thread. Planted: the client started
    without the wrapper -> it outlives the process -> fails."""
    ref = h.start([h.PY, "-c", TRICKY])
    socket = h.driver.tmux.socket
    code = textwrap.dedent(
        f"""
        import sys, time
        from orcr_tmux.tmuxcli import Tmux
        from orcr_tmux.channel import QueryChannel
        ch = QueryChannel(Tmux(socket={socket!r}))
        ch.query(["capture-pane", "-p", "-t", {ref.pane_id!r}])
        assert ch.answered == 1
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "ready"
    flag = socket
    assert _clients(flag)
    server = int(h.driver.tmux.run(["display-message", "-p", "#{pid}"]))
    os.kill(server, signal.SIGSTOP)
    try:
        holder.kill()
        holder.wait()
        until(lambda: not _clients(flag), timeout=10)
    finally:
        os.kill(server, signal.SIGCONT)
