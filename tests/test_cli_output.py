"""What the CLI prints: plain help, one JSON style, clear duration errors, text safe
for a terminal, a header for an empty list, clean progress lines."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import click
import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.cli import cli  # noqa: E402
from orcr_core.cli.agent import printable  # noqa: E402
from orcr_core.kit.testing import read_rest, read_until, until  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _walk(cmd, ctx):
    yield cmd, ctx
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            yield from _walk(sub, click.Context(sub, info_name=name, parent=ctx))


def test_help_texts_are_plain_text():
    """Docstrings become --help: no reST markup (double backticks) may show."""
    bad = [
        ctx.command_path
        # the root's context settings (-h/--help) as the real CLI has them: click caches
        # a command's help option from the first context that asks for it
        for cmd, ctx in _walk(cli, click.Context(cli, info_name="orcr", **cli.context_settings))
        if "``" in cmd.get_help(ctx)
    ]
    assert bad == []


def test_plugins_prints_text_by_default_and_json_with_the_flag(orcr_home):
    r = orcr_home.run("plugins", check=True)
    assert "providers 0.1.0 (orcr)\n  providers: command, echo (>=0.1,<0.2)\n" in r.stdout
    assert not r.stdout.lstrip().startswith("[")
    r = orcr_home.run("plugins", "--json", check=True)
    rows = json.loads(r.stdout)
    assert {"name": "orcr_test_driver"}.items() <= next(
        row for row in rows if row["name"] == "orcr_test_driver"
    ).items()


def test_empty_agent_ls_prints_the_header(server):
    r = server.run("agent", "ls", check=True)
    assert r.stdout == "PATH  STATUS  PROVIDER  TOKENS  MEM  AGE  UUID\n"
    assert server.run("agent", "ls", "--json", check=True).stdout == "[]\n"


def test_every_json_output_is_one_line(server):
    def one_json_line(*args, ok=(0,)):
        r = server.run(*args, "--json")
        assert r.returncode in ok, (args, r.stderr)
        assert r.stdout.count("\n") == 1, (args, r.stdout[:200])
        return json.loads(r.stdout)

    one_json_line("agent", "run", "--provider", "testp", "--path", "j/a")
    one_json_line("agent", "wait", "j/a", "--timeout", "30s")
    one_json_line("agent", "ls")
    one_json_line("agent", "get", "j/a")
    one_json_line("agent", "read", "j/a")
    one_json_line("agent", "kill", "j/a")
    one_json_line("server", "status")
    one_json_line("top", "--once")
    one_json_line("loop", "create", "nightly", "0 9 * * *", "--json", "--", "/bin/true")
    one_json_line("loop", "ls")
    one_json_line("loop", "run", "ls", "nightly")
    one_json_line("plugins")
    one_json_line("doctor", ok=(0, 1))
    transcript = server.path / "t.jsonl"
    transcript.write_text('{"type": "session", "version": "0.1.0"}\n')
    one_json_line("provider", "parse", "echo", str(transcript))


@pytest.mark.parametrize(
    "value, words",
    [
        ("0", "'0' is too short: a timeout is more than 0s"),
        ("0s", "'0s' is too short"),
        ("8d", "'8d' is over the limit: a turn timeout is more than 0s and at most 7d"),
        ("170h", "at most 7d"),
        ("soon", "'soon' is not a duration: give a number with a unit (ms, s, m, h, d)"),
        ("-5s", "'-5s' is not a duration"),
    ],
)
def test_bad_timeouts_are_usage_errors_naming_the_range(orcr_home, value, words):
    for args in (
        ("agent", "run", "--provider", "testp", "--timeout", value, "hi"),
        ("agent", "send", "--timeout", value, "x/y", "hi"),
    ):
        r = orcr_home.run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr, r.stderr
    assert not orcr_home.socket.exists()  # refused before any server was needed


def test_wait_timeout_zero_is_a_usage_error_but_has_no_upper_limit(server):
    r = server.run("agent", "wait", "nobody", "--timeout", "0")
    assert r.returncode == 2 and "'0' is too short" in r.stderr
    r = server.run("agent", "wait", "nobody", "--timeout", "8d")
    assert r.returncode == 3, r.stderr  # accepted; the agent is what is missing


def test_scope_errors_read_well(server):
    r = server.run("agent", "run", "--provider", "testp", "hi", env={"ORCR_PATH": "Bad"})
    assert r.returncode == 1 and "an ORCR_PATH scope is 1-8 segments" in r.stderr


def test_printable_drops_escapes_and_controls_but_tab_and_newline():
    text = "a\x07b\x03c\r\nd\x1b[31mred\x1b[0m\te\x1b]0;title\x07f\x7f\x9bg\n"
    assert printable(text) == "abc\ndred\tefg\n"


def test_read_of_a_screen_drops_controls_and_trailing_blank_lines(server):
    """A provider without a transcript is read from its screen: no BEL, no ^C, no
    padding of blank lines."""
    server.run("agent", "run", "--provider", "testp", "--path", "s/x", "-", check=True,
               input="a\x07b\x03c   \n\n\n\n\n")  # fmt: skip
    until(lambda: any(p["prompts"] for p in td.read_state()["panes"].values()), what="prompt")
    (pane_id,) = td.read_state()["panes"]
    td.set_status(pane_id, "idle")
    server.run("agent", "wait", "s/x", "--timeout", "30s", check=True)
    r = server.run("agent", "read", "s/x", check=True)
    assert r.stdout == "test pane ready\nabc\n"
    raw = json.loads(server.run("agent", "read", "s/x", "--json", check=True).stdout)
    assert raw["screen"].endswith("a\x07b\x03c   \n\n\n\n\n")  # --json keeps it as it was


def test_provider_parse_refuses_a_file_that_is_no_transcript(orcr_home):
    for provider in ("echo", "claude", "codex"):
        r = orcr_home.run("provider", "parse", provider, "/etc/passwd")
        assert r.returncode == 1, (provider, r.stdout)
        assert f"does not look like a transcript of provider '{provider}'" in r.stderr
        assert r.stdout == ""


def test_gen_cli_help_writes_nothing():
    out = ROOT / "docs" / "cli.md"
    before = out.stat().st_mtime_ns
    r = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--help"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "usage:" in r.stdout and "--check" in r.stdout
    r = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--chek"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr
    assert out.stat().st_mtime_ns == before


def test_wait_progress_on_a_terminal_clears_its_line(server):
    """Each progress update starts with carriage return + erase line, and the line is
    erased at the end: a shorter status leaves no characters of a longer one."""
    server.run("agent", "run", "--provider", "testp", "--path", "p/x", "hello", check=True)
    until(lambda: any(p["prompts"] for p in td.read_state()["panes"].values()), what="prompt")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "agent", "wait", "p/x", "--timeout", "60s"],
        env=server.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = read_until(master, b"working")
    (pane_id,) = td.read_state()["panes"]
    td.set_status(pane_id, "idle")
    assert proc.stdout.read() == b"p/x idle\n"
    assert proc.wait(60) == 0
    seen += read_rest(master)
    assert seen.count(b"\r") >= 2 and seen.count(b"\r") == seen.count(b"\r\x1b[K"), seen
    assert seen.endswith(b"\r\x1b[K"), seen
