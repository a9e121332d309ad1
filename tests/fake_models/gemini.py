"""A fake Gemini API for Gemini CLI (``GOOGLE_GEMINI_BASE_URL`` + ``GEMINI_API_KEY``).

``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` answers from the script
as the real API streams it: ``data: <GenerateContentResponse>`` chunks, each a
candidate with some parts (``text``, ``text`` + ``thought: true``,
``functionCall``), the last with ``finishReason`` (``STOP``; ``MAX_TOKENS`` for a
truncated reply, ``SAFETY`` for a refusal) and ``usageMetadata``.
``:generateContent`` (not streamed: Gemini CLI's side requests, such as its model
router and next-speaker checks) answers the same turn as one response, a side
request (no tools) the script's ``side`` text, or ``{}``-shaped JSON when a JSON
answer is asked for. ``:countTokens`` counts, ``GET /v1beta/models`` lists a few
models; anything else is a 404 (and recorded). Errors are the API's JSON error body
(``{"error": {"code", "message", "status"}}``); a :class:`StreamError` sends its text
and then an error chunk and closes the stream.
"""

from __future__ import annotations

import itertools
import json
import re
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
_ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/([^:/]+):(\w+)$")
#: the user texts Gemini CLI sends that are no prompt (its session context)
_CONTEXT = ("<session_context>", "This is the Gemini CLI.", "<state_snapshot>")
#: Gemini CLI's shell tool: a script's ``Tool.bash`` is asked as this
SHELL = "run_shell_command"
STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
          503: "UNAVAILABLE", 529: "UNAVAILABLE"}  # fmt: skip


def _is_prompt_text(text: str) -> bool:
    t = text.strip()
    return bool(t) and not t.startswith(_CONTEXT)


def _texts(content: dict) -> list[str]:
    return [
        p["text"]
        for p in content.get("parts") or []
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]


def _contents(body: dict) -> list[dict]:
    return [c for c in body.get("contents") or [] if isinstance(c, dict)]


def user_texts(body: dict) -> list[str]:
    """Every user text of the request, in order (Gemini CLI's context left out)."""
    return [
        t
        for c in _contents(body)
        if c.get("role", "user") == "user"
        for t in _texts(c)
        if _is_prompt_text(t)
    ]


def turn_of(body: dict) -> tuple[str | None, int]:
    """(prompt, answers so far in its turn): the latest user text, and the model
    messages after it (each tool round adds one)."""
    contents = _contents(body)
    for i in range(len(contents) - 1, -1, -1):
        c = contents[i]
        if c.get("role", "user") != "user":
            continue
        texts = [t for t in _texts(c) if _is_prompt_text(t)]
        if texts:
            answered = sum(1 for later in contents[i + 1 :] if later.get("role") == "model")
            return texts[-1].strip(), answered
    return None, 0


def _tools(body: dict) -> set[str]:
    return {
        f.get("name")
        for t in body.get("tools") or []
        if isinstance(t, dict)
        for f in t.get("functionDeclarations") or []
        if isinstance(f, dict)
    }


def _call(part: Tool) -> dict:
    """A script's tool call as Gemini CLI's: ``Bash`` is its ``run_shell_command``."""
    if part.name == "Bash":
        args = {"command": part.input.get("command", ""),
                "description": part.input.get("description", "")}  # fmt: skip
        return {"functionCall": {"name": SHELL, "args": args, "id": f"call_{next(_ids)}"}}
    return {"functionCall": {"name": part.name, "args": part.input, "id": f"call_{next(_ids)}"}}


