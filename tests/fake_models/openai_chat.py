"""A fake OpenAI Chat Completions API, for CLIs that take an OpenAI-compatible
provider with a base URL (OpenCode's ``@ai-sdk/openai-compatible`` provider with
``options.baseURL`` = this server's ``url + "/v1"``; pi's ``openai-completions``).

``POST /v1/chat/completions`` answers from the script as the real API streams it:
``data:`` lines of ``chat.completion.chunk`` objects (a role delta, ``content``
deltas, ``tool_calls`` deltas, a last chunk with ``finish_reason``, a usage chunk
when ``stream_options.include_usage`` asks for it), then ``data: [DONE]``; a
non-streaming request gets one ``chat.completion``. :class:`Thinking` is a
``reasoning_content`` delta (the DeepSeek/vLLM field the OpenAI-compatible clients
read), :class:`Refusal` a ``refusal`` delta, ``Reply(truncated=True)`` ends with
``finish_reason: "length"``, :class:`StreamError` sends its text and then an
``error`` object in the stream (no ``[DONE]``). ``Tool.bash`` becomes a call of
whichever tool the request offers named ``bash`` (any case). ``/v1/models`` lists a
few models; anything else is a 404 (and recorded).

Requests with no tools (a CLI's title or summary request) are side requests.
"""

from __future__ import annotations

import itertools
import json
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
from fake_models.server import FakeServer, Handler, Request, chunks, now, serving

_ids = itertools.count(1)
_MODELS = ("fake-chat", "fake-chat-mini", "gpt-4o")


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [
        c.get("text", "")
        for c in content or []
        if isinstance(c, dict) and c.get("type") in ("text", "input_text", None)
    ]


def _is_prompt_text(text: str) -> bool:
    t = text.strip()
    return bool(t) and not t.startswith("<")


def user_texts(body: dict) -> list[str]:
    """Every user text of the request, in order (a CLI's ``<...>`` reminders left out)."""
    return [
        t
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "user"
        for t in _texts(m)
        if _is_prompt_text(t)
    ]


def turn_of(body: dict) -> tuple[str | None, int]:
    """(prompt, tool rounds so far in its turn): the latest user text, and the
    assistant messages with tool calls answered after it."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for n in range(len(messages) - 1, -1, -1):
        if messages[n].get("role") != "user":
            continue
        texts = [t for t in _texts(messages[n]) if _is_prompt_text(t)]
        if texts:
            rounds = sum(
                1 for m in messages[n + 1 :] if m.get("role") == "assistant" and m.get("tool_calls")
            )
            return texts[-1].strip(), rounds
    return None, 0


def _tool_names(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function") if isinstance(t.get("function"), dict) else t
            if fn.get("name"):
                names.append(fn["name"])
    return names


class ChatHandler(Handler):
    def models(self, path: str) -> dict | None:
        if not path.endswith("/models"):
            return None
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in _MODELS]
        return {"object": "list", "data": data}

    def error(self, status: int, kind: str, message: str) -> dict:
        return _error(kind, message)

    def post(self, req: Request, body) -> None:
        if not self.route().endswith("/chat/completions") or not isinstance(body, dict):
            self.not_found()
            return
        prompt, index = turn_of(body)
        tools = _tool_names(body)
        step = self.step(req, prompt, index, user_texts(body), prompt is None or not tools)
        if self.refused(step):
            return
        parts = parts_of(step)
        bash = next((n for n in tools if n.lower() == "bash"), None)
        for i, part in enumerate(parts):
            if isinstance(part, Tool) and part.name == "Bash" and bash:
                parts[i] = Tool(bash, part.input)
        if body.get("stream"):
            self.stream(body, parts, step)
        else:
            self.whole(body, parts, step)

    def _chunk(self, base: dict, delta: dict, finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        self.data(dict(base, choices=[choice]))

    def data(self, obj: dict | str) -> None:
        text = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {text}\n\n".encode())
        self.wfile.flush()

    def stream(self, body: dict, parts: list, step) -> None:
        wire = self.server.script.wire
        model = wire.model or body.get("model", "fake-chat")
        base = {"id": wire.id("chatcmpl", next(_ids)), "object": "chat.completion.chunk",
                "created": now(), "model": model}  # fmt: skip
        self.start_sse()
        self._chunk(base, {"role": "assistant", "content": ""})
        if isinstance(step, StreamError):
            parts = [Text(step.text)]
        calls = 0
        for part in parts:
            if isinstance(part, Hold):
                self._chunk(base, {"content": part.text[:8]})
                self.hold(part)
                self._chunk(base, {"content": part.text[8:]})
            elif isinstance(part, Text):
                for i, piece in enumerate(chunks(part.text, part.chunk)):
                    if i and part.delay:
                        self.wait(part.delay)
                    if piece:
                        self._chunk(base, {"content": piece})
            elif isinstance(part, Thinking):
                self._chunk(base, {"reasoning_content": part.text})
            elif isinstance(part, Refusal):
                self._chunk(base, {"refusal": part.text})
            elif isinstance(part, Tool):
                args = json.dumps(part.input)
                head = {"index": calls, "id": wire.id("call", next(_ids)), "type": "function",
                        "function": {"name": part.name, "arguments": ""}}  # fmt: skip
                self._chunk(base, {"tool_calls": [head]})
                if not wire.lean:
                    half = len(args) // 2
                    for piece in (args[:half], args[half:]):
                        tail = {"index": calls, "function": {"arguments": piece}}
                        self._chunk(base, {"tool_calls": [tail]})
                else:
                    self._chunk(base, {"tool_calls": [{"index": calls,
                                                       "function": {"arguments": args}}]})  # fmt: skip
                calls += 1
        if isinstance(step, StreamError):
            self.data({"error": {"message": step.message, "type": step.type, "code": step.type}})
            return
        finish = "length" if isinstance(step, Reply) and step.truncated else None
        finish = finish or ("tool_calls" if calls else "stop")
        self._chunk(base, {}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            self.data(dict(base, choices=[], usage=_usage(wire.lean)))
        self.data("[DONE]")

    def whole(self, body: dict, parts: list, step) -> None:
        wire = self.server.script.wire
        text = "".join(p.text for p in parts if isinstance(p, Text | Hold))
        calls = [
            {"id": wire.id("call", next(_ids)), "type": "function",
             "function": {"name": p.name, "arguments": json.dumps(p.input)}}
            for p in parts if isinstance(p, Tool)
        ]  # fmt: skip
        message: dict = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop"
        self.send_json(200, {
            "id": wire.id("chatcmpl", next(_ids)), "object": "chat.completion",
            "created": now(), "model": wire.model or body.get("model", "fake-chat"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(wire.lean),
        })  # fmt: skip


def _usage(lean: bool) -> dict:
    if lean:
        return {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    return {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip


def _error(code: str, message: str) -> dict:
    return {"error": {"type": code, "code": code, "message": message, "param": None}}


@contextmanager
def chat_server(script: Script | None = None) -> Iterator[FakeServer]:
    """A running fake Chat Completions API: ``.url`` (a client's base URL is
    ``url + "/v1"``), ``.api_key``, ``.requests``, ``.prompts()``."""
    with serving(FakeServer(ChatHandler, script or Script())) as server:
        yield server
