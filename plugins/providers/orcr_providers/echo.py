"""The ``echo`` provider: launches :mod:`orcr_providers.echo_agent` and reads its transcript."""

from __future__ import annotations

import os
import sys
from typing import Any

from orcr_core.contracts import InputState, LaunchSpec, SessionPointer
from orcr_core.kit.versions import check_version, version_tuple
from orcr_providers import __version__
from orcr_providers.echo_reader import EchoTranscriptReader, summarize

TRANSCRIPT_NAME = "echo.jsonl"


def _own_range(version: str) -> str:
    major, minor = (version_tuple(version) + (0, 0))[:2]
    return f">={major}.{minor},<{major}.{minor + 1}"


class EchoProvider:
    """A tiny real agent TUI that answers each prompt with its own text.

    ``[providers.echo] argv`` replaces the command prefix (default: this
    Python running ``-m orcr_providers.echo_agent``); ``--transcript`` is
    always appended. The transcript lives in the agent's data dir, so orcr
    knows its path before the process starts.
    """

    name = "echo"
    has_transcript = True
    supported_versions = _own_range(__version__)

    @staticmethod
    def transcript_path(spec: LaunchSpec) -> str:
        return os.path.join(spec.data_dir, TRANSCRIPT_NAME)

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        prefix = spec.options.get("argv") or [sys.executable, "-m", "orcr_providers.echo_agent"]
        return [*prefix, "--transcript", self.transcript_path(spec)]

    def resume_argv(self, spec: LaunchSpec, pointer: SessionPointer) -> list[str]:
        """The launch argv plus ``--resume``: the agent continues its transcript
        (``pointer`` is that transcript's path), numbering turns on from the last."""
        return [*self.launch_argv(spec), "--resume"]

    def launch_session(self, spec: LaunchSpec) -> SessionPointer:
        return SessionPointer(source="orcr", kind="path", value=self.transcript_path(spec))

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        path = pointer.value if pointer.kind == "path" else self.transcript_path(spec)
        return path if os.path.exists(path) else None

    def open_reader(self, path: str) -> EchoTranscriptReader:
        return EchoTranscriptReader(path)

    def input_state(self, text: str) -> InputState:
        """The composer (the bottom line, ``> text``; ``↵`` for a newline) and whether a
        turn runs (the header's "working (turn N)")."""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        running = "working (turn" if lines and "working (turn" in lines[0] else None
        if not lines or not (lines[-1] == ">" or lines[-1].startswith("> ")):
            return InputState(None, running)
        return InputState(lines[-1][2:].replace("↵", "\n").strip(), running)

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        return check_version(self.name, self.supported_versions, version, options)

    def summarize(self, path: str) -> dict:
        return summarize(path)
