"""The Claude Code provider adapter.

Pinned to ``>=2.0,<2.1.200 || >=2.1.276,<2.2``. The transcript fixtures cover
1.0.98 (inline sidechains, ``stop_reason`` mostly null), 2.1.38 (``stop_reason``
null on every line, ``system/local_command``, queue operations) and 2.1.233
(``stop_reason`` on every split line, ``last-prompt`` records). The record shapes
the parser relies on (user/assistant envelope, ``message.id`` splits, interrupt
markers, ``isMeta``/``isSidechain``) are unchanged across that span per
TRANSCRIPTS.md section 1.8. The real Claude Code ran through the real_cli tier
on 2026-11-30 (docs/providers/real-cli.md, "Versions checked"); 2.2 is unseen.

Left out, with ``allow_unpinned`` they run with a warning:

- 1.0.x: its turns, dialogs and subagents work through orcr, but its
  ``--resume <id>`` (seen at 1.0.98 and 1.0.128) writes the continued
  conversation into a *new* session file, so orcr, following ``<id>.jsonl``,
  never sees a resumed agent's turns end.
- 2.1.200 up to 2.1.275: these releases were seen writing a turn's answer
  *before* its prompt line (the prompt's line waits for its attachments; with a
  quick answer from a local model API it lands after the answer), so orcr reads
  an answer with no prompt and then a prompt with no answer (``agent read``
  finds no text; before an empty turn ended on its end markers the agent stayed
  ``working``). Seen at 2.1.200, 2.1.250, 2.1.265 and 2.1.275, not at 2.1.175,
  2.1.186, 2.1.290, 2.1.300 or 2.1.332; it is a race, so the edges are where it
  was seen, one or two runs each.

orcr chooses the session id up front (``--session-id <agent uuid>``), so the
transcript is ``<root>/projects/<slug>/<uuid>.jsonl`` from the start, created
lazily at the first prompt.
"""

from __future__ import annotations

import glob
import os
import uuid
from typing import Any

from orcr_claude import screen, trust
from orcr_claude.slug import project_slug
from orcr_claude.turns import ClaudeTurns
from orcr_core.contracts import InputState, LaunchSpec, ProviderError, ScreenState, SessionPointer
from orcr_core.kit.adapter_helpers import JsonlAdapter, base_argv, config_root

#: A no-op Stop hook: with one configured, Claude writes a ``stop_hook_summary``
#: record at the end of every completed turn, which the reader takes as the turn's
#: end at once instead of after a quiet period (TRANSCRIPTS.md §3). Settings given
#: with --settings merge with the user's own; nothing of theirs is replaced.
STOP_HOOK_SETTINGS = '{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"true"}]}]}}'

NESTED_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_ENTRYPOINT",
)


