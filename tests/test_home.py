"""ORCR_HOME: an unwritable one gets one clear line everywhere; a relative one is
resolved once (issue 8 item 7)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

COMMANDS = [
    ["agent", "ls"],
    ["agent", "run", "--provider", "echo", "--path", "h/x", "hi"],
    ["server", "start"],
    ["config", "set", "concurrency.max", "3"],
]


@pytest.fixture
def read_only_dir(short_tmp):
    """A directory nobody (this user included) can write: a read-only tmpfs as root,
    where permission bits mean nothing; mode 0555 otherwise."""
    d = short_tmp / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(d)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip(f"root cannot mount a read-only tmpfs here: {r.stderr!r}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def _orcr(env: dict, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _check_unwritable(orcr_home, home: Path, words: str) -> None:
    env = dict(orcr_home.env, ORCR_HOME=str(home))
    for args in COMMANDS:
        r = _orcr(env, *args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, (args, r.stderr)  # one line, no traceback
        assert str(home) in lines[0] and words in lines[0] and "ORCR_HOME" in lines[0], args
    r = _orcr(env, "doctor", "--json")
    assert r.returncode == 1
    rows = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    assert rows["directories"]["level"] == "fail"
    assert str(home) in rows["directories"]["detail"] and "ORCR_HOME" in rows["directories"]["fix"]


def test_read_only_home_gets_one_clear_line(orcr_home, read_only_dir):
    _check_unwritable(orcr_home, read_only_dir, "cannot write to")


def test_home_under_a_file_gets_one_clear_line(orcr_home, short_tmp):
    (short_tmp / "afile").write_text("")
    _check_unwritable(orcr_home, short_tmp / "afile" / "home", "is not a directory")


def test_doctor_passes_the_directories_of_a_writable_home(orcr_home):
    r = orcr_home.run("doctor", "--json")
    rows = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    assert rows["directories"]["level"] == "ok", rows["directories"]


def test_relative_home_is_resolved_once(orcr_home, short_tmp):
    """The server (started in /) and the agents' panes get the absolute path, so a
    relative ORCR_HOME never means a second directory somewhere else."""
    name = f"relhome-{uuid.uuid4().hex[:8]}"
    home = short_tmp / name
    home.mkdir()
    (home / "config.toml").write_text('[driver]\nname = "test"\n')
    env = dict(orcr_home.env, ORCR_HOME=name)
    try:
        r = _orcr(env, "agent", "ls", cwd=short_tmp)  # starts the server
        assert r.returncode == 0, r.stderr
        assert (home / "store.db").exists()
        r = _orcr(env, "server", "status", "--json", cwd=short_tmp)
        pid = json.loads(r.stdout)["pid"]
        proc = psutil.Process(pid)
        assert proc.environ()["ORCR_HOME"] == str(home)
        assert proc.cwd() == "/"
        assert _orcr(env, "config", "path", cwd=short_tmp).stdout.strip() == str(
            home / "config.toml"
        )
    finally:
        _orcr(env, "server", "stop", cwd=short_tmp)
        stray = Path("/", name)
        created = stray.exists()
        shutil.rmtree(stray, ignore_errors=True)
        assert not created, f"a relative ORCR_HOME was resolved against / ({stray})"
