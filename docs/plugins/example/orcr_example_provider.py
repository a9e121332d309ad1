"""An example orcr provider plugin: the ``upper`` agent and its adapter, in one file.

The tutorial in docs/plugins/writing-a-provider.md builds this file step by step.

* The **agent** (``python orcr_example_provider.py --transcript FILE``) is a tiny
  terminal program: it reads one prompt per line and answers it in upper case,
  appending JSON lines to its transcript (``start``, ``prompt``, ``answer``).
* The **adapter** (:class:`UpperProvider`) tells orcr how to launch the agent and
  reads the transcript incrementally (:class:`UpperReader`) to report working,
  idle and the final answer.
* The **hook** (:func:`register_providers`) registers the adapter with orcr.

Try it without packaging: put this directory on ``PYTHONPATH`` and set
``ORCR_PLUGIN_MODULES=orcr_example_provider``, then
``orcr agent run --provider upper --path demo/up "hello"``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import orcr_core
from orcr_core.contracts import LaunchSpec, SessionPointer, Turn, TurnState
from orcr_core.kit.versions import check_version

__version__ = "1.0.0"  # the agent's version, written into its transcript
TRANSCRIPT = "upper.jsonl"


# ---------------------------------------------------------------- the agent program
def _record(f, kind: str, **fields) -> None:
    """Append one whole JSON line and flush it: readers never see half a record."""
    f.write(json.dumps({"type": kind, "ts": time.time(), **fields}) + "\n")
    f.flush()


def agent_main(argv: list[str]) -> int:
    transcript = argv[argv.index("--transcript") + 1]
    with open(transcript, "a", encoding="utf-8") as f:
        _record(f, "start", version=__version__)
        print("upper agent: type a prompt and press Enter", flush=True)
        while True:
            print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:  # end of input: the pane is closing
                return 0
            prompt = line.rstrip("\n")
            if not prompt.strip():
                continue
            _record(f, "prompt", text=prompt)
            time.sleep(0.2)  # "thinking"
            answer = prompt.upper()
            print(answer, flush=True)
            _record(f, "answer", text=answer)


# ---------------------------------------------------------------- the transcript reader
class UpperReader:
    """Incremental: each ``poll()`` reads only the bytes appended since the last one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.started = False
        self.version: str | None = None
        self.turns: list[Turn] = []

    def poll(self) -> TurnState:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        if size < self.offset:  # the file was replaced: start over
            self.__init__(self.path)
        if size > self.offset:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            self.offset += len(data)
            lines = (self.partial + data).split(b"\n")
            self.partial = lines.pop()  # a line without its newline is still being written
            for raw in lines:
                self._apply(json.loads(raw))
        return self._state()

    def _apply(self, record: dict) -> None:
        kind = record.get("type")
        if kind == "start":
            self.started = True
            self.version = record.get("version")
        elif kind == "prompt":
            self.turns.append(Turn(status="open"))  # the open turn counts as a turn
        elif kind == "answer" and self.turns and self.turns[-1].status == "open":
            self.turns[-1] = Turn(status="completed", final_text=record.get("text", ""))

    def _state(self) -> TurnState:
        if self.turns and self.turns[-1].status == "open":
            state = "working"
        elif self.started:
            state = "idle"
        else:
            state = "unknown"
        return TurnState(state=state, turns=tuple(self.turns), version=self.version)


# ---------------------------------------------------------------- the adapter
class UpperProvider:
    """:class:`orcr_core.contracts.Provider` for the ``upper`` agent."""

    name = "upper"  # orcr agent run --provider upper; also a [concurrency] key
    supported_versions = ">=1.0,<2"  # the agent versions this adapter was checked against
    has_transcript = True

    def transcript_path(self, spec: LaunchSpec) -> str:
        return os.path.join(spec.data_dir, TRANSCRIPT)

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        program = spec.options.get("argv") or [sys.executable, os.path.abspath(__file__)]
        return [*program, "--transcript", self.transcript_path(spec)]

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        # orcr chose the transcript path itself, so the session is known up front
        return SessionPointer(source="orcr", kind="path", value=self.transcript_path(spec))

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        path = pointer.value if pointer.kind == "path" else self.transcript_path(spec)
        return path if os.path.exists(path) else None

    def open_reader(self, path: str) -> UpperReader:
        return UpperReader(path)

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        return check_version(self.name, self.supported_versions, version, options)


# ---------------------------------------------------------------- the hook
@orcr_core.hookimpl
def register_providers(register):
    register(UpperProvider())


if __name__ == "__main__":
    sys.exit(agent_main(sys.argv[1:]))


@orcr_core.hookimpl
def register_commands(cli):
    import click  # inside the hook: only loaded when the command line asks for plugins

    @cli.command(name="upper")
    @click.argument("text", nargs=-1, required=True)
    def upper(text):
        """Print TEXT the way the upper agent would answer it."""
        click.echo(" ".join(text).upper())
