"""A fake OpenAI Responses API for Codex (a ``[model_providers.<name>]`` with
``wire_api = "responses"`` and ``base_url`` = this server's ``url + "/v1"``).

``POST /v1/responses`` answers from the script as the real API streams it
(``response.created``, ``response.output_item.added``/``.done``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.completed``). ``/v1/models`` lists a few models; anything else is a
404 (and recorded).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager

from fake_models.script import Error, Hold, RateLimit, Script, Text, Tool, as_text
from fake_models.server import FakeServer, Handler, Request, chunks, now, serving

_ids = itertools.count(1)


def _is_prompt_text(text: str) -> bool:
    t = text.strip()
    return bool(t) and not t.startswith("<") and not t.startswith("# AGENTS.md")


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
    def do_GET(self) -> None:
        self.server.record(Request("GET", self.path, dict(self.headers), None))
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in _MODELS]
            self.send_json(200, {"object": "list", "data": data, "models": []})
        else:
            self.send_json(404, _error("not_found", f"no {self.path} here"))

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path.split("?")[0].rstrip("/")
        req = Request("POST", self.path, dict(self.headers), body)
        self.server.record(req)
        if not path.endswith("/responses") or not isinstance(body, dict):
            self.send_json(404, _error("not_found", f"no {self.path} here"))
            return
        prompt, index = turn_of(body)
        req.prompt = prompt
        tools = {
            t.get("name"): t
            for t in body.get("tools") or []
            if isinstance(t, dict) and t.get("name")
        }
        if prompt is None or not tools:
            req.answer = "side"
            step = Text(self.server.script.side)
        else:
            step = self.server.script.step(prompt, index)
            req.answer = type(step).__name__.lower()
        if isinstance(step, RateLimit):
            self.send_json(
                429,
                _error("rate_limit_exceeded", step.message),
                {"retry-after": str(step.retry_after)},
            )
        elif isinstance(step, Error):
            self.send_json(step.status, _error(step.type, step.message))
        elif isinstance(step, Tool):
            if step.name == "Bash":
                call = shell_call(tools, step.input["command"])
            else:
                call = (step.name, step.input)
            self.answer(body, Text(step.text) if step.text else None, call)
        else:
            self.answer(body, step, None)

    def answer(self, body: dict, step, call: tuple[str, dict] | None) -> None:
        rid = f"resp_fake_{next(_ids):06d}"
        model = body.get("model", "gpt-fake")
        output: list[dict] = []
        self.start_sse()
        response = {"id": rid, "object": "response", "created_at": now(), "model": model,
                    "status": "in_progress", "output": []}  # fmt: skip
        self.sse("response.created", {"type": "response.created", "response": response})
        n = 0
        if step is not None:
            mid = f"msg_fake_{next(_ids):06d}"
            text = step.text if isinstance(step, Hold) else as_text(step).text
            item = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress",
                    "content": []}  # fmt: skip
            self.sse("response.output_item.added",
                     {"type": "response.output_item.added", "output_index": n, "item": item})  # fmt: skip
            part = {"type": "output_text", "text": "", "annotations": []}
            self.sse("response.content_part.added",
                     {"type": "response.content_part.added", "item_id": mid, "output_index": n,
                      "content_index": 0, "part": part})  # fmt: skip
            if isinstance(step, Hold):
                self._delta(mid, n, text[:8])
                self.hold(step)
                parts, delay = [text[8:]], 0.0
            else:
                t = as_text(step)
                parts, delay = list(chunks(t.text, t.chunk)), t.delay
            for k, p in enumerate(parts):
                if k and delay:
                    self.wait(delay)
                if p:
                    self._delta(mid, n, p)
            self.sse("response.output_text.done",
                     {"type": "response.output_text.done", "item_id": mid, "output_index": n,
                      "content_index": 0, "text": text})  # fmt: skip
            done_part = dict(part, text=text)
            self.sse("response.content_part.done",
                     {"type": "response.content_part.done", "item_id": mid, "output_index": n,
                      "content_index": 0, "part": done_part})  # fmt: skip
            item = dict(item, status="completed", content=[done_part])
            self.sse("response.output_item.done",
                     {"type": "response.output_item.done", "output_index": n, "item": item})  # fmt: skip
            output.append(item)
            n += 1
        if call is not None:
            fid = f"fc_fake_{next(_ids):06d}"
            args = json.dumps(call[1])
            item = {"type": "function_call", "id": fid, "call_id": f"call_fake_{next(_ids):06d}",
                    "name": call[0], "arguments": "", "status": "in_progress"}  # fmt: skip
            self.sse("response.output_item.added",
                     {"type": "response.output_item.added", "output_index": n, "item": item})  # fmt: skip
            self.sse("response.function_call_arguments.delta",
                     {"type": "response.function_call_arguments.delta", "item_id": fid,
                      "output_index": n, "delta": args})  # fmt: skip
            self.sse("response.function_call_arguments.done",
                     {"type": "response.function_call_arguments.done", "item_id": fid,
                      "output_index": n, "arguments": args})  # fmt: skip
            item = dict(item, arguments=args, status="completed")
            self.sse("response.output_item.done",
                     {"type": "response.output_item.done", "output_index": n, "item": item})  # fmt: skip
            output.append(item)
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 110}  # fmt: skip
        done = dict(response, status="completed", output=output, usage=usage)
        self.sse("response.completed", {"type": "response.completed", "response": done})

    def _delta(self, item_id: str, index: int, text: str) -> None:
        self.sse("response.output_text.delta",
                 {"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                  "content_index": 0, "delta": text})  # fmt: skip


_MODELS = ("gpt-5-codex", "gpt-5", "gpt-5-mini")


def _error(code: str, message: str) -> dict:
    return {"error": {"type": code, "code": code, "message": message, "param": None}}


@contextmanager
def responses_server(script: Script | None = None) -> Iterator[FakeServer]:
    """A running fake Responses API: ``.url`` (Codex's ``base_url`` is ``url + "/v1"``),
    ``.api_key``, ``.requests``, ``.prompts()``."""
    with serving(FakeServer(ResponsesHandler, script or Script())) as server:
        yield server
