"""A faithful fake herdr 0.8 server for tests (see ORCR-NOTES §15).

In-process::

    emu = Emulator(socket_path, state_dir, protocol=20)
    emu.start(); ...; emu.stop()

As a program (what a ``herdr`` shim on PATH runs; see
:mod:`orcr_herdr.testing.program`)::

    python -m orcr_herdr.testing.emulator --session NAME server
 Panes run real processes on real PTYs, rendered with pyte.
Every request, reply and event is checked against ``herdr-api.schema.json``
when ``strict`` (the default): violations are recorded in ``violations``.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orcr_herdr.testing import persist
from orcr_herdr.testing.events import TICK, EventHub
from orcr_herdr.testing.ids import new_terminal_id
from orcr_herdr.testing.model import DETECTED, RESUME_ARGV, InputRecord, Pane, Views, Workspace
from orcr_herdr.testing.session import ENTER_TOO_EARLY_WINDOW, SessionState
from orcr_herdr.testing.transport import (
    REQUEST_TIMEOUT,
    ApiError,
    Listener,
    peer_gone,
    read_request,
    send_line,
)

VERSION = "0.8.0"
RESUME_DELAY = 0.75


@dataclass
class Violation:
    """A message that does not match the schema. ``kind``: request, reply or event."""

    kind: str
    errors: list[str]
    message: Any


class Deferred:
    """Returned by a waiting handler: ``run()`` is called outside the app lock and
    returns the result (or raises :class:`ApiError`) while the connection stays open."""

    def __init__(self, run: Callable[[], dict]):
        self.run = run


class Stream:
    """Returned by the ``events.subscribe`` handler: the entries to stream after the ack."""

    def __init__(self, entries: list):
        self.entries = entries


class Emulator(SessionState):
    """A fake herdr server. All public attributes may be changed while it runs.

    Args:
        socket_path: the API socket to listen on (AF_UNIX: keep it under 107 bytes).
        state_dir: the session dir (``session.json`` is read at start, written on change).
        protocol: what ``ping`` answers (19 = tagged v0.8.0, 20 = current).
        version: ``ping``'s version string.
        strict: validate every message against the schema and record violations.
        shell: argv of the "default shell" of new panes (``$SHELL`` else ``/bin/sh``).
        rows, cols: the headless PTY size.
        enter_too_early: swallow an Enter sent in the same write as text, or less than
            300 ms after the pane last received text (the text stays unsubmitted).
        drop_enter_probability: swallow the first Enter after text with this
            probability (seeded by ``seed``); a re-press always goes through.
        resume_agents: herdr's ``[session] resume_agents_on_restore``. Off by default
            here because orcr's own herdr config turns it off; the program reads
            ``HERDR_CONFIG_PATH`` and defaults to herdr's ``true``.
        detect_agents: recognise ``claude``/``codex`` as the PTY's foreground process.
        session: the herdr session name (exported to panes as ``HERDR_SESSION``).
        herdr_bin: exported to panes as ``HERDR_BIN_PATH``.
        save_delay: seconds between the last change and the ``session.json`` write
            (herdr debounces 5 s; 0 writes after every change).
        violations_path: also append violations to this JSONL file (subprocess mode).
        request_timeout: how long a connection may take to send its request line (5 s).
        enter_window: the "too early" window after text for ``enter_too_early`` (0.3 s).

    Test hooks (thread-safe): :meth:`pane`, :meth:`panes`, :meth:`screen`,
    :meth:`inputs`, :meth:`set_agent`, :meth:`set_agent_status`,
    :meth:`set_agent_session` (silent, like herdr), :meth:`clear_agent_session`,
    :meth:`exit_agent`, :meth:`add_agent` (a user's agent, e.g. in a
    second session), :meth:`close_pane`, :meth:`zoom_tab`, :meth:`drop_connections`,
    :meth:`corrupt_next_reply`,
    :meth:`publish`, :meth:`retained_events`, :meth:`restart`, :meth:`crash`;
    attributes ``violations``, ``requests``, ``enter_too_early``,
    ``drop_enter_probability``, ``protocol``, ``stop_requested``.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike,
        state_dir: str | os.PathLike,
        protocol: int = 20,
        *,
        version: str = VERSION,
        strict: bool = True,
        shell: list[str] | None = None,
        rows: int = 24,
        cols: int = 80,
        enter_too_early: bool = False,
        drop_enter_probability: float = 0.0,
        seed: int = 0,
        resume_agents: bool = False,
        detect_agents: bool = True,
        session: str | None = None,
        herdr_bin: str = "",
        save_delay: float = 0.0,
        violations_path: str | os.PathLike | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
        enter_window: float = ENTER_TOO_EARLY_WINDOW,
    ):
        self.socket_path = str(socket_path)
        self.state_dir = Path(state_dir)
        self.protocol, self.version = protocol, version
        self.strict = strict
        self.shell = list(shell) if shell else [os.environ.get("SHELL") or "/bin/sh"]
        self.rows, self.cols = rows, cols
        self.enter_too_early = enter_too_early
        self.drop_enter_probability = drop_enter_probability
        self.rng = random.Random(seed)
        self.resume_agents = resume_agents
        self.detect_agents = detect_agents
        self.session = session
        self.herdr_bin = herdr_bin
        self.save_delay = save_delay
        self.violations_path = Path(violations_path) if violations_path else None
        self.request_timeout = request_timeout
        self.enter_window = enter_window
        self.checker = None
        if strict:
            from orcr_herdr.testing.schema import default_checker

            self.checker = default_checker()
        self.violations: list[Violation] = []
        self.requests: list[dict] = []  # every parsed request, in arrival order
        self.lock = threading.RLock()  # herdr's "app loop"
        self.views = Views(self)
        self.workspaces: dict[str, Workspace] = {}
        self.focused_ws: str | None = None
        self.next_ws = 1
        self.hub = EventHub()
        self.stopped = threading.Event()
        self.stopped.set()
        self._listener: Listener | None = None
        self._ticker: threading.Thread | None = None
        self._dirty_at: float | None = None
        self._drop: list[str] = []  # fault injection: "before" / "after" per connection
        self._muted = False  # fault injection: an outage, every connection dropped
        self.muted_connections = 0  # connections dropped while muted
        self._reply_hooks: list[Callable[[str, dict], dict]] = []
        self._resume_at: dict[str, float] = {}
        self.stop_requested = threading.Event()  # set by server.stop (the CLI exits on it)
        self._stop_after_reply = threading.Event()

    @classmethod
    def for_session(cls, config_home: str | os.PathLike, name: str, **kwargs: Any) -> Emulator:
        """An emulator for herdr session ``name`` where herdr would put it under
        ``XDG_CONFIG_HOME=config_home`` (socket and session dir): a user's other
        session, next to orcr's own. Not started."""
        cfg = Path(config_home) / "herdr"
        state = cfg if name == "default" else cfg / "sessions" / name
        state.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("session", name)
        return cls(state / "herdr.sock", state, **kwargs)

    # ------------------------------------------------------------------ lifecycle
    @property
    def session_file(self) -> Path:
        return self.state_dir / "session.json"

    def start(self) -> Emulator:
        """Restore ``session.json`` if present, then listen. Returns self."""
        with self.lock:
            self.hub = EventHub()
            self.stop_requested.clear()
            self._stop_after_reply.clear()
            self._restore()
            self.stopped.clear()
        self._listener = Listener(self.socket_path, self._serve)
        try:
            self._listener.start()
        except BaseException:
            self._kill_all()
            self.stopped.set()
            raise
        self._ticker = threading.Thread(target=self._tick_loop, name="herdr-tick", daemon=True)
        self._ticker.start()
        return self

    def stop(self, save: bool = True) -> None:
        """``server.stop``: save, kill every pane process, close streams and the socket."""
        if self.stopped.is_set():
            return
        with self.lock:
            if save:
                self._save()
            self.stopped.set()
            self._kill_all()
        if self._listener is not None:
            self._listener.stop()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2)

    def crash(self) -> None:
        """Die like a SIGKILLed server: no final save (changes not yet saved are lost)."""
        self.stop(save=False)

    def restart(self) -> None:
        """Cold restart: same workspace/tab/pane ids and labels, new terminal ids, plain shells."""
        self.stop()
        self.start()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _kill_all(self) -> None:
        for ws in self.workspaces.values():
            for pane in ws.panes():
                if pane.proc is not None:
                    pane.proc.kill_now()
                    pane.proc = None
        self.workspaces.clear()
        self._resume_at.clear()

    def _restore(self) -> None:
        restored, focused = persist.load(self.session_file)
        self.workspaces = {}
        self.focused_ws = None
        seen_sessions: set[tuple[str, str]] = set()
        for ws in restored:
            self.workspaces[ws.workspace_id] = ws
            for pane in ws.panes():
                pane.terminal_id = new_terminal_id()
                session = pane.agent_session
                key = (session["agent"], session["value"]) if session else None
                resumable = (
                    self.resume_agents
                    and session is not None
                    and session["agent"] in RESUME_ARGV
                    and key not in seen_sessions
                )
                if resumable:
                    seen_sessions.add(key)
                    pane.pending_resume = True
                    self._resume_at[pane.pane_id] = time.monotonic() + RESUME_DELAY
                    continue
                pane.agent = None
                pane.agent_session = None
                self._start_process(pane, None, None)
        self.focused_ws = (
            focused if focused in self.workspaces else next(iter(self.workspaces), None)
        )
        numbers = [ws.number for ws in self.workspaces.values()]
        self.next_ws = max(numbers, default=0) + 1

    # ------------------------------------------------------------------ test hooks
    def pane(self, pane_id: str) -> Pane:
        """The live :class:`Pane` object (KeyError when gone)."""
        with self.lock:
            return self._pane(pane_id)

    def panes(self) -> list[Pane]:
        with self.lock:
            return [p for ws in self.workspaces.values() for p in ws.panes()]

    def inputs(self, pane_id: str) -> list[InputRecord]:
        """Every write into the pane: what was sent, what reached the PTY."""
        with self.lock:
            return list(self._pane(pane_id).inputs)

    def screen(self, pane_id: str) -> str:
        """The pane's visible screen, as ``pane.read`` would give it."""
        with self.lock:
            return self._read_text(self._pane(pane_id), "visible", None)[0]

    def set_agent(self, pane_id: str, agent: str | None, status: str = "unknown") -> None:
        """Pretend detection recognised (or lost) an agent; emits ``pane_agent_detected``."""
        with self.lock:
            pane = self._pane(pane_id)
            pane.agent_authority = "hook" if agent else None
            self._set_agent(pane, agent, status)

    def zoom_tab(self, tab_id: str, zoomed: bool = True) -> None:
        """Zoom (or unzoom) a tab, as a user pressing herdr's zoom key would: a
        ``pane.move`` from or into it then answers ``changed: false``, ``zoomed_tab``."""
        with self.lock:
            tab = self.find_tab(tab_id)
            assert tab is not None, tab_id
            tab.zoomed = zoomed

    def set_agent_status(self, pane_id: str, status: str) -> None:
        """A status transition: only per-pane ``pane.agent_status_changed`` streams see it."""
        with self.lock:
            pane = self._pane(pane_id)
            if pane.agent_authority is None:
                pane.agent_authority = "hook"
            self._set_status(pane, status)

    def set_agent_session(
        self, pane_id: str, value: str, agent: str | None = None, source: str | None = None
    ) -> None:
        """Store an official session ref the way a SessionStart hook does: NO event."""
        with self.lock:
            pane = self._pane(pane_id)
            agent = agent or pane.agent or "claude"
            pane.agent_session = {
                "source": source or f"herdr:{agent}",
                "agent": agent,
                "kind": "id",
                "value": value,
            }
            self._mark_dirty()

    def clear_agent_session(self, pane_id: str) -> None:
        with self.lock:
            self._pane(pane_id).agent_session = None
            self._mark_dirty()

    def add_agent(
        self,
        agent: str = "claude",
        status: str = "idle",
        *,
        cwd: str | None = None,
        label: str | None = None,
    ) -> str:
        """A user's agent in this session: a new workspace whose pane (a real shell)
        herdr detects as ``agent`` in ``status``, labelled ``label``. Emits the
        events herdr would (validated). Returns the pane id."""
        with self.lock:
            _ws, _tab, pane = self.new_workspace(cwd or os.getcwd(), None, None, False)
            pane.label = (label or "").strip() or None
            pane.agent_authority = "hook"  # detection never overrides it
            self._set_agent(pane, agent, status)
            self._mark_dirty()
            return pane.pane_id

    def close_pane(self, pane_id: str) -> None:
        """The user closed the pane (``pane.close``): ``pane_closed``, its terminal gone."""
        with self.lock:
            self._remove_pane(self._pane(pane_id), exited=False)
            self._mark_dirty()

    def exit_agent(self, pane_id: str) -> None:
        """The agent process ended inside its pane: release it, drop its session ref."""
        with self.lock:
            pane = self._pane(pane_id)
            pane.agent_authority = None
            self._set_agent(pane, None, "unknown")

    def drop_connections(self, count: int = 1, when: str = "before") -> None:
        """Fault injection: close the next ``count`` connections without an answer.

        ``when="before"`` closes before reading the request (nothing happened);
        ``"after"`` reads and handles it, then closes without replying.
        """
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        with self.lock:
            self._drop.extend([when] * count)

    def mute(self) -> None:
        """Fault injection: an outage. Every connection is closed unanswered (its
        processes run on, existing event streams stay open) until :meth:`unmute`;
        ``muted_connections`` counts the requests refused meanwhile."""
        with self.lock:
            self._muted = True

    def unmute(self) -> None:
        with self.lock:
            self._muted = False

    def corrupt_next_reply(self, mutate: Callable[[str, dict], dict]) -> None:
        """Fault injection: ``mutate(method, reply) -> reply`` for the next reply sent."""
        with self.lock:
            self._reply_hooks.append(mutate)

    def retained_events(self) -> list[dict]:
        """The event ring as a new subscription would replay it (oldest first)."""
        return self.hub.retained()

    def publish(self, name: str, data: dict) -> dict:
        """Emit an arbitrary Envelope-A event (validated like the emulator's own)."""
        with self.lock:
            return self._emit(name, data)

    # ------------------------------------------------------------------ schema
    def _violation(self, kind: str, errors: list[str], message: Any) -> None:
        v = Violation(kind, errors, message)
        self.violations.append(v)
        print(f"herdr-emulator: schema violation ({kind}): {errors}", file=sys.stderr)
        if self.violations_path is not None:
            with open(self.violations_path, "a") as f:
                f.write(json.dumps({"kind": kind, "errors": errors, "message": message}) + "\n")

    def _check(self, kind: str, message: dict) -> list[str]:
        if self.checker is None:
            return []
        check = {
            "request": self.checker.check_request,
            "reply": self.checker.check_reply,
            "event": self.checker.check_event,
        }[kind]
        errors = check(message)
        if errors:
            self._violation(kind, errors, message)
        return errors

    # ------------------------------------------------------------------ transport
    def _serve(self, conn: socket.socket) -> None:
        with self.lock:
            drop = self._drop.pop(0) if self._drop else None
            if self._muted:
                drop = "before"
                self.muted_connections += 1
        if drop == "before":
            return
        line = read_request(conn, self.request_timeout)
        if line is None:
            return
        reply, stream = self._handle_line(line)
        if reply is None or drop == "after":
            return
        with self.lock:
            hook = self._reply_hooks.pop(0) if self._reply_hooks else None
        if hook is not None:
            reply = hook(reply.get("_method", ""), reply)
        reply.pop("_method", None)
        self._check("reply", reply)
        sent = send_line(conn, reply)
        if self._stop_after_reply.is_set():
            threading.Thread(target=self._server_stop, name="herdr-stop", daemon=True).start()
            return
        if sent and stream is not None:
            self._stream(conn, stream)

    def _server_stop(self) -> None:
        self.stop()
        self.stop_requested.set()

    def _handle_line(self, line: bytes) -> tuple[dict | None, Stream | None]:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return None, None
        text = text.strip()
        if not text:
            return None, None
        try:
            request = json.loads(text)
        except ValueError as exc:
            return _error("", "invalid_request", f"invalid request: {exc}"), None
        self.requests.append(request if isinstance(request, dict) else {"raw": request})
        problems = self._check("request", request) if isinstance(request, dict) else ["not object"]
        if not problems and self.checker is None:
            problems = _basic_problems(request)
        if problems:
            return _error("", "invalid_request", f"invalid request: {problems[0]}"), None
        req_id, method, params = request["id"], request["method"], request["params"]
        from orcr_herdr.testing.handlers import HANDLERS

        handler = HANDLERS.get(method)
        try:
            if handler is None:
                raise ApiError("not_implemented", f"{method} is not implemented by the emulator")
            if method == "ping":  # answered on the socket thread, never blocked by the app
                result = handler(self, params, req_id)
            else:
                with self.lock:
                    if self.stopped.is_set():
                        raise ApiError("server_unavailable", "server is shutting down")
                    result = handler(self, params, req_id)
                    if self._dirty_at is not None and self.save_delay <= 0:
                        self._save()
            if isinstance(result, Deferred):  # a wait: held outside the app lock
                result = result.run()
        except ApiError as err:
            reply = _error(
                err.reply_id if err.reply_id is not None else req_id, err.code, err.message
            )
            reply["_method"] = method
            return reply, None
        except (KeyError, TypeError, ValueError) as exc:  # what serde would have refused
            return _error("", "invalid_request", f"invalid request: {exc!r}"), None
        stream = None
        if isinstance(result, Stream):
            stream, result = result, {"type": "subscription_started"}
        return {"id": req_id, "result": result, "_method": method}, stream

    def _stream(self, conn: socket.socket, stream: Stream) -> None:
        """The subscription loop: wake every 100 ms, at most one event per entry per wake."""
        hub = self.hub
        try:
            while not self.stopped.is_set():
                if self.stopped.wait(TICK) or peer_gone(conn):
                    return
                for entry in stream.entries:
                    envelope = entry.next()
                    if envelope is None:
                        continue
                    self._check("event", envelope)
                    if not send_line(conn, envelope):
                        return
        finally:
            with hub.lock:
                hub.status_entries = [e for e in hub.status_entries if e not in stream.entries]

    # ------------------------------------------------------------------ tick
    def _tick_loop(self) -> None:
        while not self.stopped.wait(TICK):
            try:
                with self.lock:
                    if self.stopped.is_set():
                        return
                    self._tick()
            except Exception as exc:  # keep ticking; a test will see the symptom
                print(f"herdr-emulator: tick failed: {exc!r}", file=sys.stderr)

    def _tick(self) -> None:
        now = time.monotonic()
        for pane in [p for ws in list(self.workspaces.values()) for p in ws.panes()]:
            if pane.pending_resume:
                if now >= self._resume_at.get(pane.pane_id, now):
                    self._resume(pane)
                continue
            if pane.proc is None:
                continue
            if pane.proc.poll() is not None:
                self._remove_pane(pane, exited=True)
                continue
            title = pane.proc.title
            if title != pane.title:
                pane.title = title
                pane.revision += 1
                self._emit("pane_updated", {"pane": self.views.pane(pane)})
            if self.detect_agents and pane.agent_authority in (None, "detect"):
                names = pane.proc.foreground_names()
                detected = next((DETECTED[n] for n in names if n in DETECTED), None)
                if detected != pane.agent:
                    pane.agent_authority = "detect" if detected else None
                    self._set_agent(pane, detected, "unknown")
        if self._dirty_at is not None and now - self._dirty_at >= self.save_delay:
            self._save()

    def _resume(self, pane: Pane) -> None:
        """Native resume: a shell in the saved cwd, then ``claude --resume <id>`` typed + CR."""
        pane.pending_resume = False
        self._resume_at.pop(pane.pane_id, None)
        session = pane.agent_session or {}
        try:
            self._start_process(pane, None, None)
        except ApiError:
            return
        argv = RESUME_ARGV.get(session.get("agent", ""))
        if argv and pane.proc is not None:
            line = " ".join(argv + [shlex.quote(session.get("value", ""))]) + "\r"
            try:
                pane.proc.write(line.encode())
            except OSError:
                pass


def _error(req_id: str, code: str, message: str) -> dict:
    return {"id": req_id, "error": {"code": code, "message": message}}


def _basic_problems(request: Any) -> list[str]:
    """Without the schema: the shape serde would insist on."""
    if not isinstance(request, dict):
        return ["expected an object"]
    if not isinstance(request.get("id"), str):
        return ["invalid type for `id`: expected a string"]
    if not isinstance(request.get("method"), str):
        return ["missing field `method`"]
    if not isinstance(request.get("params"), dict):
        return ["missing field `params`"]
    return []


if __name__ == "__main__":
    from orcr_herdr.testing.program import main

    raise SystemExit(main())
