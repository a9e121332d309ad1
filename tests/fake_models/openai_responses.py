"""A fake OpenAI Responses API for Codex (a ``[model_providers.<name>]`` with
``wire_api = "responses"`` and ``base_url`` = this server's ``url + "/v1"``).

``POST /v1/responses`` answers from the script as the real API streams it
(``response.created``, ``response.output_item.added``/``.done``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.completed``; ``response.incomplete``/``response.failed`` when the
script says so, reasoning items for :class:`Thinking`). ``/v1/models`` lists a few models; anything else is a
404 (and recorded).
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
from fake_models.server import FakeServer, Handler, Request, chunks, now, serving

_ids = itertools.count(1)
#: Codex's own requests that carry the tools but are no turn (0.150's title request)
SIDE_PROMPTS = ("Generate a concise, single-line task title",)


def _is_prompt_text(text: str) -> bool:
    t = text.strip()
    return bool(t) and not t.startswith("<") and not t.startswith("# AGENTS.md")


def _item_texts(item: dict) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict)]


def user_texts(body: dict) -> list[str]:
    """Every user text of the request, in order (Codex's context messages left out)."""
    items = body.get("input")
    if isinstance(items, str):
        return [items]
    return [
        t
        for i in items or []
        if isinstance(i, dict) and i.get("role") == "user"
        for t in _item_texts(i)
        if _is_prompt_text(t)
    ]


def turn_of(body: dict) -> tuple[str | None, int]:
    """(prompt, tool rounds so far in its turn): the latest user text, and the tool
    outputs sent back after it."""
    items = body.get("input")
    if isinstance(items, str):
        return items, 0
    items = [i for i in items or [] if isinstance(i, dict)]
    for n in range(len(items) - 1, -1, -1):
        item = items[n]
        if item.get("role") != "user":
            continue
        content = item.get("content")
        texts = (
            [content]
            if isinstance(content, str)
            else [c.get("text", "") for c in content or [] if isinstance(c, dict)]
        )
        texts = [t for t in texts if _is_prompt_text(t)]
        if texts:
            rounds = sum(1 for i in items[n + 1 :] if str(i.get("type", "")).endswith("_output"))
            return texts[-1].strip(), rounds
    return None, 0


def shell_call(tools: dict[str, dict], command: str) -> tuple[str, dict]:
    """``Tool.bash`` as whichever shell tool this Codex offers."""
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    return "shell", {"command": ["bash", "-lc", command]}


class ResponsesHandler(Handler):
    def models(self, path: str) -> dict | None:
        if not path.endswith("/models"):
            return None
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in _MODELS]
        return {"object": "list", "data": data, "models": []}

    def error(self, status: int, kind: str, message: str) -> dict:
        return _error(kind, message)

    def post(self, req: Request, body) -> None:
        if not self.route().endswith("/responses") or not isinstance(body, dict):
            self.not_found()
            return
        prompt, index = turn_of(body)
        tools = {
            t.get("name"): t
            for t in body.get("tools") or []
            if isinstance(t, dict) and t.get("name")
        }
        side = prompt is None or not tools or prompt.startswith(SIDE_PROMPTS)
        step = self.step(req, prompt, index, user_texts(body), side)
        if not self.refused(step):
            parts = parts_of(step)
            for i, part in enumerate(parts):
                if isinstance(part, Tool) and part.name == "Bash":
                    name, args = shell_call(tools, part.input["command"])
                    parts[i] = Tool(name, args)
            req.usage = self.answer(body, parts, step)

    def answer(self, body: dict, parts: list, step) -> dict | None:
        """Stream ``parts`` as one response: thinking as reasoning items, texts as
        ``output_text`` parts of a message (one message each when ``separate``), tools as
        function calls; a :class:`StreamError` step fails it after its text."""
        wire = self.server.script.wire
        rid = wire.id("resp", next(_ids))
        model = wire.model or body.get("model", "gpt-fake")
        self.start_sse()
        response = {"id": rid, "object": "response", "created_at": now(), "model": model,
                    "status": "in_progress", "output": []}  # fmt: skip
        self.sse("response.created", {"type": "response.created", "response": response})
        if not wire.lean:
            self.sse("response.in_progress", {"type": "response.in_progress", "response": response})
        if isinstance(step, StreamError):
            parts = [Text(step.text)]
        separate = isinstance(step, Reply) and step.separate
        output: list[dict] = []
        message: dict | None = None  # the message item texts are added to
        for part in parts:
            if isinstance(part, Text | Hold | Refusal):
                if message is None or separate:
                    if message is not None:
                        self._item_done(output, message)
                    message = {"type": "message", "id": wire.id("msg", next(_ids)),
                               "role": "assistant", "status": "in_progress", "content": []}  # fmt: skip
                    self._item_added(output, message)
                self._text(output, message, part)
                continue
            if message is not None:
                self._item_done(output, message)
                message = None
            if isinstance(part, Thinking):
                self._reasoning(output, part)
            elif isinstance(part, Tool):
                self._call(output, part)
        if isinstance(step, StreamError) and step.event == "error":
            self.sse("error", {"type": "error", "code": "server_error", "message": step.message,
                               "param": None, "sequence_number": 1})  # fmt: skip
            return None
        if isinstance(step, StreamError):
            failed = dict(response, status="failed", output=output,
                          error={"code": "server_error", "message": step.message})  # fmt: skip
            self.sse("response.failed", {"type": "response.failed", "response": failed})
            return None
        if message is not None:
            self._item_done(output, message)
        # known numbers (input counts the cached tokens, as OpenAI's does), issue 25
        usage = (
            {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            if wire.lean
            else {"input_tokens": 3100, "input_tokens_details": {"cached_tokens": 3000},
                  "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 3110}
        )  # fmt: skip
        reported = {"input": 100, "output": 10, "cache_read": 0 if wire.lean else 3000,
                    "cache_write": 0}  # fmt: skip
        if isinstance(step, Reply) and step.truncated:
            done = dict(response, status="incomplete", output=output, usage=usage,
                        incomplete_details={"reason": "max_output_tokens"})  # fmt: skip
            self.sse("response.incomplete", {"type": "response.incomplete", "response": done})
            return reported
        done = dict(response, status="completed", output=output, usage=usage)
        self.sse("response.completed", {"type": "response.completed", "response": done})
        return reported

    def _item_added(self, output: list[dict], item: dict) -> None:
        self.sse("response.output_item.added",
                 {"type": "response.output_item.added", "output_index": len(output),
                  "item": item})  # fmt: skip

    def _item_done(self, output: list[dict], item: dict) -> None:
        item.update(status="completed")
        self.sse("response.output_item.done",
                 {"type": "response.output_item.done", "output_index": len(output),
                  "item": item})  # fmt: skip
        output.append(item)

    def _text(self, output: list[dict], message: dict, part: Text | Hold | Refusal) -> None:
        """One ``output_text`` (or ``refusal``) part of ``message``, streamed in deltas."""
        lean = self.server.script.wire.lean
        mid, n, k = message["id"], len(output), len(message["content"])
        where = {"item_id": mid, "output_index": n, "content_index": k}
        if isinstance(part, Refusal):
            empty = {"type": "refusal", "refusal": ""}
            if not lean:
                self.sse("response.content_part.added",
                         {"type": "response.content_part.added", **where, "part": empty})  # fmt: skip
            self.sse("response.refusal.delta",
                     {"type": "response.refusal.delta", **where, "delta": part.text})  # fmt: skip
            self.sse("response.refusal.done",
                     {"type": "response.refusal.done", **where, "refusal": part.text})  # fmt: skip
            done = dict(empty, refusal=part.text)
            if not lean:
                self.sse("response.content_part.done",
                         {"type": "response.content_part.done", **where, "part": done})  # fmt: skip
            message["content"].append(done)
            return
        empty = {"type": "output_text", "text": "", "annotations": []}
        if not lean:
            self.sse("response.content_part.added",
                     {"type": "response.content_part.added", **where, "part": empty})  # fmt: skip
        if isinstance(part, Hold):
            self._delta(where, part.text[:8])
            self.hold(part)
            pieces, delay = [part.text[8:]], 0.0
        else:
            pieces, delay = list(chunks(part.text, part.chunk)), part.delay
        for i, piece in enumerate(pieces):
            if i and delay:
                self.wait(delay)
            if piece:
                self._delta(where, piece)
        done = dict(empty, text=part.text)
        if not lean:
            self.sse("response.output_text.done",
                     {"type": "response.output_text.done", **where, "text": part.text})  # fmt: skip
            self.sse("response.content_part.done",
                     {"type": "response.content_part.done", **where, "part": done})  # fmt: skip
        message["content"].append(done)

    def _reasoning(self, output: list[dict], part: Thinking) -> None:
        wire = self.server.script.wire
        item = {"type": "reasoning", "id": wire.id("rs", next(_ids)), "summary": []}
        self._item_added(output, item)
        where = {"item_id": item["id"], "output_index": len(output), "summary_index": 0}
        if not wire.lean:
            self.sse("response.reasoning_summary_part.added",
                     {"type": "response.reasoning_summary_part.added", **where,
                      "part": {"type": "summary_text", "text": ""}})  # fmt: skip
        self.sse("response.reasoning_summary_text.delta",
                 {"type": "response.reasoning_summary_text.delta", **where,
                  "delta": part.text})  # fmt: skip
        if not wire.lean:
            self.sse("response.reasoning_summary_text.done",
                     {"type": "response.reasoning_summary_text.done", **where,
                      "text": part.text})  # fmt: skip
            self.sse("response.reasoning_summary_part.done",
                     {"type": "response.reasoning_summary_part.done", **where,
                      "part": {"type": "summary_text", "text": part.text}})  # fmt: skip
        item["summary"] = [{"type": "summary_text", "text": part.text}]
        if part.redacted:
            item["encrypted_content"] = secrets.token_urlsafe(48)
        self._item_done(output, item)

    def _call(self, output: list[dict], part: Tool) -> None:
        wire = self.server.script.wire
        fid = wire.id("fc", next(_ids))
        args = json.dumps(part.input)
        item = {"type": "function_call", "id": fid, "call_id": wire.id("call", next(_ids)),
                "name": part.name, "arguments": "", "status": "in_progress"}  # fmt: skip
        self._item_added(output, item)
        if not wire.lean:
            where = {"item_id": fid, "output_index": len(output)}
            self.sse("response.function_call_arguments.delta",
                     {"type": "response.function_call_arguments.delta", **where,
                      "delta": args})  # fmt: skip
            self.sse("response.function_call_arguments.done",
                     {"type": "response.function_call_arguments.done", **where,
                      "arguments": args})  # fmt: skip
        item["arguments"] = args
        self._item_done(output, item)

    def _delta(self, where: dict, text: str) -> None:
        self.sse("response.output_text.delta",
                 {"type": "response.output_text.delta", **where, "delta": text})  # fmt: skip


_MODELS = ("gpt-5-codex", "gpt-5", "gpt-5-mini")


def _error(code: str, message: str) -> dict:
    return {"error": {"type": code, "code": code, "message": message, "param": None}}


@contextmanager
def responses_server(script: Script | None = None) -> Iterator[FakeServer]:
    """A running fake Responses API: ``.url`` (Codex's ``base_url`` is ``url + "/v1"``),
    ``.api_key``, ``.requests``, ``.prompts()``."""
    with serving(FakeServer(ResponsesHandler, script or Script())) as server:
        yield server
