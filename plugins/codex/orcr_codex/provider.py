"""The Codex CLI provider adapter.

Pinned to ``>=0.104,<0.172``: completion is read from the task events
(``task_started``/``task_complete``/``turn_aborted``), persisted since about
0.99-0.104 (openai/codex#11246); the earliest fixture with them is
0.104.0-alpha.1. The paginated history mode is covered by the 0.155.1 fixture
and was seen unchanged through 0.159.3 (TRANSCRIPTS.md section 2.8). The real
Codex 0.104.0, 0.130.0, 0.160.0 and 0.171.0 passed the whole real_cli tier on
2026-11-30 (turns, follow-ups, a held turn, an approval, an interrupt, kill,
timeout, GC, ``resume``, the dialogs; see docs/providers/real-cli.md), so the pin
spans 0.104 to 0.171; 0.160 changed subagent metadata and parent meta replay,
which the tier does not exercise. Older
rollouts (e.g. the 0.58 fixture) still parse, but their turn ends are guesses,
so they need ``allow_unpinned``.

Codex cannot be given a session id up front: the thread id reaches orcr from
herdr's report (``SessionPointer("herdr:codex", "id", <thread id>)``) once
the first prompt has created the rollout.

The JSONL tailer and adapter helpers live in ``orcr_core`` (shared with the
Claude adapter and available to any third-party adapter).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from orcr_codex import screen
from orcr_codex.turns import CodexTurns
from orcr_core.contracts import InputState, LaunchSpec, ScreenState, SessionPointer
from orcr_core.kit.adapter_helpers import (
    JsonlAdapter,
    base_argv,
    config_root,
    prompt_search,
    str_list,
)

#: orcr's Codex agents start no app-server daemon of their own (see launch_argv)
NO_DAEMON = "features.daemon_auto_start=false"


def _meta_id(path: str) -> str | None:
    """``session_meta.payload.id`` from the first line, or None when unreadable."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
        payload = json.loads(first).get("payload", {})
        return payload.get("id") if isinstance(payload, dict) else None
    except (OSError, ValueError, AttributeError):
        return None


