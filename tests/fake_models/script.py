"""What a fake model answers: a :class:`Script` maps prompts to turns of steps.

A *prompt* is the latest user text of a request (system reminders and tool
results are not prompts). The script's first key found in it (a substring)
picks the turn; a turn is a list of *steps*, one per model request of that
turn: a CLI that runs a tool sends the tool's result in a new request, which
gets the next step. Past the last step the answer is "done".

Steps:

- a ``str`` or :class:`Text` — an answer, streamed in chunks (``delay`` seconds
  between chunks makes a slow turn);
- :class:`Hold` — starts an answer and holds the stream open until
  :meth:`Hold.release` (or the client goes away): a turn that is surely
  ``working`` for as long as a test needs, with no sleep;
- :class:`Tool` — a tool call (``Tool.bash("ls")`` needs permission in both
  CLIs; ``Tool.task(...)`` is Claude Code's subagent tool);
- :class:`Error` — an HTTP error with an API error body (500 by default);
- :class:`RateLimit` — a 429 with ``retry-after``;
- :class:`Reply` — one message of several parts in order: text (a ``str``, a
  text block / ``output_text`` part), :class:`Thinking` (a thinking block, or a
  reasoning item), :class:`Tool` and :class:`Refusal`; ``truncated`` ends it at the output limit
  (``stop_reason: max_tokens``, ``response.incomplete``);
- :class:`StreamError` — a stream that starts and then fails (an SSE ``error``
  event, ``response.failed``).

An error, rate limit or stream error is served ``times`` times (a CLI's retries
count) and then gives way: ``[RateLimit(), "answer"]`` answers the retry.

How a server says things, beyond what it says, is a script's :class:`Wire`:
another model id than the one asked for, ``ping`` events, lean usage and no
optional events, other id formats — what other servers legitimately send.

Requests that are not a conversation turn (Claude Code's title and topic
requests to a small model, requests with no tools) get ``side`` (short text),
never a scripted step, so a script's tool call is never answered twice.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Text:
    text: str
    delay: float = 0.0  # seconds between chunks
    chunk: int = 8  # characters per chunk


@dataclass
class Hold:
    """An answer whose stream stays open (after ``text``'s first chunk) until released."""

    text: str = "held answer"
    released: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    aborted: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class Tool:
    name: str
    input: dict[str, Any]
    text: str = ""  # said before the call

    @classmethod
    def bash(cls, command: str) -> Tool:
        """A shell command: Claude Code's ``Bash``; the Codex server maps it to its shell tool."""
        return cls("Bash", {"command": command, "description": f"Run {command}"})

    @classmethod
    def task(cls, prompt: str, description: str = "subagent") -> Tool:
        """Claude Code's subagent tool (``Task``; ``Agent`` when that is what the CLI offers)."""
        return cls(
            "Task",
            {"description": description, "prompt": prompt, "subagent_type": "general-purpose"},
        )


@dataclass(eq=False)
class Error:
    """Served ``times`` times (retries included), then the turn's next step answers."""

    status: int = 500
    message: str = "fake server error"
    type: str = "api_error"
    times: int = 1
    served: int = 0


@dataclass(eq=False)
class RateLimit:
    """A 429 served ``times`` times, then the turn's next step answers. ``body``: the
    vendor's own JSON error body instead of the API's generic one (a usage limit, as the
    real API words it: tests/fake_models/limits.py); ``headers``: more response headers
    (Anthropic's ``anthropic-ratelimit-unified-*``); ``retry_after`` None sends none."""

    retry_after: int | None = 1
    message: str = "rate limited (fake)"
    times: int = 1
    served: int = 0
    body: dict | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Thinking:
    """Reasoning said before the answer (never the answer): an Anthropic ``thinking``
    block (``redacted``: a ``redacted_thinking`` block of opaque data), a Responses
    ``reasoning`` item with this summary."""

    text: str = "Let me think this through."
    redacted: bool = False


@dataclass
class Refusal:
    """The model declines: Anthropic says it as text with ``stop_reason: "refusal"``, the
    Responses API as a ``refusal`` content part (``response.refusal.*`` events)."""

    text: str = "I can't help with that."


@dataclass
class Reply:
    """One model message of several parts, streamed in order: ``str`` (text),
    :class:`Thinking`, :class:`Tool`, :class:`Refusal` (no parts: an empty answer). ``separate``: the Responses server puts each text
    in its own message item (else all are parts of one). ``truncated``: the answer hit
    the output limit."""

    parts: list[str | Thinking | Tool | Refusal]
    separate: bool = False
    truncated: bool = False


@dataclass(eq=False)
class StreamError:
    """A stream that starts (``text`` streamed) and then fails: an SSE ``error`` event
    (Anthropic) or ``response.failed`` (Responses; ``event="error"``: an ``error``
    event instead). Served ``times`` times, then the turn's next step answers."""

    text: str = "partial answ"
    event: str = "response.failed"
    type: str = "overloaded_error"
    message: str = "Overloaded (fake)"
    times: int = 1
    served: int = 0


@dataclass
class Wire:
    """How a server speaks: the variety real APIs and other people's fakes show.

    ``model``: the model id answers name (else the one requested); ``ping``: Anthropic
    ``ping`` events between the others; ``lean``: minimal usage, and the Responses
    server leaves out the optional events (``response.content_part.*``,
    ``response.output_text.done``, ``response.function_call_arguments.*``); ``ids``:
    ``"fake"`` (``msg_fake_000001``), ``"real"`` (long random ids with the real
    prefixes) or ``"uuid"`` (bare UUIDs)."""

    model: str | None = None
    ping: bool = False
    lean: bool = False
    ids: str = "fake"

    def id(self, prefix: str, n: int) -> str:
        if self.ids == "uuid":
            return str(uuid.uuid4())
        if self.ids == "real":
            return f"{prefix}_{secrets.token_hex(24)}"
        return f"{prefix}_fake_{n:06d}"


Step = str | Text | Hold | Tool | Error | RateLimit | Reply | StreamError
FAILS = (Error, RateLimit, StreamError)  # served their count, then give way


class Script:
    """Prompt substring → turn (one step or a list of steps); ``default`` for the rest."""

    def __init__(
        self,
        turns: dict[str, Step | list[Step]] | None = None,
        default: Step = "ok",
        side: str = "Fake title",
        wire: Wire | None = None,
    ):
        self.turns: dict[str, list[Step]] = {}
        for key, steps in (turns or {}).items():
            self.on(key, steps)
        self.default = default
        self.side = side
        self.wire = wire or Wire()
        self._lock = threading.Lock()

    def on(self, key: str, steps: Step | list[Step]) -> Script:
        self.turns[key] = list(steps) if isinstance(steps, list) else [steps]
        return self

    def step(self, prompt: str, index: int) -> Step:
        """The step for answer number ``index`` (from 0) of the turn ``prompt`` started."""
        steps = next((s for key, s in self.turns.items() if key in prompt), [self.default])
        with self._lock:
            position = 0
            for step in steps:
                if isinstance(step, FAILS):
                    if step.served < step.times and position == index:
                        step.served += 1
                        return step
                    continue
                if position == index:
                    return step
                position += 1
        last = steps[-1]
        return last if isinstance(last, str | Text) and index == 0 else "done"


def as_text(step: Step) -> Text:
    return Text(step) if isinstance(step, str) else step  # type: ignore[return-value]


def parts_of(step: Step) -> list[Text | Hold | Thinking | Tool | Refusal]:
    """A step's message as parts in order (texts as :class:`Text`)."""
    if isinstance(step, Reply):
        return [Text(p) if isinstance(p, str) else p for p in step.parts]
    if isinstance(step, Tool):
        return ([Text(step.text)] if step.text else []) + [step]
    return [as_text(step)] if isinstance(step, str | Text | Hold) else []
