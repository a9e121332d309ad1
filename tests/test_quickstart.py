"""docs/quickstart.md runs as written: every ``console`` block's commands are run in
order on real tmux with the echo provider, and what they print must be what the page
shows (ids, pids, ages and versions aside). A page that drifts from the code fails here."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "quickstart.md"

#: what legitimately differs between runs, and what it is compared as
VOLATILE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\bpid \d+"), "pid <pid>"),
    (re.compile(r"\bserver \d+ stopped"), "server <pid> stopped"),
    (re.compile(r"\bup \d+s"), "up <t>"),
    (re.compile(r"\bversion \S+"), "version <v>"),
    (re.compile(r"\bstore /\S+"), "store <path>"),
    # the machine's memory, and the floor (10% of it by default)
    (re.compile(r"\bmemory [\d.]+ \w+ available  floor [\d.]+ \w+"), "memory <m> floor <f>"),
    # the MEM column: a live agent's memory against its ceiling
    (re.compile(r"(?<=\s)\d+(?:\.\d)?[MG]/(?:\d+(?:\.\d)?[MG]|none)(?=\s)"), "<mem>"),
    # the ceilings line: the machine's mechanism, fleet ceiling and pressure (docs/ceilings.md)
    (re.compile(r"^ceilings .*$", re.M), "ceilings <mechanism fleet pressure>"),
    (re.compile(r"(?<=\s)\d+[smhd](?=\s)"), "<age>"),  # the AGE column
    (re.compile(r"\btranscripts \d+ notified"), "transcripts <n> notified"),  # load-dependent
    # inotify, or off where the machine's inotify instances or watches are used up
    (re.compile(r"\bnotified \(\w+\)"), "notified (<how>)"),
    (re.compile(r"\b\d+ polled"), "<n> polled"),
    (re.compile(r"\bwrite transactions \d+"), "write transactions <n>"),
    (re.compile(r"[ \t]+"), " "),  # column widths follow the values
]


def _normal(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        for pattern, repl in VOLATILE:
            line = pattern.sub(repl, line)
        out.append(line.strip())
    return out


def console_blocks(text: str) -> list[list[tuple[str, list[str]]]]:
    """Each ``console`` block as ``[(command, expected output lines), ...]``."""
    blocks = []
    for body in re.findall(r"^```console\n(.*?)^```", text, re.M | re.S):
        steps: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        blocks.append(steps)
    return blocks


def _run(env: dict, command: str) -> str:
    """One shell-free run of a documented command line (``A=b orcr ...``, ``&&``)."""
    command = re.sub(r"\s+#.*$", "", command)  # a trailing comment
    out = []
    for part in command.split(" && "):
        words = shlex.split(part)
        extra = {}
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            extra[key] = value
        assert words[0] == "orcr", f"the quick start runs only orcr: {part!r}"
        r = subprocess.run(
            [sys.executable, "-m", "orcr_core.cli", *words[1:]],
            env=dict(env, **extra),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, f"$ {part}\nexited {r.returncode}: {r.stderr}"
        out.append(r.stdout)
    return "".join(out)


def test_the_quick_start_has_console_blocks():
    blocks = console_blocks(DOC.read_text())
    assert len(blocks) >= 3 and all(blocks)


def test_the_quick_start_prints_what_it_shows(orcr_home, short_tmp):
    if not any(os.access(os.path.join(d, "tmux"), os.X_OK) for d in os.environ["PATH"].split(":")):
        pytest.fail("tmux is needed for the quick start test (apt-get install tmux)")
    sock = short_tmp / "tmux.sock"
    orcr_home.config(f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n')
    env = {k: v for k, v in orcr_home.env.items() if k != "ORCR_PLUGIN_MODULES"}
    try:
        for block in console_blocks(DOC.read_text()):
            for command, expected in block:
                actual = _run(env, command)
                if importlib.util.find_spec("orcr_pi") is None:  # plugins/pi, installed apart
                    expected = [ln for ln in expected if ln.strip() != "pi: 0/-"]
                assert _normal(actual) == _normal("\n".join(expected)), (
                    f"docs/quickstart.md shows other output for\n$ {command}\nit prints:\n{actual}"
                )
    finally:
        subprocess.run([sys.executable, "-m", "orcr_core.cli", "server", "stop"], env=env,
                       capture_output=True, timeout=60)  # fmt: skip
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def test_normalising_keeps_what_matters():
    """Only ids, pids, ages, versions and the machine's memory are masked: a status, a
    count or a schema number that differs still fails."""
    assert _normal("demo/hello  idle     echo  2s   7b2d7915-2f3d-470e-ae98-225d5c22db38") == [
        "demo/hello idle echo <age> <uuid>"
    ]
    assert _normal("store /x/store.db (schema 4)") != _normal("store /y/store.db (schema 1)")
    assert _normal("queue 0 queued  live 1/25") != _normal("queue 0 queued  live 0/25")