class CodexProvider(JsonlAdapter):
    name = "codex"
    #: the sandbox (docs/sandbox.md): its model API, and the variables it may need
    sandbox_hosts = ("api.openai.com", "chatgpt.com")
    sandbox_env = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME")
    #: per-run options ``agent run --model/--arg`` take (over [providers.<name>])
    run_options = ("model", "args")
    supported_versions = ">=0.104,<0.172"
    #: the command run by default, and how to install it (``orcr doctor``)
    cli = ("codex", "npm install -g @openai/codex")
    has_transcript = True

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """``argv`` + ``-c features.daemon_auto_start=false`` + ``-c notify=[...]`` +
        ``--model X`` + ``extra_args`` (no shell).

        ``daemon_auto_start`` off: Codex 0.16x starts a managed app-server daemon
        (``codex app-server --listen unix:// --managed-daemon``, in its own session)
        that outlives the TUI and may serve every Codex of that ``CODEX_HOME``. orcr's
        agents run Codex's app server inside the TUI instead, so ending an agent ends
        all it started; a daemon already running (the user's) is left alone
        (docs/decisions.md). ``extra_args = ["-c", "features.daemon_auto_start=true"]``
        restores Codex's default. Older Codex ignores the unknown feature.

        ``notify`` makes Codex run ``orcr internal codex-notify`` after each turn
        with the thread id, so orcr finds the rollout under any multiplexer, not
        only under herdr with its integration. It replaces a ``notify`` of the
        user's own for orcr's agents only; ``[providers.codex] notify = false``
        leaves it alone.
        """
        fixed = ["-c", NO_DAEMON]
        if spec.options.get("notify", True):
            program = [sys.executable, "-m", "orcr_core.cli", "internal", "codex-notify"]
            fixed += ["-c", "notify=" + json.dumps(program)]
        return base_argv(self.name, spec.options, "codex", fixed, "--model")

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """``argv`` + ``resume <thread id>`` + the launch flags: Codex's ``resume``
        subcommand continues that thread (in the adapter's whole range)."""
        argv = self.launch_argv(spec)
        head = len(str_list(spec.options.get("argv", ["codex"]), "providers.codex.argv"))
        return [*argv[:head], "resume", pointer.value, *argv[head:]]

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return None  # codex picks its thread id; notify (or herdr) reports it

    def launch_env(self, spec: LaunchSpec) -> dict[str, str | None]:
        """A Codex started from inside another must not inherit its thread id
        (herdr's hook skips reports whose CODEX_THREAD_ID differs)."""
        env: dict[str, str | None] = {"CODEX_THREAD_ID": None}
        if spec.options.get("home"):
            env["CODEX_HOME"] = str(spec.options["home"])
        return env

    def sandbox_paths(self, spec: LaunchSpec) -> list[str]:
        """``$CODEX_HOME`` (``~/.codex``): its sessions (the transcripts), auth and config."""
        return [f"{config_root(spec.options, 'CODEX_HOME', '~/.codex')}/"]

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """``<root>/sessions/YYYY/MM/DD/rollout-*-<id>.jsonl``, then ``archived_sessions/``.

        The file name is only a hint (its date is local time): a candidate whose
        first line names another thread is skipped. Compressed ``.jsonl.zst``
        rollouts (older than about a week) are not read.
        """
        if pointer.kind == "path":
            return pointer.value if os.path.isfile(pointer.value) else None
        root = config_root(spec.options, "CODEX_HOME", "~/.codex")
        name = f"rollout-*-{glob.escape(pointer.value)}.jsonl"
        for pattern in (
            Path(glob.escape(str(root / "sessions"))) / "*" / "*" / "*" / name,
            Path(glob.escape(str(root / "archived_sessions"))) / name,
        ):
            found = sorted(glob.glob(str(pattern)), key=os.path.getmtime, reverse=True)
            for path in found:
                if os.path.isfile(path) and _meta_id(path) in (pointer.value, None):
                    return path
        return None

    def find_session(
        self, spec: LaunchSpec, prompt: str, since: float, taken: set[str] = frozenset()
    ) -> SessionPointer | None:
        """The thread whose rollout received ``prompt`` (as a whole message): created
        since ``since`` (the agent's start), for ``spec.cwd``, a user thread (no
        subagent), not ``taken`` by another agent; the newest when several match.
        Several agents given one prompt in one folder all match: the caller skips a
        rollout another agent's process holds open (``orcr_core.agents.sessions``).

        Codex reports its thread only through ``notify`` after a completed turn, so a
        first turn that is interrupted or fails would leave orcr without the rollout;
        the monitor then finds it by the prompt (``orcr_core.agents.sessions``).
        """
        root = config_root(spec.options, "CODEX_HOME", "~/.codex") / "sessions"
        days = sorted({time.strftime("%Y/%m/%d", time.localtime(t)) for t in (since, time.time())})
        cwd = os.path.realpath(spec.cwd)
        holds = prompt_search(prompt)  # the whole prompt: "hello 1" is not "hello 10"
        found: list[tuple[float, str]] = []
        for day in days:
            for path in glob.glob(os.path.join(glob.escape(str(root / day)), "rollout-*.jsonl")):
                try:
                    if os.path.getmtime(path) < since - 1:
                        continue
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        meta = json.loads(fh.readline()).get("payload", {})
                        head = fh.read(4 * 1024 * 1024)
                except (OSError, ValueError, AttributeError):
                    continue
                thread = meta.get("id") if isinstance(meta, dict) else None
                if (
                    not thread
                    or thread in taken
                    or meta.get("thread_source") == "subagent"
                    or meta.get("parent_thread_id")
                    or os.path.realpath(str(meta.get("cwd") or "")) != cwd
                    or not holds(head)
                ):
                    continue
                found.append((os.path.getmtime(path), thread))
        if not found:
            return None
        return SessionPointer("orcr:rollout", "id", max(found)[1])

    def input_state(self, text: str) -> InputState:
        """The composer and a running turn, after a prompt's Enter (:mod:`orcr_codex.screen`)."""
        return screen.input_state(text)

    def screen_state(self, text: str, spec: LaunchSpec) -> ScreenState:
        """Ready at its input, or a start-up question first (:mod:`orcr_codex.screen`)."""
        return screen.screen_state(text, spec)

    def usage_limit(self, error: str) -> ScreenState | None:
        """A turn's error that is Codex's usage limit, with its reset (orcr_core/usage_limits)."""
        return screen.usage_limit(error)

    def turns(self, settle: float, blocked_after: float | None) -> CodexTurns:
        return CodexTurns(settle=settle, blocked_after=blocked_after)


def summarize(path: str) -> dict[str, Any]:
    """One whole transcript as ``{"provider", "version", "state", "turns"}``."""
    return CodexProvider().summarize(path)
