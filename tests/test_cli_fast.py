"""The hot verbs' fast path (orcr_core/cli/fast.py): the argument lists it takes
print and exit exactly as click's path does, and everything else goes to click."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.cli import fast  # noqa: E402
from orcr_core.kit.testing import until  # noqa: E402

#: click's path alone: the group's own main, which never looks at the fast path
CLICK = "import sys; sys.argv[0] = 'orcr'; from orcr_core.cli.app import main; main()"


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "ls"],
        ["agent", "ls", "p/", "--all", "--json"],
        ["agent", "run", "-p", "testp", "--path", "a", "--arg", "x", "--arg=y", "hi"],
        ["agent", "run", "--provider=echo", "--timeout", "1h30m", "--gc-after", "10", "--rm", "x"],
        ["agent", "run", "--prompt", "hi"],
        ["agent", "run", "--sandbox", "--no-sandbox", "x"],
        ["agent", "get", "a", "--json"],
        ["agent", "kill", "a/*", "--yes"],
        ["agent", "wait", "a", "--until", "ended", "--timeout", "250ms"],
        ["agent", "send", "a", "next", "--timeout", "7d"],
        ["agent", "read", "--last", "a"],
    ],
)
def test_the_shapes_it_takes(argv):
    assert fast.parse(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "ls", "--help"],
        ["agent", "run", "-h", "x"],
        ["agent", "ls", "--unmanaged"],
        ["agent", "ls", "a", "b"],  # one PREFIX at most
        ["agent", "get"],
        ["agent", "run", "--", "x"],
        ["agent", "run", "-"],  # stdin
        ["agent", "run", "--al", "x"],  # click names the close match
        ["agent", "run", "--path"],  # no value
        ["agent", "run", "--path", "-x", "y"],
        ["agent", "run", "--json=1", "x"],
        ["agent", "run", "--timeout", "0s", "x"],
        ["agent", "run", "--timeout", "8d", "x"],  # over the turn limit
        ["agent", "run", "--timeout", " 5s", "x"],
        ["agent", "run", "--gc-after", "0.5", "x"],
        ["agent", "run", "--cwd", "/no/such/dir", "x"],
        ["agent", "run", "--cwd", "/etc/hostname", "x"],  # a file
        ["agent", "run", "a", "b"],  # click asks for one quoted prompt
        ["agent", "wait", "a", "--until", "IDLE"],
        ["agent", "send", "a", "--key", "enter"],
        ["agent", "send", "a"],
        ["agent", "resume", "a"],
        ["agent", "--help"],
        ["--version"],
        ["server", "status"],
        [],
    ],
)
def test_everything_else_goes_to_click(argv):
    """Planted: unknown options taken as flags -> 6 cases fail (--help, -h, --unmanaged...)."""
    assert fast.parse(argv) is None


def test_what_only_click_can_say_goes_to_click(monkeypatch):
    """A glob kill without --yes (it may ask), a command provider's argv, a stdin
    --prompt: run() leaves them to click."""
    monkeypatch.setattr(fast, "_call", lambda *a: pytest.fail(f"fast path ran {a}"))
    assert fast.run(["agent", "kill", "a/*"]) is None
    assert fast.run(["agent", "run", "-p", "command", "sleep"]) is None
    assert fast.run(["agent", "run", "--prompt", "-"]) is None


def both(home, *args, input=None):
    """(returncode, stdout, stderr) of ``orcr ARGS`` through main() and through click alone."""
    runs = []
    for argv in ([sys.executable, "-m", "orcr_core.cli"], [sys.executable, "-c", CLICK]):
        r = subprocess.run(
            [*argv, *args], env=home.env, capture_output=True, text=True, timeout=60, input=input
        )
        runs.append((r.returncode, AGE.sub("<age>", r.stdout), r.stderr))
    return runs


#: agent ls's AGE column, which ticks between two calls
AGE = re.compile(r"(?<=\s)\d+[smhd](?=\s)")


def test_both_paths_print_and_exit_the_same(server):
    """Each hot verb, its text and JSON forms and its refusals, by the fast path and by
    click's: the same bytes on stdout and stderr, the same exit code.
    Planted: the fast path printing a CliFailure without 'Error: ' -> fails (wait's timeout)."""
    fast_run, click_run = both(server, "agent", "run", "-p", "testp", "--path", "f/a", "hi")
    assert fast_run[0] == 0 and fast_run[1].startswith("f/a ") and fast_run[2] == ""
    assert click_run == (1, "", "Error: path f/a is in use [path_taken]\n") or click_run, click_run
    with server.sdk() as o:
        until(lambda: o.get("f/a")["status"] == "working", what="f/a working")
    (pane,) = [p for p, s in td.read_state()["panes"].items() if "f/a" in str(s.get("label"))]
    td.set_status(pane, "idle")
    with server.sdk() as o:
        until(lambda: o.get("f/a")["status"] == "idle", what="f/a idle")
    cases = [
        ("agent", "ls"),
        ("agent", "get", "f/a", "--json"),
        ("agent", "get", "f/nobody"),  # not_found: exit 3
        ("agent", "wait", "f/a", "--until", "ended", "--timeout", "0.2s"),  # exit 4
        ("agent", "read", "f/a"),
        ("agent", "send", "f/a", "\udcff"),  # not UTF-8: refused before sending
        ("agent", "kill", "f/nobody", "--json"),
    ]
    for args in cases:
        fast_out, click_out = both(server, *args)
        assert fast_out == click_out, args
    assert both(server, "agent", "get", "f/nobody")[0][0] == 3


def test_a_hot_verb_without_a_server_says_so_as_click_does(orcr_home):
    """No server and no autostart for a missing socket dir's parent: both paths agree."""
    env = {"ORCR_SOCKET": str(orcr_home.path / "nowhere" / "orcr.sock")}
    runs = []
    for argv in ([sys.executable, "-m", "orcr_core.cli"], [sys.executable, "-c", CLICK]):
        r = subprocess.run(
            [*argv, "agent", "ls"],
            env=dict(orcr_home.env, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        runs.append((r.returncode, r.stdout, r.stderr))
    assert runs[0] == runs[1]
