"""A fake Anthropic Messages API for Claude Code (``ANTHROPIC_BASE_URL``).

``POST /v1/messages`` answers from the script, streamed as the real API does
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``;
``ping`` and ``error`` events when the script says so) or as one JSON message when ``stream`` is false. ``/v1/messages/count_tokens``
and ``/v1/models`` answer plausibly; anything else is a 404 (and recorded).
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from fake_models.script import (
    Hold,
    Refusal,
    Reply,
    Script,
    StreamError,
    Text,
    Thinking,
    Tool,
    parts_of,
)
from fake_models.server import FakeServer, Handler, Request, chunks, serving

_ids = itertools.count(1)
SUBAGENT_TOOLS = ("Task", "Agent")
#: Claude Code's own requests that carry the tools but are no turn (2.1.20's prompt
#: suggestions)
SIDE_PROMPTS = ("[SUGGESTION MODE:",)


def _texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    ]


def _is_prompt_text(text: str) -> bool:
    t = text.strip()
    return bool(t) and not t.startswith("<system-reminder>") and not t.startswith("<command-")


def user_texts(body: dict) -> list[str]:
    """Every user text of the request, in order (Claude Code's reminders left out)."""
    return [
        t
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "user"
        for t in _texts(m.get("content"))
        if _is_prompt_text(t)
    ]


def turn_of(body: dict) -> tuple[str | None, int]:
    """(prompt, answers so far in its turn): the latest user text and the assistant
    messages after it."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") != "user":
            continue
        texts = [t for t in _texts(m.get("content")) if _is_prompt_text(t)]
        if texts:
            answered = sum(1 for later in messages[i + 1 :] if later.get("role") == "assistant")
            return texts[-1].strip(), answered
    return None, 0


class AnthropicHandler(Handler):
    NOT_FOUND, RATE_LIMITED = "not_found_error", "rate_limit_error"

    def models(self, path: str) -> dict | None:
        if path != "/v1/models":
            return None
        models = [{"type": "model", "id": m, "display_name": m} for m in _MODELS]
        return {"data": models, "has_more": False}

    def error(self, status: int, kind: str, message: str) -> dict:
        return _error(kind, message)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def post(self, req: Request, body) -> None:
        path = self.route()
        if path == "/v1/messages/count_tokens":
            self.send_json(200, {"input_tokens": 100})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self.not_found()
            return
        prompt, index = turn_of(body)
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        side = prompt is None or not tools or prompt.startswith(SIDE_PROMPTS)
        step = self.step(req, prompt, index, user_texts(body), side)
        wire = self.server.script.wire
        model = wire.model or body.get("model", "claude-fake")
        if not self.refused(step):
            parts = parts_of(step)
            for i, part in enumerate(parts):
                if (
                    isinstance(part, Tool)
                    and part.name in SUBAGENT_TOOLS
                    and part.name not in tools
                ):
                    name = next((n for n in SUBAGENT_TOOLS if n in tools), part.name)
                    parts[i] = Tool(name, part.input, part.text)
            req.usage = self.answer(body, model, parts, step)

    def answer(self, body: dict, model: str, parts: list, step) -> dict | None:
        """Stream ``parts`` as one message (or send it whole when ``stream`` is false);
        a :class:`StreamError` step fails the stream after its text."""
        wire = self.server.script.wire
        mid = wire.id("msg", next(_ids))
        # known numbers, one per field, so a sum that mixes fields up shows (issue 25)
        usage = (
            {"input_tokens": 100, "output_tokens": 10}
            if wire.lean
            else {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 20,
                  "cache_read_input_tokens": 3000, "service_tier": "standard"}
        )  # fmt: skip
        reported = {"input": 100, "output": 10, "cache_read": 0 if wire.lean else 3000,
                    "cache_write": 0 if wire.lean else 20}  # fmt: skip
        blocks = [_block(p, wire) for p in parts]
        if isinstance(step, StreamError):
            blocks = [_block(Text(step.text), wire)]
        tool = any(b["type"] == "tool_use" for b in blocks)
        truncated = isinstance(step, Reply) and step.truncated
        refused = any(isinstance(p, Refusal) for p in parts)
        stop = (
            "tool_use"
            if tool
            else "max_tokens"
            if truncated
            else "refusal"
            if refused
            else "end_turn"
        )
        message = {"id": mid, "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}  # fmt: skip
        if not body.get("stream"):
            self.send_json(200, message)
            return reported
        self.start_sse()
        self.sse("message_start", {"type": "message_start",
                                   "message": dict(message, content=[], stop_reason=None)})  # fmt: skip
        self.ping()
        if isinstance(step, StreamError):
            parts = [Text(step.text)]
        for i, (part, block) in enumerate(zip(parts, blocks, strict=True)):
            start = dict(block)
            if block["type"] == "text":
                start["text"] = ""
            elif block["type"] == "thinking":
                start.update(thinking="", signature="")
            elif block["type"] == "tool_use":
                start["input"] = {}
            self.sse("content_block_start",
                     {"type": "content_block_start", "index": i, "content_block": start})  # fmt: skip
            self.ping()
            if isinstance(part, Hold):
                self._delta(i, {"type": "text_delta", "text": part.text[:8]})
                self.hold(part)
                self._delta(i, {"type": "text_delta", "text": part.text[8:]})
            elif isinstance(part, Text | Refusal):
                part = part if isinstance(part, Text) else Text(part.text)
                for n, piece in enumerate(chunks(part.text, part.chunk)):
                    if n and part.delay:
                        self.wait(part.delay)
                    if piece:
                        self._delta(i, {"type": "text_delta", "text": piece})
            elif block["type"] == "thinking":
                self._delta(i, {"type": "thinking_delta", "thinking": block["thinking"]})
                self._delta(i, {"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "tool_use":
                self._delta(
                    i, {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                )
            if isinstance(step, StreamError):
                self.sse("error", _error(step.type, step.message))  # and the stream ends
                return None
            self.sse("content_block_stop", {"type": "content_block_stop", "index": i})
        self.sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 10}})  # fmt: skip
        self.sse("message_stop", {"type": "message_stop"})
        return reported

    def ping(self) -> None:
        if self.server.script.wire.ping:
            self.sse("ping", {"type": "ping"})

    def _delta(self, index: int, delta: dict) -> None:
        self.sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )


def _block(part, wire) -> dict:
    """A part as the content block the whole message holds."""
    if isinstance(part, Thinking) and part.redacted:
        return {"type": "redacted_thinking", "data": secrets.token_urlsafe(48)}
    if isinstance(part, Thinking):
        return {"type": "thinking", "thinking": part.text, "signature": secrets.token_urlsafe(48)}
    if isinstance(part, Tool):
        return {"type": "tool_use", "id": wire.id("toolu", next(_ids)), "name": part.name,
                "input": part.input}  # fmt: skip
    return {"type": "text", "text": part.text}


_MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")


def _error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


@contextmanager
def anthropic_server(script: Script | None = None) -> Iterator[FakeServer]:
    """A running fake Messages API: ``.url`` for ``ANTHROPIC_BASE_URL``, ``.api_key``,
    ``.requests`` (every request), ``.prompts()`` (each turn's prompt once)."""
    with serving(FakeServer(AnthropicHandler, script or Script())) as server:
        yield server
