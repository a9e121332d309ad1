"""pi session records -> turns (docs/providers/pi.md, "Turns").

A pi session file is JSONL: a ``session`` header, then entries linked by
``id``/``parentId``. The conversation is in ``message`` entries whose
``message.role`` is ``user``, ``assistant`` or ``toolResult`` (others:
``bashExecution``, ``custom``, and since 1.x ``system``: the prompt and tool loadout
the first request persists); ``model_change``, ``thinking_level_change``,
``compaction``, ``context_edit``, ``custom``, ``label``, ``session_info`` and unknown
types carry no turn.

* A ``user`` message opens a turn (a turn still open then, which only a person
  typing a steering message mid-turn does, ends ``interrupted``).
* An ``assistant`` message ends it by its ``stopReason``: ``stop`` and ``length``
  -> ``completed`` with its text (the message's text blocks, joined by newlines);
  ``aborted`` -> ``interrupted`` (Esc); ``toolUse`` -> still working (the tool
  results and the next request follow); ``error`` -> ``errored`` with its
  ``errorMessage``, but see retries below.
* An ``assistant`` message after an ended turn with no ``user`` message between
  belongs to that turn again (pi's own retry, or its compaction's retry): the turn
  is open again until that message ends it.

Retries: pi keeps the failed request's message (``stopReason: "error"``) and, when
its ``errorMessage`` looks transient (pi's own test, :data:`RETRYABLE`), asks again
after ``retry.baseDelayMs * 2**(n-1)`` (2 s, 4 s, 8 s by default) up to
``retry.maxRetries`` (3) times, writing nothing until the next answer. So an error pi
will not retry ends the turn at once; a transient one only once the file has been
quiet for pi's next delay plus ``settle`` (or at once past pi's default three
retries). A user who raised ``retry.maxRetries`` sees the turn reopen when the
fourth retry answers.

The first turn is written late: pi keeps every entry in memory until the first
assistant message, then writes the header and all of them at once. So the file
does not exist while a first answer streams.

Usage: every assistant message carries ``usage`` (``input``, ``output``,
``cacheRead``, ``cacheWrite``); a turn's usage is the sum over its messages, the
model the last one's ``model``. A ``usage`` entry (1.x: usage outside a message, such
as cache warming; pi counts it in the session's totals) is added to the latest turn
(one before any turn, to the first).

Blocked: pi asks no permission questions (it runs its tools without asking), so the
reader never reports ``blocked``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orcr_core.contracts import ScreenState, Turn, TurnState, Usage

#: (Patterns as text, used case-insensitively: compiled at the first error, through
#: ``re``'s own cache, not at every server start, where they were ~4 ms.)
#: pi's own test of a transient error (``isRetryableAssistantError``, pi-ai
#: ``utils/retry.js``, 1.6.0; a superset of 0.73.1's ``AgentSession._isRetryableError``):
#: an error matching :data:`NOT_RETRYABLE` (quota, billing) is never retried
NOT_RETRYABLE = (
    r"GoUsageLimitError|FreeUsageLimitError|Monthly usage limit reached|available balance|"
    r"insufficient_quota|out of budget|quota exceeded|billing|"
    r"subscription_sharing_usage_limit_exceeded|"
    r"subscription_sharing_workplace_individual_usage_limit_exceeded|"
    r'"code"\s*:\s*"?1308(?![0-9])'
)
RETRYABLE = (
    r"overloaded|server_busy|servers are currently busy|currently experiencing high demand|"
    r"model is at capacity|rate.?limit|too many requests|"
    r"(?<![a-z0-9])(?:429|500|502|503|504|520|524)(?![a-z0-9])|"
    r"service.?(?:is.?)?(?:temporarily.?)?unavailable|server.?error|internal.?error|"
    r"provider.?returned.?(?:an.?)?error|exceeded request buffer limit while retrying upstream|"
    r"unable to forward upstream|upstream.?request.?failed|upstream_stream_read_error|"
    r"stream was interrupted|http/?2 stream failed|network.?error|connection.?error|"
    r"connection.?refused|connection.?lost|connection.?closed|other side closed|fetch failed|"
    r"request to \S+ failed, reason:|getaddrinfo|"
    r"(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])|"
    r"connection reset by peer|ENOTFOUND|EAI_AGAIN|upstream.?connect|reset before headers|"
    r"socket hang up|socket connection was closed|timed? out|timeout|terminated|"
    r"websocket.?closed|websocket.?error|websocket.?connection.?limit.?reached|ended without|"
    r"stream ended before message_stop|stream ended before a terminal response event|"
    r"http2 request did not get a response|stream disconnected before completion|"
    r"cut short after the reply had begun|pending stream has been canceled|retry delay|"
    r"you can retry your request|try your request again|please retry your request|"
    r"ResourceExhausted|subscription_sharing_usage_unavailable|"
    r"subscription_sharing_user_unavailable"
)


#: a turn's error that is a usage or rate limit: an HTTP 429 (pi's errors start with the
#: status, "429 {...}"), or a quota or usage limit in the provider's words (the
#: quota half of :data:`NOT_RETRYABLE`)
LIMIT = (
    r"^(?:Retry failed after \d+ attempts: )?429\b|rate_limit_error|insufficient_quota|"
    r"GoUsageLimitError|FreeUsageLimitError|usage limit reached|quota exceeded|"
    r"subscription_sharing(?:_workplace_individual)?_usage_limit_exceeded"
)


def limit_error(error: str) -> ScreenState | None:
    """``waiting`` (``usage_limit``, no reset known) when ``error`` is a usage limit."""
    if not re.search(LIMIT, error, re.IGNORECASE):
        return None
    return ScreenState("waiting", kind="usage_limit", reason="usage limit")


def retryable(error: str) -> bool:
    """Whether pi retries a request that failed with ``error`` (its errorMessage)."""
    return not re.search(NOT_RETRYABLE, error, re.IGNORECASE) and bool(
        re.search(RETRYABLE, error, re.IGNORECASE)
    )


#: pi's default ``retry.baseDelayMs`` (seconds) and ``retry.maxRetries``
RETRY_BASE = 2.0
RETRY_MAX = 3

DONE = {"stop": "completed", "length": "completed", "aborted": "interrupted"}


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content.strip() or None
    if not isinstance(content, list):
        return None
    parts = [
        b["text"].strip()
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(p for p in parts if p) or None


@dataclass
class _Turn:
    status: str = "open"
    final_text: str | None = None
    error: str | None = None
    retries: int = 0  # consecutive transient errors so far
    usage: Usage | None = None

    def done(self) -> Turn:
        return Turn(self.status, self.final_text, self.error, self.usage)


class PiTurns:
    """The record parser behind :class:`orcr_pi.provider.PiProvider`'s reader."""

    def __init__(self, *, settle: float = 3.0, retry_base: float = RETRY_BASE):
        self.settle = settle
        self.retry_base = retry_base
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.version: str | None = None  # pi's own version (the adapter's sidecar file)
        self.started = False
        self._turns: list[_Turn] = []
        self._pending: Usage | None = None  # ``usage`` entries before the first turn

    def feed(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "session":
            self.started = True
            self.session_id = record.get("id") if isinstance(record.get("id"), str) else None
            self.cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
            return
        if kind == "usage":  # usage outside a message (1.x: cache warming); counts all the same
            usage = _usage(record)
            if self._turns:
                last = self._turns[-1]
                last.usage = usage if last.usage is None else last.usage + usage
            else:
                self._pending = usage if self._pending is None else self._pending + usage
            return
        if kind != "message" or not isinstance(record.get("message"), dict):
            return
        message = record["message"]
        role = message.get("role")
        if role == "user":
            if self._turns and self._turns[-1].status == "open":
                self._turns[-1].status = "interrupted"
            self._turns.append(_Turn(usage=self._pending))
            self._pending = None
        elif role == "assistant" and self._turns:
            self._assistant(self._turns[-1], message)

    def _assistant(self, turn: _Turn, m: dict[str, Any]) -> None:
        turn.usage = _usage(m) if turn.usage is None else turn.usage + _usage(m)
        stop = m.get("stopReason")
        turn.status, turn.final_text, turn.error = "open", None, None  # (again) running
        if stop in DONE:
            turn.retries = 0
            turn.status = DONE[stop]
            turn.final_text = _text(m.get("content")) if stop != "aborted" else None
        elif stop == "error":
            error = m.get("errorMessage") if isinstance(m.get("errorMessage"), str) else None
            turn.status, turn.error = "errored", error or "the model request failed"
            turn.retries = turn.retries + 1 if error and retryable(error) else 0
        else:  # toolUse (or a reason pi adds later): the turn goes on
            turn.retries = 0

    def _final(self, turn: _Turn, quiet_for: float) -> bool:
        """Whether an ended-looking turn is over (a transient error waits for pi's retry)."""
        if turn.status != "errored" or turn.retries == 0 or turn.retries > RETRY_MAX:
            return True
        return quiet_for >= self.retry_base * 2 ** (turn.retries - 1) + self.settle

    def state(self, quiet_for: float) -> TurnState:
        turns = [t.done() for t in self._turns]
        last = self._turns[-1] if self._turns else None
        if last is not None and last.status != "open" and not self._final(last, quiet_for):
            turns[-1] = Turn("open", usage=last.usage)
        if not self.started:
            state = "unknown"
        elif turns and turns[-1].status == "open":
            state = "working"
        else:
            state = "idle"
        return TurnState(state, tuple(turns), self.version)


def _usage(m: dict[str, Any]) -> Usage:
    u = m.get("usage") if isinstance(m.get("usage"), dict) else {}

    def n(key: str) -> int:
        v = u.get(key)
        return v if isinstance(v, int) and v > 0 else 0

    model = m.get("model") if isinstance(m.get("model"), str) else None
    return Usage(n("input"), n("output"), n("cacheRead"), n("cacheWrite"), model)
