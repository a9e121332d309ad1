"""Gemini CLI session records -> turns (docs/providers/gemini.md).

The session file (``<home>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``,
Gemini CLI 0.61) is JSONL: a metadata line (``sessionId``, ``projectHash``,
``startTime``, ``kind``), then message records (``id``, ``timestamp``, ``type``:
``user``, ``gemini``, ``info``, ``warning``, ``error``; ``content``), ``{"$set": {...}}``
metadata updates and ``{"$rewindTo": id}``. A message written again with the same
``id`` replaces the earlier one (a ``gemini`` message gets its ``toolCalls`` that way
once they ran).

* A turn starts at a ``user`` message with a text part that is no context
  (``<session_context>``); a ``user`` message of ``functionResponse`` parts is a tool
  result.
* It ends ``completed`` at orcr's own ``{"orcr": "turn_end"}`` line, which the
  ``AfterAgent`` hook (:mod:`orcr_gemini.hook`) appends when Gemini CLI's agent loop
  finished with no tool call left; ``interrupted`` at the ``info`` message
  "Request cancelled." (Esc; the hook fires after it too and is then ignored);
  ``errored`` at an ``error`` message (its content the error), or when a new prompt
  opens while it is open and has no answer.
* Without the hook (``hooked=False``: ``[providers.gemini] stop_hook = false``, or a
  settings file Gemini CLI would not load) a turn counts as completed once its last
  message is a ``gemini`` message with text and no tool call, and the file has been
  quiet for ``settle`` seconds. A ``gemini`` message that says something and then
  asks for a tool looks like that until its tool has run, so this is a guess.
* Final text: the content of the turn's last ``gemini`` message with text and no
  tool call.

Usage: each ``gemini`` message's ``tokens`` (``input`` including ``cached``,
``output``, ``thoughts``), each message id once: input uncached, output + thoughts,
cache read ``cached``; the model is the message's ``model``.

Blocked: a permission question writes nothing (the screen shows it:
:mod:`orcr_gemini.screen`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from orcr_core.contracts import Turn, TurnState, Usage

CONTEXT = ("<session_context>",)
CANCELLED = "Request cancelled."
MARK = "turn_end"


@dataclass
class _Turn:
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> gemini message
    last: str | None = None  # the type of the latest message of the turn


def _prompt_text(content: Any) -> str | None:
    """The prompt a ``user`` message carries, None for a tool result or context."""
    if isinstance(content, str):
        parts = [{"text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        return None
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip()
    ]
    texts = [t for t in texts if not t.lstrip().startswith(CONTEXT)]
    return "\n".join(texts) if texts else None


def _text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        )
    return content if isinstance(content, str) and content.strip() else None


def _answer(message: dict[str, Any]) -> str | None:
    """The message's text when it is an answer (text and no tool call)."""
    return None if message.get("toolCalls") else _text(message)


