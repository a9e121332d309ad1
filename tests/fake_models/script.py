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
- :class:`RateLimit` — a 429 with ``retry-after``.

An error or rate limit is served ``times`` times (a CLI's retries count) and
then gives way: ``[RateLimit(), "answer"]`` answers the retry.

Requests that are not a conversation turn (Claude Code's title and topic
requests to a small model, requests with no tools) get ``side`` (short text),
never a scripted step, so a script's tool call is never answered twice.
"""

from __future__ import annotations

import threading
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
    """A 429 served ``times`` times, then the turn's next step answers."""

    retry_after: int = 1
    message: str = "rate limited (fake)"
    times: int = 1
    served: int = 0


Step = str | Text | Hold | Tool | Error | RateLimit


class Script:
    """Prompt substring → turn (one step or a list of steps); ``default`` for the rest."""

    def __init__(
        self,
        turns: dict[str, Step | list[Step]] | None = None,
        default: Step = "ok",
        side: str = "Fake title",
    ):
        self.turns: dict[str, list[Step]] = {}
        for key, steps in (turns or {}).items():
            self.on(key, steps)
        self.default = default
        self.side = side
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
                if isinstance(step, Error | RateLimit):
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
