"""Scenarios both CLIs go through the same way (the test_claude/test_codex files run them).

``start(real, path, prompt)`` brings an agent to a state where orcr follows its
session: for Codex on tmux that is after a first completed turn (notify reports
the thread then), for Claude Code at once.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from fake_models import Hold

from orcr_core.testing import until


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


def turn_timeout(real, hold: Hold) -> None:
    """A turn longer than ``--timeout`` ends the agent ``timeout`` and the CLI with it."""
    start(real, "t/one")
    real.orcr("agent", "send", "t/one", "a long one", "--timeout", "2s")
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
    until(lambda: not _alive(pid), 30, "the CLI ended")


def resume_an_exited_agent(real, first_prompt: str, history_has) -> None:
    """The CLI dies (SIGKILL): the agent ends ``exited``; ``agent resume`` starts the CLI
    on its recorded session, and the next prompt's request carries the old conversation."""
    uuid = start(real, "r/one", first_prompt)
    os.kill(real.pane_pid("r/one"), signal.SIGKILL)
    real.until_status("r/one", "ended", timeout=60)
    assert real.get("r/one")["exit_reason"] == "exited"
    r = real.orcr("agent", "resume", "r/one")
    assert r.stdout.split() == ["r/one", uuid]
    real.until_status("r/one", "idle", timeout=90)
    before = len(real.model.conversation())
    real.orcr("agent", "send", "r/one", "after the resume")
    real.wait_idle("r/one")
    assert real.read("r/one")["text"] == "resumed answer", real.why("r/one")
    request = real.model.conversation()[before]
    assert request.prompt == "after the resume"
    assert history_has(request.body, first_prompt), real.why("r/one")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


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
