"""Scenarios both CLIs go through the same way (the test_claude/test_codex files run them).

``start(real, path, prompt)`` brings an agent to a state where orcr follows its
session: for Codex on tmux that is after a first completed turn (notify reports
the thread then), for Claude Code at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from fake_models import Hold

from orcr_core.kit.testing import alive, until


def start(real, path: str, prompt: str = "hello there") -> str:
    uuid = real.run(path, prompt)
    real.wait_idle(path)
    return uuid


def kill_a_working_agent(real, hold: Hold) -> None:
    """``agent kill`` during a turn: the agent ends ``killed``, the CLI is gone (its
    stream to the model dropped), its pane too."""
    start(real, "k/one")
    real.orcr("agent", "send", "k/one", "a long one")
    assert hold.started.wait(60), real.why("k/one")
    real.until_status("k/one", "working")
    real.orcr("agent", "kill", "k/one")
    a = real.get("k/one")
    assert (a["status"], a["exit_reason"]) == ("ended", "killed")
    assert hold.aborted.wait(30), "the CLI still streams after the kill"
    until(lambda: "k/one" not in real.mux.labels(), 30, "the pane closed")


def turn_timeout(real, hold: Hold, timeout: str = "2s") -> None:
    """A turn longer than ``--timeout`` ends the agent ``timeout`` and the CLI with it
    (``timeout``: long enough for the CLI to send its request first)."""
    start(real, "t/one")
    real.orcr("agent", "send", "t/one", "a long one", "--timeout", timeout)
    assert hold.started.wait(60), real.why("t/one")
    real.until_status("t/one", "ended", timeout=60)
    assert real.get("t/one")["exit_reason"] == "timeout"
    assert hold.aborted.wait(30), "the CLI still streams after the timeout"


def gc_an_idle_agent(real) -> None:
    """An agent idle longer than ``timings.gc_after`` ends ``gc`` and its CLI is gone."""
    start(real, "g/one")
    pid = real.pane_pid("g/one")
    real.until_status("g/one", "ended", timeout=60)
    assert real.get("g/one")["exit_reason"] == "gc"
    until(lambda: not alive(pid), 30, "the CLI ended")


def resume_an_exited_agent(real, first_prompt: str, history_has) -> None:
    """The CLI dies (SIGKILL): the agent ends ``exited``; ``agent resume`` starts the CLI
    on its recorded session, and the next prompt's request carries the old conversation."""
    uuid = start(real, "r/one", first_prompt)
    os.kill(real.pane_pid("r/one"), signal.SIGKILL)
    real.until_status("r/one", "ended", timeout=60)
    assert real.get("r/one")["exit_reason"] == "exited"
    r = real.orcr("agent", "resume", "r/one")
    assert r.stdout.split() == ["r/one", uuid]
    request = send_after_resume(real, "r/one", "after the resume")
    assert history_has(request.body, first_prompt), real.why("r/one")


def send_after_resume(real, path: str, prompt: str):
    """Once the resumed agent at ``path`` is idle, ``prompt`` sent to it is answered
    "resumed answer" (the fake model's script): the model's request for it, to check
    the history it carried."""
    real.until_status(path, "idle", timeout=max(90, real.idle_wait))
    before = len(real.model.conversation())
    real.orcr("agent", "send", path, prompt)
    real.wait_idle(path)
    assert real.read(path)["text"] == "resumed answer", real.why(path)
    request = real.model.conversation()[before]
    assert request.prompt == prompt
    return request


def fresh_folder(real, git: bool = False) -> Path:
    """A folder no CLI has been told to trust (a new worktree, the usual case; the
    ``real`` fixture trusts its project folder up front), a git repository with ``git``."""
    cwd = real.tmp / "fresh-worktree"
    cwd.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(cwd)], check=True)
    return cwd


def turn(real, path: str, prompt: str, timeout: float = 60) -> dict:
    """Send ``prompt`` to an idle agent and wait (up to ``timeout`` s) for the turn to end;
    ``agent read``'s answer."""
    real.orcr("agent", "send", path, prompt)
    real.until_status(path, "idle", timeout=timeout)
    return answer(real, path)


def answer(real, path: str) -> dict:
    """``agent read --json`` of the last turn, answered (exit 0) or failed (exit 7)."""
    r = real.orcr("agent", "read", path, "--json", check=False)
    assert r.returncode in (0, 7), real.why(path, r.stderr)
    return json.loads(r.stdout)


