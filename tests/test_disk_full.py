"""Issue 20 item 31: a full disk gives a clear ``disk full: <dir>`` error with its own
code (``disk_full``), nothing half-admitted, and recovery once space is freed; a dead
program's last words are never cut mid-word."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest
from orcr_tmux.prompt import tail_words

from orcr_core.kit.testing import until


@pytest.fixture
def small_disk(short_tmp):
    """A 2 MiB tmpfs (root only)."""
    mnt = short_tmp / "disk"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt):
    path = mnt / f"fill-{uuid.uuid4().hex}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)  # unbuffered: the last write is the one refused
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def test_a_full_disk_is_disk_full_naming_the_directory(orcr_home, small_disk):
    home = small_disk / "h"
    home.mkdir()
    orcr_home.env["ORCR_HOME"] = str(home)
    orcr_home.path = home
    orcr_home.config('[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\n')
    orcr_home.start_server()
    try:
        orcr_home.run("agent", "run", "-p", "testp", "--path", "f/a", check=True)
        orcr_home.run("agent", "wait", "f/a", "--timeout", "30s", check=True)
        fill = _fill(small_disk)
        r = orcr_home.run("agent", "run", "-p", "testp", "--path", "f/b", "hello")
        assert r.returncode == 1, r
        assert "[disk_full]" in r.stderr and f"disk full: {home}" in r.stderr, r.stderr
        assert "Errno" not in r.stderr and "server_error" not in r.stderr
        r = orcr_home.run("agent", "send", "f/a", "more")
        assert r.returncode == 1 and "[disk_full]" in r.stderr and str(home) in r.stderr, r
        assert len(os.listdir(home / "agents")) == 1  # nothing half-admitted
        fill.unlink()
        orcr_home.run("agent", "run", "-p", "testp", "--path", "f/b", "hello", check=True)
        orcr_home.run("agent", "send", "f/a", "more", check=True)
        a = orcr_home.get("f/a")
        assert a["turn"] == 1 and a["status"] in ("working", "idle")
    finally:
        orcr_home.stop_server()
        orcr_home.kill_server()
        orcr_home.reap()


def test_last_words_keep_the_end_and_cut_between_words():
    line = "word " * 80 + "OSError: [Errno 28] No space left on device"
    out = tail_words(line)
    assert len(out) <= 200 and out.endswith("No space left on device")
    assert out.startswith("…word ") and tail_words("short line") == "short line"


def test_a_wrapped_last_line_is_read_whole(live):
    if live.mux.kind != "tmux":
        return  # herdr reports no last words
    live.start_server()
    script = 'echo "$(printf "wordy%.0s " $(seq 60))No space left on device"; exit 3'
    live.run(
        "agent",
        "run",
        "-p",
        "command",
        "--prompt",
        "go",
        "--path",
        "d/x",
        "--",
        "sh",
        "-c",
        script,
        check=True,
    )
    a = until(
        lambda: (lambda a: a if a["status"] == "ended" else None)(live.get("d/x")),
        30,
        what="d/x to end",
    )
    assert a["error"].endswith("No space left on device"), a["error"]
    assert ": wordy wordy" in a["error"] or ": …wordy " in a["error"], a["error"]