class ClaudeProvider(JsonlAdapter):
    name = "claude"
    #: the sandbox (docs/sandbox.md): its model API, and the variables it may need
    sandbox_hosts = ("api.anthropic.com",)
    sandbox_env = (
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR",
    )  # fmt: skip
    #: per-run options ``agent run --model/--arg`` take (over [providers.<name>])
    run_options = ("model", "args")
    supported_versions = ">=2.0,<2.1.200 || >=2.1.276,<2.2"
    #: the command run by default, and how to install it (``orcr doctor``)
    cli = ("claude", "npm install -g @anthropic-ai/claude-code")
    has_transcript = True

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """``argv`` + ``--session-id <uuid>`` + ``--model X`` + ``extra_args`` (no shell)."""
        try:
            session = str(uuid.UUID(spec.uuid))
        except ValueError:
            raise ProviderError(
                f"claude --session-id needs a UUID, got {spec.uuid!r}", code="bad_session_id"
            ) from None
        fixed = ["--session-id", session]
        if spec.options.get("stop_hook", True):
            fixed += ["--settings", STOP_HOOK_SETTINGS]
        return base_argv(self.name, spec.options, "claude", fixed, "--model")

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """``argv`` + ``--resume <session id>`` (instead of ``--session-id``) + the rest.

        ``--resume <id>`` continues that conversation in the same session file
        (Claude Code 2.0 and later, the adapter's whole range; 1.0.x wrote a new
        file, which is why the pin starts at 2.0)."""
        fixed = ["--resume", pointer.value]
        if spec.options.get("stop_hook", True):
            fixed += ["--settings", STOP_HOOK_SETTINGS]
        return base_argv(self.name, spec.options, "claude", fixed, "--model")

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return SessionPointer(source="orcr", kind="id", value=spec.uuid)

    def launch_env(self, spec: LaunchSpec) -> dict[str, str | None]:
        """Drop what marks a process as running inside another Claude Code session:
        a nested Claude may otherwise skip writing its own transcript."""
        env: dict[str, str | None] = dict.fromkeys(NESTED_ENV)
        if spec.options.get("home"):
            env["CLAUDE_CONFIG_DIR"] = str(spec.options["home"])
        return env

    def sandbox_paths(self, spec: LaunchSpec) -> list[str]:
        """What Claude Code writes: its config dir (transcripts under ``projects/``) and,
        with the default dir, ``~/.claude.json`` (its settings and trust)."""
        root = config_root(spec.options, "CLAUDE_CONFIG_DIR", "~/.claude")
        paths = [f"{root}/"]
        if not (spec.options.get("home") or os.environ.get("CLAUDE_CONFIG_DIR")):
            paths.append(os.path.expanduser("~/.claude.json"))
        return paths

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """Glob ``<root>/projects/*/<id>.jsonl``, else the slug path; None until it exists."""
        if pointer.kind == "path":
            return pointer.value if os.path.isfile(pointer.value) else None
        root = config_root(spec.options, "CLAUDE_CONFIG_DIR", "~/.claude") / "projects"
        pattern = os.path.join(glob.escape(str(root)), "*", glob.escape(pointer.value) + ".jsonl")
        found = [p for p in glob.glob(pattern) if os.path.isfile(p)]
        if found:
            return max(found, key=os.path.getmtime)
        by_slug = root / project_slug(spec.cwd) / f"{pointer.value}.jsonl"
        return str(by_slug) if by_slug.is_file() else None

    def pre_trust(self, spec: LaunchSpec) -> str | None:
        """Record ``spec.cwd`` (a checkout orcr just made) as a folder Claude Code
        trusts, so its trust dialog does not appear (:mod:`orcr_claude.trust`); the
        file written, or None when it was trusted already."""
        path = trust.config_file(spec.options)
        return str(path) if trust.trust(path, spec.cwd) else None

    def input_state(self, text: str) -> InputState:
        """The composer and a running turn, after a prompt's Enter (:mod:`orcr_claude.screen`)."""
        return screen.input_state(text)

    def usage_limit(self, error: str) -> ScreenState | None:
        """A turn that ended on the API's 429 or the plan's usage limit holds claude's
        queue, until the reset it names (5 minutes when none: an API key's 429). Claude
        Code 2.1.332 ends the turn on a plan's limit too ("You've hit your 5-hour limit ·
        resets 12:24am (UTC)") and then waits to go on by itself (orcr_core/usage_limits)."""
        return screen.limit_error(error)

    def screen_state(self, text: str, spec: LaunchSpec) -> ScreenState:
        """Ready at its input, or a start-up question first (:mod:`orcr_claude.screen`)."""
        return screen.screen_state(text, spec)

    def turns(self, settle: float, blocked_after: float | None) -> ClaudeTurns:
        return ClaudeTurns(settle=settle, blocked_after=blocked_after)


def summarize(path: str) -> dict[str, Any]:
    """One whole transcript as ``{"provider", "version", "state", "turns"}``."""
    return ClaudeProvider().summarize(path)