class GeminiTurns:
    """The record parser behind :class:`orcr_gemini.provider.GeminiProvider`'s reader."""

    def __init__(
        self,
        *,
        settle: float = 3.0,
        hooked: bool = True,
        version: str | None = None,
    ):
        self.settle = settle
        self.hooked = hooked
        self.version = version
        self.session_id: str | None = None
        self.started = False
        self._closed: list[Turn] = []
        self._turn: _Turn | None = None

    # -- feeding -----------------------------------------------------------

    def feed(self, record: dict[str, Any]) -> None:
        if record.get("orcr") == MARK:
            if self._turn is not None:
                self._close("completed")
            return
        if isinstance(record.get("sessionId"), str) and "id" not in record:
            self.session_id = self.session_id or record["sessionId"]
            self.started = True
            return
        if "$set" in record or "$rewindTo" in record or not isinstance(record.get("id"), str):
            return  # metadata, a history rewrite or rewind: no turn starts or ends there
        kind = record.get("type")
        turn = self._turn
        if kind == "user":
            if _prompt_text(record.get("content")) is None:
                if turn is not None:
                    turn.last = "tool_result"
                return
            if turn is not None:  # a prompt while one is open: it never ended
                self._close("completed" if self._answered(turn) else "interrupted")
            self._turn = _Turn(last="user")
        elif turn is None:
            return
        elif kind == "gemini":
            turn.messages[record["id"]] = record  # a rewrite (its toolCalls) replaces it
            turn.last = "gemini"
        elif kind == "info" and _text(record) == CANCELLED:
            self._close("interrupted")
        elif kind == "error":
            self._close("errored", _text(record))

    def _answered(self, turn: _Turn) -> bool:
        if turn.last != "gemini" or not turn.messages:
            return False
        return _answer(list(turn.messages.values())[-1]) is not None

    def _final(self, turn: _Turn) -> str | None:
        for message in reversed(list(turn.messages.values())):
            text = _answer(message)
            if text is not None:
                return text
        return None

    def _close(self, status: str, error: str | None = None) -> None:
        turn = self._turn
        text = self._final(turn) if status == "completed" else None
        self._closed.append(Turn(status, text, error if status == "errored" else None,
                                 self._usage(turn)))  # fmt: skip
        self._turn = None

    def _usage(self, turn: _Turn) -> Usage | None:
        total = [0, 0, 0]
        model = None
        seen = False
        for message in turn.messages.values():
            tokens = message.get("tokens")
            if not isinstance(tokens, dict):
                continue
            seen = True

            def n(key: str, tokens=tokens) -> int:
                v = tokens.get(key)
                return v if isinstance(v, int) and v > 0 else 0

            cached = n("cached")
            total[0] += max(0, n("input") - cached)
            total[1] += n("output") + n("thoughts")
            total[2] += cached
            if isinstance(message.get("model"), str):
                model = message["model"]
        return Usage(total[0], total[1], total[2], 0, model) if seen else None

    # -- reading -----------------------------------------------------------

    def state(self, quiet_for: float) -> TurnState:
        turns = list(self._closed)
        state = "idle" if turns or self.started else "unknown"
        turn = self._turn
        if turn is not None:
            if not self.hooked and self._answered(turn) and quiet_for >= self.settle:
                turns.append(Turn("completed", self._final(turn), None, self._usage(turn)))
                state = "idle"
            else:
                turns.append(Turn("open", None, None, self._usage(turn)))
                state = "working"
        return TurnState(state=state, turns=tuple(turns), version=self.version)


def iso_time(value: Any) -> float | None:
    """An ISO ``startTime`` (``2026-12-06T01:17:56.008Z``) as a Unix time, or None."""
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (AttributeError, TypeError, ValueError):
        return None


def _prompts(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("type") == "user" and _prompt_text(m.get("content"))
        for m in messages
    )


def history_loaded(records: list[dict[str, Any]], since: float) -> bool:
    """Whether a Gemini CLI started (``--resume``) at or after ``since`` has loaded the
    session it resumes, from the records of that session's file.

    The resumed process appends a metadata line of its own (its ``startTime``), a
    ``$set`` of ``messages`` with the context alone, and then, about 0.2 s later, a
    ``$set`` of ``messages`` with the whole history. Its composer shows before that,
    and a prompt typed in between is lost (real_cli, 0.61.0, tmux: the paste landed
    70 ms before the history and the composer came back empty). With no prompt in the
    file before that metadata line there is no history to wait for.
    """
    before = False
    opened = False
    for rec in records:
        if not opened:
            if isinstance(rec.get("sessionId"), str) and "id" not in rec:
                started = iso_time(rec.get("startTime"))
                if started is not None and started >= since:
                    opened = True
                    if not before:
                        return True
            elif rec.get("type") == "user" and _prompt_text(rec.get("content")):
                before = True
        elif isinstance(rec.get("$set"), dict) and _prompts(rec["$set"].get("messages")):
            return True
    return False
