"""Codex rollout records -> turns (TRANSCRIPTS.md sections 2.2-2.7).

* Task events are authoritative (0.104+): ``task_started``/``turn_started``
  opens a turn; ``task_complete``/``turn_complete`` with the same ``turn_id``
  ends it, ``errored`` when it carries ``error``, else ``completed`` with
  ``last_agent_message``; ``turn_aborted`` ends it ``interrupted``; a new
  ``task_started`` while a turn is open abandons the old one (``interrupted``).
  An ``event_msg`` ``error`` ends the open turn ``errored`` (current versions
  do not persist it; accepted in case a release starts to).
* Both history modes: legacy (``user_message``/``agent_message`` events) and
  paginated (``item_completed`` with ``UserMessage``/``AgentMessage``).
* Final text when ``last_agent_message`` is missing or null: the turn's last
  assistant text with ``phase: "final_answer"``; when the version writes no
  phases at all, the last agent message. Commentary is never a final answer.
* Files without task events (before Feb 2026, e.g. 0.58) have implicit turns
  starting at each user message and no end record: a turn counts as completed
  only when its last item is a non-commentary agent message with no pending
  call and the file has been quiet for ``settle`` seconds. Those versions are
  outside the pinned range.

Usage: ``token_count`` events carry the thread's cumulative
``info.total_token_usage``; a turn's usage is the difference between the
cumulative counts when it ends and when it started (a thread resumed in a new
rollout starts from what the rollout says first). ``cached_input_tokens`` is
cache read (subtracted from ``input_tokens``, which includes it),
``cache_write_input_tokens`` cache write; the model is the latest
``turn_context.model``. A ``token_count`` without ``info`` (rate limits only) is
skipped.

Blocked: approvals are never persisted (section 2.5). The only signal is a
labelled guess, on when ``blocked_after`` is set: the open turn has a tool call
without output, the file has been quiet that long, and the latest
``turn_context.approval_policy`` is not ``never``. A long-running command
looks the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orcr_core.contracts import Turn, TurnState, Usage

STARTED = frozenset({"task_started", "turn_started"})
COMPLETE = frozenset({"task_complete", "turn_complete"})
CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_call_output"})
TEXT_BLOCKS = frozenset({"output_text", "text", "Text", "input_text"})


@dataclass
class _Turn:
    turn_id: str | None = None
    explicit: bool = False  # opened by a task event, so one will close it
    pending: dict[str, str] = field(default_factory=dict)  # call_id -> name
    final_answer: str | None = None  # last phase=final_answer text
    unphased: str | None = None  # last agent text written without a phase
    saw_phase: bool = False
    last_kind: str | None = None  # "agent" | "call" | "output"
    base: tuple[int, int, int, int] | None = None  # cumulative counts when it started

    def fallback_text(self) -> str | None:
        return self.final_answer if self.saw_phase else self.unphased

    def looks_finished(self) -> bool:
        """Implicit turns only: ended on an answer with nothing pending."""
        return self.last_kind == "agent" and not self.pending and self.fallback_text() is not None


def _blocks_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") in TEXT_BLOCKS and isinstance(b.get("text"), str)
    ]
    return "".join(parts) if parts else None


class CodexTurns:
    """The record parser behind :class:`orcr_codex.provider.CodexProvider`'s reader."""

    def __init__(self, *, settle: float = 3.0, blocked_after: float | None = 30.0):
        self.settle = settle
        self.blocked_after = blocked_after
        self.version: str | None = None
        self.thread_id: str | None = None
        self.history_mode: str | None = None
        self.approval_policy: str | None = None
        self._meta_seen = False
        self._closed: list[Turn] = []
        self._turn: _Turn | None = None
        self.model: str | None = None
        self._total: tuple[int, int, int, int] | None = None  # (input, output, read, write)

    # -- feeding -----------------------------------------------------------

    def feed(self, record: dict[str, Any]) -> None:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return
        kind = record.get("type")
        if kind == "session_meta":
            if not self._meta_seen:  # a child rollout replays its parent's meta second
                self._meta_seen = True
                version = payload.get("cli_version")
                self.version = version if isinstance(version, str) else None
                self.thread_id = payload.get("id")
                self.history_mode = payload.get("history_mode") or "legacy"
        elif kind == "turn_context":
            policy = payload.get("approval_policy")
            if isinstance(policy, str):
                self.approval_policy = policy
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
        elif kind == "event_msg":
            self._event(payload)
        elif kind == "response_item":
            self._item(payload)

    def _event(self, p: dict[str, Any]) -> None:
        kind = p.get("type")
        turn = self._turn
        if kind == "token_count":
            self._count(p.get("info"))
        elif kind in STARTED:
            if turn is not None and not turn.explicit and turn.last_kind is None:
                turn.turn_id, turn.explicit = p.get("turn_id"), True  # its prompt came first
                return
            if turn is not None and not turn.explicit:
                self._close("completed" if turn.looks_finished() else "interrupted", None)
            elif turn is not None:
                self._close("interrupted", None)  # abandoned
            self._turn = _Turn(turn_id=p.get("turn_id"), explicit=True, base=self._total)
        elif kind in COMPLETE:
            if self._matches(p):
                if p.get("error"):
                    self._close("errored", None, _error_text(p.get("error")))
                else:
                    text = p.get("last_agent_message")
                    self._close("completed", text if isinstance(text, str) else None)
        elif kind == "turn_aborted":
            if self._matches(p):
                self._close("interrupted", None)
        elif kind == "error":
            if turn is not None:
                self._close("errored", None, _error_text(p.get("message")))
        elif kind == "user_message":
            self._user_input()
        elif kind == "agent_message":
            self._agent(p.get("message"), p.get("phase"))
        elif kind == "item_completed":
            item = p.get("item")
            if isinstance(item, dict):
                if item.get("type") == "UserMessage":
                    self._user_input()
                elif item.get("type") == "AgentMessage":
                    self._agent(_blocks_text(item.get("content")), item.get("phase"))
        elif kind == "thread_rolled_back":
            n = p.get("num_turns")
            if isinstance(n, int) and n > 0:
                del self._closed[-n:]

    def _item(self, p: dict[str, Any]) -> None:
        turn = self._turn
        if turn is None:
            return
        kind = p.get("type")
        if kind == "message" and p.get("role") == "assistant":
            self._agent(_blocks_text(p.get("content")), p.get("phase"))
        elif kind in CALLS:
            call_id = p.get("call_id") or p.get("id")
            if call_id:
                turn.pending[str(call_id)] = str(p.get("name") or kind)
            turn.last_kind = "call"
        elif kind in OUTPUTS:
            turn.pending.pop(str(p.get("call_id")), None)
            turn.last_kind = "output"

    def _matches(self, p: dict[str, Any]) -> bool:
        turn = self._turn
        if turn is None:
            return False
        tid = p.get("turn_id")
        return tid is None or turn.turn_id is None or tid == turn.turn_id

    def _user_input(self) -> None:
        turn = self._turn
        if turn is not None and turn.explicit:
            return  # the prompt of the turn task_started opened
        if turn is not None:  # no task events: each user message starts a turn
            self._close("completed" if turn.looks_finished() else "interrupted", None)
        self._turn = _Turn(base=self._total)

    def _agent(self, text: Any, phase: Any) -> None:
        turn = self._turn
        if turn is None or not isinstance(text, str):
            return
        turn.last_kind = "agent"
        if phase:
            turn.saw_phase = True
            if phase == "final_answer":
                turn.final_answer = text
        else:
            turn.unphased = text

    def _close(self, status: str, text: str | None, error: str | None = None) -> None:
        """End the open turn; a completed one without text falls back to its final_answer."""
        turn = self._turn
        if status == "completed" and text is None:
            text = turn.fallback_text()
        usage = self._usage(turn)
        self._closed.append(Turn(status, text if status == "completed" else None, error, usage))
        self._turn = None

    def _count(self, info: Any) -> None:
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            return
        self._total = _tuple(total)
        turn = self._turn
        if turn is not None and turn.base is None:
            # the first count of a rollout: what came before it in this turn is its last request
            last = info.get("last_token_usage")
            turn.base = _minus(self._total, _tuple(last)) if isinstance(last, dict) else (0,) * 4

    def _usage(self, turn: _Turn) -> Usage | None:
        """What ``turn`` spent: the cumulative counts now minus those at its start."""
        if self._total is None:
            return None
        d = _minus(self._total, turn.base or (0, 0, 0, 0))
        return Usage(d[0], d[1], d[2], d[3], self.model)

    # -- reading -----------------------------------------------------------

    def state(self, quiet_for: float) -> TurnState:
        turns = list(self._closed)
        state = "idle" if turns else "unknown"
        turn = self._turn
        if turn is not None:
            if not turn.explicit and turn.looks_finished() and quiet_for >= self.settle:
                turns.append(Turn("completed", turn.fallback_text(), None, self._usage(turn)))
                state = "idle"
            else:
                turns.append(Turn("open", None, None, self._usage(turn)))
                state = "blocked" if self._blocked(turn, quiet_for) else "working"
        return TurnState(state=state, turns=tuple(turns), version=self.version)

    def _blocked(self, turn: _Turn, quiet_for: float) -> bool:
        return (
            bool(turn.pending)
            and self.blocked_after is not None
            and quiet_for >= self.blocked_after
            and self.approval_policy != "never"
        )


def _error_text(value: Any) -> str | None:
    """The words of a Codex error: a string, or an object's ``message``."""
    if isinstance(value, dict):
        value = value.get("message")
    return value if isinstance(value, str) and value.strip() else None


def _tuple(u: dict[str, Any]) -> tuple[int, int, int, int]:
    def n(key: str) -> int:
        v = u.get(key)
        return v if isinstance(v, int) and v > 0 else 0

    read = n("cached_input_tokens")
    return (
        max(0, n("input_tokens") - read),
        n("output_tokens"),
        read,
        n("cache_write_input_tokens"),
    )


def _minus(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    return tuple(max(0, x - y) for x, y in zip(a, b, strict=True))  # type: ignore[return-value]
