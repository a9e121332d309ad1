"""The HTTP side every fake model server shares: a thread, a port, a request log, and
the handler's common part (recording each request, the model list, 404s, error replies,
taking a turn's step from the script)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_models.script import Error, RateLimit, Text


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text
    prompt: str | None = None  # the prompt a conversation request answers, when it is one
    answer: str = ""  # which kind of step answered it ("text", "tool", "error", ...)
    #: every user text the request carries, in order (the whole conversation so far:
    #: each earlier prompt, then this turn's; a CLI's own reminders left out)
    user_texts: list[str] = field(default_factory=list)
    index: int = 0  # the step of its turn this request asks for (0: the turn's first)
    #: the usage the answer reported, as orcr counts it: {input (uncached), output,
    #: cache_read, cache_write}; None when the answer carried none (an error)
    usage: dict | None = None
    at: float = field(default_factory=time.time)  # when it was received (wall clock)


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    api_key = "sk-fake-orcr-test"

    def __init__(self, handler: type[BaseHTTPRequestHandler], script):
        super().__init__(("127.0.0.1", 0), handler)
        self.script = script
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def prompts(self) -> list[str]:
        """Each conversation turn's prompt once, in order (retries and tool rounds folded)."""
        seen: list[str] = []
        with self.lock:
            for r in self.requests:
                if (
                    r.prompt is not None
                    and r.answer != "side"
                    and (not seen or seen[-1] != r.prompt)
                ):
                    seen.append(r.prompt)
        return seen

    def conversation(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.prompt is not None and r.answer != "side"]

    def reported(self) -> dict:
        """The usage the conversation's answers reported, summed (side requests, such as
        a title, are not in the transcript): what orcr's sums must equal (issue 25)."""
        total = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        for r in self.conversation():
            for k, v in (r.usage or {}).items():
                total[k] += v
        return total

    # -- what the model was sent: the exactly-once record -----------------------------

    def user_texts(self) -> list[list[str]]:
        """Per conversation request (side requests left out), every user text it carried."""
        return [list(r.user_texts) for r in self.conversation()]

    def received(self, prompt: str) -> list[int]:
        """Per conversation request that carries ``prompt``, how many times it does: a
        prompt typed twice into one composer counts 2 in one text, a prompt sent as a
        second user message counts 2 in one request (as history in every later one)."""
        want = prompt.strip()
        counts = [sum(t.count(want) for t in texts) for texts in self.user_texts()]
        return [n for n in counts if n]

    def turn_starts(self, prompt: str) -> int:
        """How many turns were started with ``prompt``: first requests of a turn whose
        prompt it is (a retried request, identical, counts once)."""
        want = prompt.strip()
        seen = set()
        for r in self.conversation():
            if r.index == 0 and r.prompt is not None and want in r.prompt:
                seen.add(json.dumps(r.user_texts))
        return len(seen)

    def once_problems(self, prompts) -> list[str]:
        """What breaks "each prompt reached the model exactly once", one line per
        problem (empty: every prompt in ``prompts`` was received once, in one turn).
        ``assert srv.once_problems(prompts) == []`` is the assertion the tests make."""
        problems = []
        for prompt in prompts:
            counts, starts = self.received(prompt), self.turn_starts(prompt)
            if not counts:
                problems.append(f"{prompt!r}: never received")
            elif max(counts) != 1 or starts != 1:
                problems.append(
                    f"{prompt!r}: received {max(counts)} times in one request, "
                    f"{starts} turns started with it"
                )
        return problems


class Handler(BaseHTTPRequestHandler):
    """One API's handler: it says which GET lists its models (``models``), how its
    errors look (``error``, with ``NOT_FOUND`` and ``RATE_LIMITED`` its kinds) and
    answers a POST (``post``); every request is recorded before it is answered."""

    protocol_version = "HTTP/1.1"
    server: FakeServer
    NOT_FOUND = "not_found"  # the error kind of a 404
    RATE_LIMITED = "rate_limit_exceeded"  # the error kind of a RateLimit step's 429

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib's name)
        pass

    def models(self, path: str) -> dict | None:
        """The model list a GET of ``path`` answers (None: no such list, a 404)."""
        raise NotImplementedError

    def error(self, status: int, kind: str, message: str) -> dict:
        """The API's JSON error body."""
        raise NotImplementedError

    def post(self, req: Request, body: Any) -> None:
        """Answer a POST (already recorded as ``req``)."""
        raise NotImplementedError

    def route(self) -> str:
        """The request's path, without its query and a trailing slash."""
        return self.path.split("?")[0].rstrip("/")

    def do_GET(self) -> None:
        self.server.record(Request("GET", self.path, dict(self.headers), None))
        models = self.models(self.route())
        if models is not None:
            self.send_json(200, models)
        else:
            self.not_found()

    def do_POST(self) -> None:
        body = self.read_body()
        req = Request("POST", self.path, dict(self.headers), body)
        self.server.record(req)
        self.post(req, body)

    def not_found(self, what: str | None = None) -> None:
        self.send_json(404, self.error(404, self.NOT_FOUND, f"no {what or self.path} here"))

    def step(
        self,
        req: Request,
        prompt: str | None,
        index: int,
        texts: list[str],
        side: bool,
        side_text: str | None = None,
    ):
        """The script's step for a conversation request, noted in ``req`` (its prompt,
        its index in the turn, its user texts, what answered). A ``side`` request (no
        turn: a title, a check) gets ``side_text``, else the script's side text."""
        req.prompt, req.index, req.user_texts = prompt, index, texts
        if side:
            req.answer = "side"
            return Text(self.server.script.side if side_text is None else side_text)
        step = self.server.script.step(prompt, index)
        req.answer = type(step).__name__.lower()
        return step

    def refused(self, step) -> bool:
        """Send a :class:`RateLimit` (429, ``retry-after``) or an :class:`Error` step as
        the API's error reply; False for any other step (it is an answer)."""
        if isinstance(step, RateLimit):
            headers = dict(step.headers)
            if step.retry_after is not None:
                headers.setdefault("retry-after", str(step.retry_after))
            body = (
                step.body
                if step.body is not None
                else self.error(429, self.RATE_LIMITED, step.message)
            )
            self.send_json(429, body, headers)
        elif isinstance(step, Error):
            self.send_json(step.status, self.error(step.status, step.type, step.message))
        else:
            return False
        return True

    def read_body(self) -> Any:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event: str, data: dict) -> None:
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def wait(self, seconds: float) -> None:
        """A pause in a slow stream (ended early when the server closes)."""
        self.server.closing.wait(seconds)

    def hold(self, step) -> None:
        """Keep the stream open until the step is released, the server closes or the client
        goes away (then ``step.aborted`` is set: an interrupted turn)."""
        step.started.set()
        while not step.released.is_set() and not self.server.closing.is_set():
            step.released.wait(0.2)
            try:  # an SSE comment: tells whether the client is still there
                self.wfile.write(b": hold\n\n")
                self.wfile.flush()
            except OSError:
                step.aborted.set()
                raise


def chunks(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), max(1, size)) or [0]:
        yield text[i : i + size]


@contextmanager
def serving(server: FakeServer) -> Iterator[FakeServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def now() -> int:
    return int(time.time())