class GeminiHandler(Handler):
    def models(self, path: str) -> dict | None:
        if path not in ("/v1beta/models", "/v1/models"):
            return None
        return {"models": [{"name": f"models/{m}", "displayName": m} for m in _MODELS]}

    def error(self, status: int, kind: str, message: str) -> dict:
        return _error(status, message)

    def post(self, req: Request, body) -> None:
        route = _ROUTE.match(self.path.split("?")[0])
        if not route or not isinstance(body, dict):
            self.not_found()
            return
        model, method = route.groups()
        if method == "countTokens":
            self.send_json(200, {"totalTokens": 100})
            return
        if method not in ("streamGenerateContent", "generateContent"):
            self.not_found(method)
            return
        prompt, index = turn_of(body)
        config = body.get("generationConfig") or {}
        side = prompt is None or not _tools(body) or method == "generateContent"
        side_text = None
        if side and (
            config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema")
        ):
            side_text = json.dumps(_side_json(config))
        step = self.step(req, prompt, index, user_texts(body), side, side_text)
        model = self.server.script.wire.model or model
        if self.refused(step):
            return
        if method == "generateContent":
            parts = [_whole(p) for p in parts_of(step)]
            self.send_json(200, _chunk(model, parts, _finish(step), final=True))
        else:
            self.answer(model, step)

    def answer(self, model: str, step) -> None:
        """Stream the step's parts: text in chunks, thoughts, calls; the last chunk
        carries ``finishReason`` and the usage."""
        parts = parts_of(step)
        if isinstance(step, StreamError):
            parts = [Text(step.text)]
        self.start_sse()
        for part in parts:
            if isinstance(part, Hold):
                self.data(_chunk(model, [{"text": part.text[:8]}]))
                self.hold(part)
                self.data(_chunk(model, [{"text": part.text[8:]}]))
            elif isinstance(part, Text | Refusal):
                text = part if isinstance(part, Text) else Text(part.text)
                for n, piece in enumerate(chunks(text.text, text.chunk)):
                    if n and text.delay:
                        self.wait(text.delay)
                    if piece:
                        self.data(_chunk(model, [{"text": piece}]))
            else:
                self.data(_chunk(model, [_whole(part)]))
        if isinstance(step, StreamError):
            self.data(_error(503, step.message))  # and the stream ends
            return
        self.data(_chunk(model, [], _finish(step), final=True))

    def data(self, payload: dict) -> None:
        self.wfile.write(f"data: {json.dumps(payload)}\r\n\r\n".encode())
        self.wfile.flush()


def _whole(part) -> dict:
    if isinstance(part, Thinking):
        return {"text": part.text, "thought": True}
    if isinstance(part, Tool):
        return _call(part)
    return {"text": part.text}


def _finish(step) -> str:
    if isinstance(step, Reply) and step.truncated:
        return "MAX_TOKENS"
    if isinstance(step, Reply) and any(isinstance(p, Refusal) for p in step.parts):
        return "SAFETY"
    return "STOP"


def _chunk(model: str, parts: list[dict], finish: str | None = None, final: bool = False) -> dict:
    candidate: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    out: dict = {"candidates": [candidate], "modelVersion": model,
                 "responseId": f"resp_fake_{next(_ids):06d}"}  # fmt: skip
    if final:
        out["usageMetadata"] = {"promptTokenCount": 100, "candidatesTokenCount": 10,
                                "cachedContentTokenCount": 0, "thoughtsTokenCount": 0,
                                "totalTokenCount": 110}  # fmt: skip
    return out


def _side_json(config: dict) -> dict:
    """A JSON side answer: Gemini CLI's model router wants a ``model_choice``, its
    next-speaker check a ``next_speaker``; other fields get empty strings."""
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    out: dict = {}
    for key in props or {}:
        out[key] = {"model_choice": "flash", "next_speaker": "user"}.get(key, "")
    return out


_MODELS = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite")


def _error(code: int, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": STATUS.get(code, "UNKNOWN")}}


@contextmanager
def gemini_server(script: Script | None = None) -> Iterator[FakeServer]:
    """A running fake Gemini API: ``.url`` for ``GOOGLE_GEMINI_BASE_URL``, ``.api_key``
    for ``GEMINI_API_KEY``, ``.requests`` (every request), ``.prompts()``."""
    with serving(FakeServer(GeminiHandler, script or Script())) as server:
        yield server
