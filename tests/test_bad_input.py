"""Bad input at admission: a clear error naming what was wrong, and nothing kept.

Empty prompts, oversized prompts and frames, empty paths, a command with no argv,
and prompts whose line ends or size a terminal would mangle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
from orcr_test_driver import read_state  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402
from orcr_core.protocol import MAX_FRAME, MAX_PROMPT  # noqa: E402
from orcr_core.sdk.client import ServerError  # noqa: E402


def _nothing_kept(server) -> None:
    assert server.run("agent", "ls", "--all", "--json", check=True).stdout.strip() == "[]"
    assert list((server.path / "agents").iterdir()) == []


@pytest.mark.parametrize("provider", ["testp", "echo", "claude", "codex"])
@pytest.mark.parametrize("prompt", ["", "   ", "\n\t \r\n"])
def test_empty_or_whitespace_prompt_is_refused_for_every_provider(server, provider, prompt):
    r = server.run("agent", "run", "--provider", provider, "--path", "e/x", prompt)
    assert r.returncode == 1, r
    assert "[empty_prompt]" in r.stderr and "none at all" in r.stderr
    _nothing_kept(server)


def test_empty_prompt_is_refused_for_command_and_from_stdin(server):
    r = server.run("agent", "run", "--provider", "command", "--prompt", " ", "--", "sh")
    assert r.returncode == 1 and "[empty_prompt]" in r.stderr, r
    r = server.run("agent", "run", "--provider", "testp", "-", input="  \n")
    assert r.returncode == 1 and "[empty_prompt]" in r.stderr, r
    _nothing_kept(server)


def test_no_prompt_starts_idle_and_send_refuses_an_empty_one(server):
    server.run("agent", "run", "--provider", "testp", "--path", "n/p", check=True)
    r = server.run("agent", "wait", "n/p", "--timeout", "30s", check=True)
    assert r.stdout.split()[:2] == ["n/p", "idle"]
    r = server.run("agent", "send", "n/p", " \n ")
    assert r.returncode == 1 and "[empty_prompt]" in r.stderr, r
    a = server.get("n/p")
    assert (a["status"], a["turn"]) == ("idle", 0)


def test_crlf_in_a_prompt_is_typed_as_one_newline(server):
    server.run("agent", "run", "--provider", "testp", "--path", "c/r", "-", input="a\r\nb\rc\n")
    until(lambda: any(p["prompts"] for p in read_state()["panes"].values()), what="the prompt")
    (pane,) = read_state()["panes"].values()
    assert pane["prompts"] == ["a\nb\nc\n"]
    (d,) = (server.path / "agents").iterdir()
    assert json.loads((d / "launch.json").read_text())["prompt"] == "a\nb\nc\n"


def test_a_5mb_prompt_from_stdin_says_prompt_too_large_with_the_limit(server):
    big = "x" * (5 * 1024 * 1024)
    for args in (("agent", "run", "--provider", "testp", "-"), ("agent", "send", "n/a", "-")):
        r = server.run(*args, input=big)
        assert r.returncode == 1, r
        assert "[prompt_too_large]" in r.stderr and f"limit of {MAX_PROMPT} bytes" in r.stderr
    _nothing_kept(server)
    # just over the limit in UTF-8 bytes, under it in characters
    r = server.run("agent", "run", "--provider", "testp", "-", input="é" * (MAX_PROMPT // 2 + 1))
    assert r.returncode == 1 and "[prompt_too_large]" in r.stderr
    # the limit itself is fine
    r = server.run("agent", "run", "--provider", "testp", "-", input="y" * MAX_PROMPT)
    assert r.returncode == 0, r.stderr


def test_the_server_refuses_an_oversized_prompt_too(server):
    """A client that skips the check still gets prompt_too_large from the server."""
    with server.sdk() as orcr:
        params = {"cwd": "/", "provider": "testp", "prompt": "z" * (MAX_PROMPT + 1)}
        with pytest.raises(ServerError) as e:
            orcr.client.call("agent.run", **params)
        assert e.value.code == "prompt_too_large" and str(MAX_PROMPT) in e.value.message
        with pytest.raises(ServerError) as e:
            orcr.run("w" * (MAX_PROMPT + 1), provider="testp")
        assert e.value.code == "prompt_too_large"
        # a refused spec keeps its place among pipelined admissions
        res = orcr.run_many(
            [
                {"prompt": "a", "provider": "testp"},
                {"prompt": "b" * (MAX_PROMPT + 1), "provider": "testp"},
                {"prompt": "c", "provider": "testp"},
            ]
        )
        assert [r.get("error", {}).get("code") for r in res] == [None, "prompt_too_large", None]
        assert res[0]["path"] == "testp_1" and res[2]["path"] == "testp_2"


def test_an_oversized_frame_reaches_the_caller_as_text(server):
    """Over MAX_FRAME the server answers frame_too_large and closes: the client
    reports that, not a swallowed BrokenPipeError."""
    # just over the limit (sent whole), and far over it (the send breaks off)
    for size in (MAX_FRAME, 4 * MAX_FRAME):
        with server.sdk() as orcr:
            with pytest.raises(ServerError) as e:
                orcr.run(provider="command", argv=["sh", "-c", "#" + "q" * size])
        assert e.value.code == "frame_too_large", (e.value.code, e.value.message)
        assert str(MAX_FRAME) in e.value.message
    # the server keeps serving everyone else
    server.run("agent", "ls", check=True)


@pytest.mark.parametrize("flag", ["--path", "--name"])
@pytest.mark.parametrize("value", ["", " "])
def test_empty_path_and_empty_name_are_refused_alike(server, flag, value):
    r = server.run("agent", "run", "--provider", "testp", flag, value, "hi")
    assert r.returncode == 1, r
    assert "[invalid_path]" in r.stderr and f"{flag} is empty" in r.stderr
    _nothing_kept(server)
    r = server.run("agent", "run", "--provider", "testp", flag, value, "hi", env={"ORCR_PATH": "s"})
    assert r.returncode == 1 and f"{flag} is empty" in r.stderr


def test_command_provider_with_no_argv_is_refused_at_admission(server):
    r = server.run("agent", "run", "--provider", "command", "--path", "c/none")
    assert r.returncode == 1, r
    assert "[missing_argv]" in r.stderr and "-- PROGRAM" in r.stderr
    r = server.run("agent", "run", "--provider", "command", "--prompt", "hi")
    assert r.returncode == 1 and "[missing_argv]" in r.stderr
    _nothing_kept(server)


def test_command_provider_argv_from_the_config_is_enough(server):
    server.config(
        server.path.joinpath("config.toml").read_text()
        + '[providers.command]\nargv = ["sh", "-c", "sleep 60"]\n'
    )
    server.stop_server()
    server.start_server()
    r = server.run("agent", "run", "--provider", "command", "--path", "c/cfg", check=True)
    assert r.stdout.split()[0] == "c/cfg"
