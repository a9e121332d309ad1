"""Incremental reader of the echo agent's JSONL transcript.

``poll()`` costs one ``stat`` when the file did not grow; otherwise it reads
only the appended bytes. A last line without its newline is kept until the
rest arrives (the agent writes whole lines, but a reader may look between the
bytes). A shrunk or replaced file is read again from the start.

State rules (the format is in ``docs/providers/echo.md``): a ``prompt`` opens a
turn, its ``turn_end`` closes it; ``working`` while a turn is open, ``idle``
once the agent wrote its ``session`` line and no turn is open, ``unknown``
before that. A new ``session`` line (the agent was restarted on the same
transcript) closes a turn left open as ``interrupted``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from orcr_core.contracts import Turn, TurnState, Usage

_STATUSES = {"completed", "errored", "interrupted"}


@dataclass
class _OpenTurn:
    status: str = "open"
    answer: str | None = None
    final_text: str | None = None
    error: str | None = None
    usage: Usage | None = None


class EchoTranscriptReader:
    def __init__(self, path: str) -> None:
        self.path = path
        self._reset()

    def _reset(self, ino: int | None = None) -> None:
        self._ino = ino
        self._offset = 0  # bytes consumed from the file, partial line included
        self._partial = b""
        self._turns: list[_OpenTurn] = []
        self._version: str | None = None
        self._session = False
        self._state = TurnState(state="unknown")

    def poll(self) -> TurnState:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._state
        if st.st_ino != self._ino or st.st_size < self._offset:
            self._reset(st.st_ino)
        if st.st_size == self._offset:
            return self._state
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        changed = False
        for raw in lines:
            changed |= self._apply(raw)
        if changed:
            self._state = self._build()
        return self._state

    def _apply(self, raw: bytes) -> bool:
        try:
            record = json.loads(raw)
        except ValueError:
            return False  # not a line the agent wrote whole; skip it
        if not isinstance(record, dict):
            return False
        kind = record.get("type")
        current = self._turns[-1] if self._turns and self._turns[-1].status == "open" else None
        if kind == "session":
            self._session = True
            if isinstance(record.get("version"), str):
                self._version = record["version"]
            if current is not None:
                current.status = "interrupted"
        elif kind == "prompt":
            if current is not None:
                current.status = "interrupted"
            self._turns.append(_OpenTurn())
        elif kind == "answer" and current is not None:
            current.answer = str(record.get("text", ""))
        elif kind == "turn_end" and current is not None:
            status = record.get("status")
            current.status = status if status in _STATUSES else "errored"
            if current.status == "completed":
                current.final_text = current.answer if current.answer is not None else ""
            elif current.status == "errored" and record.get("error") is not None:
                current.error = str(record["error"])
            current.usage = _usage(record.get("usage"))
        else:
            return False
        return True

    def _build(self) -> TurnState:
        turns = tuple(Turn(t.status, t.final_text, t.error, t.usage) for t in self._turns)
        if turns and turns[-1].status == "open":
            state = "working"
        elif self._session or turns:
            state = "idle"
        else:
            state = "unknown"
        return TurnState(state=state, turns=turns, version=self._version)


def _usage(value) -> Usage | None:
    """A ``turn_end`` line's ``usage`` (the echo agent counts words as tokens)."""
    if not isinstance(value, dict):
        return None
    model = value.get("model")
    return Usage(
        input=_int(value.get("input_tokens")),
        output=_int(value.get("output_tokens")),
        model=model if isinstance(model, str) else None,
    )


def _int(value) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def summarize(path: str) -> dict:
    """A whole-file summary: provider, version, state and every turn."""
    state = EchoTranscriptReader(path).poll()
    return {
        "provider": "echo",
        "version": state.version,
        "state": state.state,
        "turns": [
            {"status": t.status, "final_text": t.final_text, "error": t.error} for t in state.turns
        ],
    }
