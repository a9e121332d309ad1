"""The pi coding agent provider adapter (``@earendil-works/pi-coding-agent``; up to
0.73.1 published as ``@mariozechner/pi-coding-agent``).

Pinned to ``>=0.72.1,<0.74 || >=1.6.0,<1.7``: the releases the real_cli tier ran
(docs/providers/pi.md, "Versions checked"), 1.6.0 under the new name. The session
format (version 3 of pi's session header, the same file) and the ``stopReason`` values
the reader relies on are those both lines write (fixtures ``real-0.73.1-*.jsonl`` and
``real-1.6.0-*.jsonl``, captured from each).

orcr fixes the session file up front: ``pi --session <agent data dir>/pi-session.jsonl``
writes the agent's session there (a path that does not exist yet starts a new
session at it), and the same flag on that existing file resumes it, so launch and
resume are one argv. The rest of pi's setup is the user's: its agent folder
(``~/.pi/agent``, or ``[providers.pi] home`` as ``PI_CODING_AGENT_DIR``) with their
models, keys and settings.

pi writes no version into its session file. The adapter reads it from the installed
package (``package.json`` beside the ``pi`` script) when it launches: outside the pin
the launch is refused naming the range (``allow_unpinned`` runs it with a warning);
the version is kept beside the session (``pi-version``) for the reader to report.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from orcr_core.contracts import InputState, LaunchSpec, ProviderError, ScreenState, SessionPointer
from orcr_core.kit.adapter_helpers import JsonlAdapter, base_argv, str_list
from orcr_core.kit.jsonl_tail import JsonlTurnReader
from orcr_core.kit.versions import check_version
from orcr_pi.turns import PiTurns, limit_error

#: pi's npm package: its name since 1.x, and the one it had up to 0.73.1
PACKAGES = ("@earendil-works/pi-coding-agent", "@mariozechner/pi-coding-agent")
SESSION_FILE = "pi-session.jsonl"
VERSION_FILE = "pi-version"
#: the line under pi's input box: its working folder, then the context and model line
RULE = "\u2500" * 20
#: what pi shows over its input box while a turn runs
RUNNING = ("Working...",)


def package_version(program: str) -> str | None:
    """The version of the pi package whose ``pi`` script is ``program`` (found on PATH):
    ``package.json`` beside ``dist/cli.js``, which npm's ``bin/pi`` links to. None for a
    program that is not such a script (a wrapper, a test double)."""
    found = shutil.which(program)
    if not found:
        return None
    script = Path(os.path.realpath(found))
    for folder in (script.parent.parent, script.parent):
        try:
            meta = json.loads((folder / "package.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("name") in PACKAGES:
            version = meta.get("version")
            return version if isinstance(version, str) else None
    return None


class PiProvider(JsonlAdapter):
    name = "pi"
    #: the sandbox (docs/sandbox.md): the variables it may need (its model API depends on
    #: the model: add the host to [sandbox.pi] allow_net)
    sandbox_hosts: tuple[str, ...] = ()
    sandbox_env = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "PI_CODING_AGENT_DIR")
    #: per-run options ``agent run --model/--arg`` take (over [providers.<name>])
    run_options = ("model", "args")
    supported_versions = ">=0.72.1,<0.74 || >=1.6.0,<1.7"
    #: the command run by default, and how to install it (``orcr doctor``)
    cli = ("pi", "npm install -g @earendil-works/pi-coding-agent (pi 1.x needs Node.js 22.19+)")
    has_transcript = True

    def session_path(self, spec: LaunchSpec) -> str:
        return os.path.join(spec.data_dir, SESSION_FILE)

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """``argv`` + ``--session <data dir>/pi-session.jsonl`` + ``--model X`` +
        ``extra_args`` (no shell). Refuses a pi outside the pin (see the module)."""
        program = str_list(spec.options.get("argv", ["pi"]), "providers.pi.argv")
        version = package_version(program[0]) if program and program[0] else None
        check_version(self.name, self.supported_versions, version, spec.options)
        os.makedirs(spec.data_dir, exist_ok=True)
        if version:
            Path(spec.data_dir, VERSION_FILE).write_text(version + "\n")
        return base_argv(
            self.name, spec.options, "pi", ["--session", self.session_path(spec)], "--model"
        )

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """The launch argv: ``--session`` on the existing file continues that session in
        it (the whole pinned range)."""
        if pointer.kind == "path" and pointer.value != self.session_path(spec):
            raise ProviderError(
                f"pi resumes the session orcr gave it ({self.session_path(spec)}), "
                f"not {pointer.value}",
                code="bad_session",
            )
        return self.launch_argv(spec)

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        return SessionPointer(source="orcr", kind="path", value=self.session_path(spec))

    def launch_env(self, spec: LaunchSpec) -> dict[str, str | None]:
        """``[providers.pi] home`` is pi's agent folder (``PI_CODING_AGENT_DIR``); a
        session folder the user set in the environment does not apply (``--session``
        names the file)."""
        env: dict[str, str | None] = {"PI_CODING_AGENT_SESSION_DIR": None}
        if spec.options.get("home"):
            env["PI_CODING_AGENT_DIR"] = str(spec.options["home"])
        return env

    def sandbox_paths(self, spec: LaunchSpec) -> list[str]:
        """pi's agent folder (``~/.pi/agent`` or ``home``: settings, auth); its session
        file lives in the agent's data dir, which every sandboxed agent writes."""
        return [os.path.expanduser(f"{spec.options.get('home') or '~/.pi/agent'}/")]

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """The session file orcr named; None until pi writes it (at the first answer)."""
        path = pointer.value if pointer.kind == "path" else self.session_path(spec)
        return path if os.path.isfile(path) else None

    def screen_state(self, text: str, spec: LaunchSpec) -> ScreenState:
        """Ready once pi has drawn its input box (two rules) with the lines under it;
        pi shows no start-up dialog (no trust, login or update question: a missing key
        or model is an error line in the chat when a prompt is sent)."""
        lines = text.rstrip().splitlines()
        rules = [i for i, line in enumerate(lines) if line.strip().startswith(RULE)]
        if len(rules) >= 2 and len(lines) > rules[-1] + 1:
            return ScreenState("ready")
        return ScreenState("unknown")

    def usage_limit(self, error: str) -> ScreenState | None:
        """A turn that ended on a usage limit holds pi's queue (orcr_core/usage_limits).

        pi does not wait out a limit: against the Anthropic API's 429 for a spent plan
        (``rate_limit_error``, ``anthropic-ratelimit-unified-status: rejected``) the real
        pi 1.6.0 retried three times ("Retrying (3/3) in 1s...") and ended the turn
        ``errored`` with ``429 {"type":"error","error":{"type":"rate_limit_error",...}}``
        (captured, plugins/pi/tests/test_pi_provider.py); a quota it never retries
        (``insufficient_quota``, "Monthly usage limit reached") ends it at once. pi shows
        no reset, so the hold lasts 5 minutes."""
        return limit_error(error)

    def input_state(self, text: str) -> InputState:
        """The composer (the lines between the last two rules: pi's input box) and
        whether a turn runs ("Working..." over the box); None for the composer before
        the box is drawn."""
        lines = text.splitlines()
        running = next((s for s in RUNNING if s in text), None)
        rules = [i for i, line in enumerate(lines) if line.strip().startswith(RULE)]
        if len(rules) < 2:
            return InputState(None, running)
        body = lines[rules[-2] + 1 : rules[-1]]
        return InputState("\n".join(ln.strip() for ln in body).strip(), running)

    def turns(self, settle: float, blocked_after: float | None) -> PiTurns:
        return PiTurns(settle=settle)

    def open_reader(self, path: str, **kw: Any) -> JsonlTurnReader:
        """The JSONL reader, its parser told pi's version (the launch's sidecar file)."""
        version = _read_version(os.path.join(os.path.dirname(path), VERSION_FILE))
        settle = kw.pop("settle", 3.0)

        def make() -> PiTurns:
            parser = PiTurns(settle=settle)
            parser.version = version
            return parser

        return JsonlTurnReader(
            path,
            make,
            clock=kw.get("clock", time.monotonic),
            wall=kw.get("wall", time.time),
        )


def _read_version(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def summarize(path: str) -> dict[str, Any]:
    """One whole session file as ``{"provider", "version", "state", "turns"}``."""
    return PiProvider().summarize(path)
