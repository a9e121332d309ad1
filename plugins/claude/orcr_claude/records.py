"""What one Claude Code turn has been seen to do so far, and how a record's parts are
read: the evidence :class:`orcr_claude.turns.ClaudeTurns` decides a turn's outcome from.

:class:`TurnSoFar` gathers a turn's responses (by ``message.id``), its tool calls
without a result, the markers after its last response and what it spent;
:class:`Response` is one assistant message's text and tool calls. The rules that
read them (when a turn is open, completed, errored or blocked) are in
:mod:`orcr_claude.turns`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orcr_core.contracts import Usage


@dataclass
class Response:
    texts: list[str] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)  # tool_use id -> tool name
    stop_reason: str | None = None
    api_error: bool = False
    cut_text: str = ""  # the answer so far when this response continues one cut at max_tokens

    def answer(self) -> str:
        """The response's text blocks that say something, one per line: several blocks are
        separate paragraphs on Claude Code's screen (its own ``last_assistant_message``
        keeps only the last one; docs/decisions.md). A continuation follows its cut text."""
        said = self.said()
        return self.cut_text + said if said else ""

    def said(self) -> str:
        return "\n".join(t for t in self.texts if t.strip())


@dataclass
class TurnSoFar:
    responses: dict[str, Response] = field(default_factory=dict)  # in file order
    pending: dict[str, str] = field(default_factory=dict)  # tool_use ids without result
    interrupted: bool = False  # an interrupt marker after the last response
    end_marker: bool = False  # a Stop-hook/turn_duration line after the last response
    error_tail: bool = False  # system/error or a given-up api_error after it
    error_text: str | None = None  # what that system line said
    background: int = 0  # background agents still running at its last turn_duration
    launched: bool = False  # it started a background agent (an async Agent/Task result)
    duration_seen: bool = False  # a turn_duration line after the last response
    settled: bool = False  # its answer was confirmed by a quiet period: growth alone keeps it
    spent: dict[str, Usage] = field(default_factory=dict)  # message id -> its usage
    extra: Usage | None = None  # subagents' usage reported in tool results / notifications
    model: str | None = None
    seen_usage: bool = False

    def usage(self) -> Usage | None:
        if not self.seen_usage:
            return None
        total = self.extra or Usage()
        for spent in self.spent.values():
            total = total + spent
        return Usage(total.input, total.output, total.cache_read, total.cache_write, self.model)

    def add(self, usage: Usage | None) -> None:
        if usage is not None:
            self.seen_usage = True
            self.extra = usage if self.extra is None else self.extra + usage

    @property
    def error(self) -> str | None:
        """Why an errored turn failed: the API error message's text, else the system line's."""
        last = self.last
        if last is not None and last.api_error and last.said():
            return last.said().strip()
        return self.error_text

    @property
    def last(self) -> Response | None:
        return next(reversed(self.responses.values()), None)

    def activity(self) -> None:
        self.interrupted = self.end_marker = self.error_tail = self.settled = False
        self.duration_seen = False
        self.error_text = None

    @property
    def marker_ends(self) -> bool:
        """Whether its end-marker lines end it. A turn that started a background agent
        ends at its ``turn_duration`` (how many still run), not at the
        ``stop_hook_summary`` a moment before (docs/decisions.md)."""
        return self.end_marker and (self.duration_seen or not self.launched)


def text_of(content: Any) -> tuple[str, bool]:
    """(joined text, has_non_text_input) of a user message's content."""
    if isinstance(content, str):
        return content, False
    texts, other = [], False
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "image":
                other = True
    return "".join(texts), other


def has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def words(value: Any) -> str | None:
    """An error's words: a string, or an object's ``message``."""
    if isinstance(value, dict):
        value = value.get("message")
    return value.strip() if isinstance(value, str) and value.strip() else None


def usage_of(value: Any) -> Usage | None:
    """An Anthropic ``usage`` object as a :class:`Usage`, None when there is none."""
    if not isinstance(value, dict):
        return None

    def n(key: str) -> int:
        v = value.get(key)
        return v if isinstance(v, int) and v > 0 else 0

    return Usage(
        input=n("input_tokens"),
        output=n("output_tokens"),
        cache_read=n("cache_read_input_tokens"),
        cache_write=n("cache_creation_input_tokens"),
    )
