"""Pointing a test's orcr at the fake Claude Code and Codex CLIs (tests/fakes)."""

from __future__ import annotations

import json
from pathlib import Path

FAKES = Path(__file__).resolve().parent / "fakes"


def configure(live, tmp: Path, claude=(), codex=(), timings="", claude_opts="", codex_opts=""):
    """Both providers point at the fakes (absolute argv, ``claude``/``codex`` their
    extra arguments) and at private homes under ``tmp``; ``timings``, ``claude_opts``
    and ``codex_opts`` are more lines of those config tables."""
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\nprompt_confirm = "1s"\n'
        + timings
        + f'[providers.claude]\nhome = "{tmp / "claude"}"\n'
        + f"argv = {json.dumps([str(FAKES / 'claude'), *claude])}\n"
        + claude_opts
        + f'[providers.codex]\nhome = "{tmp / "codex"}"\n'
        + f"argv = {json.dumps([str(FAKES / 'codex'), *codex])}\n"
        + codex_opts
    )


def wait_idle(live, path: str, timeout: int = 30) -> None:
    """``orcr agent wait``: fails with the server's log unless ``path`` goes idle in time."""
    r = live.run("agent", "wait", path, "--timeout", f"{timeout}s", timeout=timeout + 30)
    assert (r.returncode, r.stdout.strip()) == (0, f"{path} idle"), (r.stderr, live.server_log())


def run_agent(live, provider: str, path: str, prompt: str, cwd=None) -> str:
    """``orcr agent run`` through the real CLI; the new agent's uuid."""
    where = ["--cwd", str(cwd)] if cwd is not None else []
    r = live.run("agent", "run", "--provider", provider, "--path", path, *where, prompt, check=True)
    return r.stdout.split()[1]