def idles(real, uuid: str) -> int:
    """How many times the agent became ``idle`` (once per turn, never twice)."""
    return sum(
        1
        for e in real.home.events(uuid)
        if e["kind"] == "agent.status" and e["data"]["to"] == "idle"
    )


def procs_under(folder: Path) -> list[int]:
    """Pids of processes whose executable or argv[0] lies under ``folder``."""
    out = []
    prefix = str(folder) + "/"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv0 = (Path("/proc") / pid / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if argv0.startswith(prefix):
            out.append(int(pid))
    return out


def procs_with_env(key: str, value: str) -> list[int]:
    """Pids of processes whose environment has ``key=value`` (whatever they exec'd)."""
    out = []
    needle = f"{key}={value}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = (Path("/proc") / pid / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env:
            out.append(int(pid))
    return out


def crash_during_delivery(real, start, point: str) -> None:
    """The server SIGKILLed at ``point`` of the first prompt's delivery and restarted at
    once: the model receives the prompt exactly once (the fake API's record of every
    request's user texts: never doubled in one message, never a second user message)
    and its answer is read back (issue 19 item 1)."""
    from fake_models import Script

    prompt = f"crash question at {point}"
    start(Script({"crash question": "Answer after the crash"}))
    real.home.stop_server()
    real.home.start_server(extra_env={"ORCR_FAULT": point})
    real.orcr("agent", "run", "--provider", real.provider, "--path", "c/one",
              "--cwd", str(real.cwd), prompt, check=False)  # fmt: skip
    assert real.home.proc.wait(120) == -signal.SIGKILL, real.home.server_log()
    real.home.start_server()
    real.wait_idle("c/one", 120)
    assert real.read("c/one")["text"] == "Answer after the crash", real.why("c/one")
    assert real.model.once_problems([prompt]) == [], real.model.user_texts()


# -- scenarios written once for every CLI. Claude Code's slow, interrupted and
# permission tests stay its own (tests/real_cli/test_claude.py): they run in the first
# turn and check its screen, its stream aborted and the blocked reason's wording


def first_prompt_and_follow_ups(real, start_cli) -> str:
    """A first prompt and two follow-ups, each answer read back with ``agent read``.
    Returns the agent's uuid."""
    from fake_models import Script

    start_cli(Script({"first": "Answer one", "second": "Answer two", "third": "Answer three"}))
    uuid = real.run("x/talk", "first question")
    real.wait_idle("x/talk")
    assert real.read("x/talk")["text"] == "Answer one", real.why("x/talk")
    for n, (word, answer) in enumerate((("second", "Answer two"), ("third", "Answer three")), 2):
        r = real.orcr("agent", "send", "x/talk", f"{word} question")
        assert f"working turn {n}" in r.stdout
        real.wait_idle("x/talk")
        assert real.read("x/talk")["text"] == answer, real.why("x/talk")
    a = real.get("x/talk")
    assert (a["status"], a["turn"]) == ("idle", 3)
    assert real.model.prompts() == ["first question", "second question", "third question"]
    assert real.model.once_problems(["first question", "second question", "third question"]) == []
    return uuid


def usage_as_reported(real, path: str, turns: int) -> None:
    """Usage (issue 25): what orcr read from the transcript is what the fake API
    reported, for the agent, per turn and in ``orcr usage`` (each of the ``turns``
    turns had one answer, with known numbers)."""
    a = real.get(path)
    reported = real.model.reported()
    assert reported["cache_read"] == turns * 3000  # one per field: a mix-up shows
    assert {k: a["usage"][k] for k in reported} == reported, a["usage_turns"]
    assert [t["turn"] for t in a["usage_turns"]] == list(range(1, turns + 1))
    total = json.loads(real.orcr("usage", path.split("/")[0], "--json").stdout)["total"]
    assert {k: total[k] for k in reported} == reported


def slow_turn(real, start_cli) -> None:
    """A turn whose answer streams until released: ``working`` meanwhile, then ``idle``."""
    from fake_models import Script

    hold = Hold("A slowly streamed answer")
    start_cli(Script({"slow": hold}))
    start(real, "x/slow")
    real.orcr("agent", "send", "x/slow", "a slow one")
    assert hold.started.wait(60), real.why("x/slow")
    real.until_status("x/slow", "working")
    hold.release()
    real.wait_idle("x/slow")
    assert real.read("x/slow")["text"] == "A slowly streamed answer"


def interrupted_turn(real, start_cli) -> None:
    """Esc in the pane during a turn: the turn ends ``interrupted`` (``agent wait`` exit
    7), the agent takes the next prompt."""
    from fake_models import Script

    hold = Hold("never finished")
    start_cli(Script({"long": hold, "again": "second answer"}))
    start(real, "x/int")
    real.orcr("agent", "send", "x/int", "a long one")
    assert hold.started.wait(60), real.why("x/int")
    real.until_status("x/int", "working")
    real.keys("x/int", "Escape")
    r = real.orcr("agent", "wait", "x/int", "--timeout", "60s", check=False, timeout=90)
    assert r.returncode == 7 and "interrupted" in (r.stdout + r.stderr), real.why("x/int", r.stderr)
    real.orcr("agent", "send", "x/int", "again please")
    real.wait_idle("x/int")
    assert real.read("x/int")["text"] == "second answer"


def permission_blocked(real, start_cli, question: str) -> None:
    """A shell command the CLI asks about: the turn stays ``working``, the agent is
    blocked with ``question`` and the command; ``agent send --key enter`` allows it,
    it runs and the turn ends with the answer after it."""
    from fake_models import Script, Tool

    marker = real.tmp / "ran-it"
    start_cli(Script({"make": [Tool.bash(f"touch {marker}"), "made the file"]}))
    start(real, "x/ask")
    real.orcr("agent", "send", "x/ask", "make a file")
    a = real.until_blocked("x/ask", question, timeout=60)
    assert a["status"] == "working" and f"touch {marker}" in a["blocked"], a
    assert not marker.exists()
    real.orcr("agent", "send", "x/ask", "--key", "enter")
    real.wait_idle("x/ask")
    assert marker.exists(), real.why("x/ask")
    assert real.read("x/ask")["text"] == "made the file"
    assert real.get("x/ask")["blocked"] is None


def errored_turn(real, start_cli, error=None) -> None:
    """The model API fails past the CLI's retries (``error``, a 500 by default): the turn
    ends ``errored`` (``agent wait`` exit 7) and the next prompt is answered."""
    from fake_models import Error, Script

    error = error or Error(500, "fake server error", times=50)
    start_cli(Script({"broken": error, "next": "fine again"}))
    start(real, "x/err")
    real.orcr("agent", "send", "x/err", "broken please")
    r = real.orcr("agent", "wait", "x/err", "--timeout", "90s", check=False, timeout=120)
    assert r.returncode == 7 and "errored" in (r.stdout + r.stderr), real.why("x/err", r.stderr)
    real.orcr("agent", "send", "x/err", "next please")
    real.wait_idle("x/err")
    assert real.read("x/err")["text"] == "fine again", real.why("x/err")


def usage_limit_holds(real, start_cli, limit: dict, waits: bool | None = False, timeout=150.0):
    """The real CLI meets its vendor's usage-limit 429 (``limit``: a
    tests/fake_models/limits.py body) on every request: its queue is held, a second agent
    of the provider stays ``queued (held: usage limit <provider>…)``. ``waits``: the CLI
    waits (asks) instead of ending the turn, and the agent shows it, still working."""
    from fake_models import RateLimit, Script

    real.timings.setdefault("blocked_after", "2s")
    start_cli(Script({"go": RateLimit(**limit)}))
    real.run("x/lim", "go now")
    provider = real.provider
    with real.home.sdk() as o:
        try:
            until(lambda: provider in (o.status().get("usage_limits") or {}), timeout, "a hold")
        except AssertionError as exc:
            raise AssertionError(real.why("x/lim", str(exc))) from None
        a = o.get("x/lim")
        if waits:
            assert a["status"] == "working" and a["waiting"].startswith("usage limit"), a
        elif waits is not None:  # None: either (OpenCode waits, then ends the turn)
            assert a["status"] == "idle" and a["turn_error"], a
        real.run("x/next", "next one")
        b = o.get("x/next")
        assert b["status"] == "queued" and b["held"].startswith(f"usage limit {provider}"), b
    return a


def sandboxed_turns(
    real, start_cli, pass_env: tuple[str, ...] = (), approve: str | None = None, tool=None
) -> None:
    """The CLI answers in a sandboxed agent whose ``allow_net`` is only the fake model
    API (``--allow-net 127.0.0.1:<port>``: its requests go through orcr's allowlist
    proxy, the ``HTTP(S)_PROXY`` it is given), keeps its transcript (orcr follows two
    turns), and its tool call is confined while the agent goes on: a write outside its
    cwd refused (one inside works), a planted ``~/.ssh`` key unread although the config
    allows ``~/.ssh`` (the deny list wins: the key's text never reaches the fake model,
    which records every request, tool results included), a ``curl`` to a 127.0.0.1 port
    not in ``allow_net`` never connects (a listener sees no connection). Then the CLI is
    SIGKILLed and ``agent resume`` brings it back sandboxed (``--unshare-net`` in the
    new start's argv, the same ``allow_net``) in the same conversation: the next request
    carries the first prompt, and each prompt reached the model exactly once.
    ``pass_env``: the test's variables the CLI needs (its fake key, ...), by name;
    ``approve``: the CLI's permission question, answered with Enter (its first choice);
    ``tool(command)``: the CLI's shell call (default ``Tool.bash``)."""
    import secrets
    import shutil
    import socket
    import tempfile

    from fake_models import Script, Tool

    outside = Path(tempfile.mkdtemp(prefix="orcr-sbx-", dir="/var/tmp"))  # not hidden
    real.stack.callback(shutil.rmtree, outside, True)
    key = real.tmp / "user" / ".ssh" / "id_sbx"  # the server's (and agent's) HOME
    key.parent.mkdir(parents=True, exist_ok=True)
    secret = f"SECRET-KEY-{secrets.token_hex(8)}"
    key.write_text(secret + "\n")
    listener = socket.socket()  # a service on the loopback, not in allow_net
    real.stack.callback(listener.close)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    closed = listener.getsockname()[1]
    command = (
        f"touch inside-ok; touch {outside}/escaped; cat {key}; "
        f"curl -s -m 5 http://127.0.0.1:{closed}/; echo went on"
    )
    extra = (f'[sandbox]\npass_env = {list(pass_env)!r}\nallow_read = ["~/.ssh"]\n').replace(
        "'", '"'
    )
    call = (tool or Tool.bash)(command)
    script = {"write": [call, "wrote it"], "again": "second answer", "resume": "resumed answer"}
    start_cli(Script(script), extra=extra)
    port = real.model.url.rsplit(":", 1)[1]
    uuid = real.run("s/box", "write please", "--sandbox", "--allow-net", f"127.0.0.1:{port}")
    if approve:
        real.until_blocked("s/box", approve, timeout=real.idle_wait)
        real.orcr("agent", "send", "s/box", "--key", "enter")
    real.wait_idle("s/box")
    assert real.read("s/box")["text"] == "wrote it", real.why("s/box")
    assert (real.cwd / "inside-ok").exists(), real.why("s/box", "the tool call did not run")
    assert not (outside / "escaped").exists()
    leaked = [r.index for r in real.model.requests if secret in json.dumps(r.body)]
    assert leaked == [], f"the ~/.ssh key reached the model in requests {leaked}"
    try:
        listener.accept()[0].close()
        raise AssertionError(f"the sandboxed agent connected to 127.0.0.1:{closed}")
    except BlockingIOError:
        pass  # no connection came
    real.orcr("agent", "send", "s/box", "again please")
    real.wait_idle("s/box")
    a = real.get("s/box")
    assert (a["turn"], a["sandbox"]["allow_net"]) == (2, [f"127.0.0.1:{port}"]), a
    assert real.read("s/box")["text"] == "second answer"
    assert real.model.prompts()[-1] == "again please"
    started = [e for e in real.home.events(uuid) if e["kind"] == "pane.start_requested"]
    assert "--unshare-net" in started[0]["data"]["argv"]  # no way out but the proxy

    os.kill(real.pane_pid("s/box"), signal.SIGKILL)
    real.until_status("s/box", "ended", timeout=60)
    assert real.get("s/box")["exit_reason"] == "exited", real.why("s/box")
    r = real.orcr("agent", "resume", "s/box")
    assert r.stdout.split() == ["s/box", uuid], r.stdout
    request = send_after_resume(real, "s/box", "resume please")
    assert "write please" in request.user_texts, request.user_texts  # the same conversation
    a = real.get("s/box")
    assert a["sandbox"]["allow_net"] == [f"127.0.0.1:{port}"], a
    started = [e for e in real.home.events(uuid) if e["kind"] == "pane.start_requested"]
    assert len(started) == 2 and "--unshare-net" in started[1]["data"]["argv"], started
    prompts = ["write please", "again please", "resume please"]
    assert real.model.once_problems(prompts) == [], real.model.user_texts()
