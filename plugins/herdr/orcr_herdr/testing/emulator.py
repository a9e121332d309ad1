"""A faithful fake herdr 0.8 server for tests (see ORCR-NOTES §15).

In-process::

    emu = Emulator(socket_path, state_dir, protocol=20)
    emu.start(); ...; emu.stop()

As a program (what a ``herdr`` shim on PATH runs)::

    python -m orcr_herdr.testing.emulator --session NAME server

The socket path is computed like herdr's (``$XDG_CONFIG_HOME/herdr`` else
``~/.config/herdr``, ``sessions/<name>/herdr.sock``); ``session.json`` lives in
the session dir. Panes run real processes on real PTYs, rendered with pyte.
Every request, reply and event is checked against ``herdr-api.schema.json``
when ``strict`` (the default): violations are recorded in ``violations``.
"""

from __future__ import annotations

import json
import os
import random
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
from orcr_herdr.testing.ids import encode_number, new_terminal_id
from orcr_herdr.testing.model import (
    DETECTED,
    RESUME_ARGV,
    InputRecord,
    Pane,
    Tab,
    Views,
    Workspace,
)
from orcr_herdr.testing.ptyproc import PaneProcess
from orcr_herdr.testing.transport import (
    REQUEST_TIMEOUT,
    ApiError,
    Listener,
    peer_gone,
    read_request,
    send_line,
)

VERSION = "0.8.0"
ENTER = b"\r"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
ENTER_TOO_EARLY_WINDOW = 0.3
RESUME_DELAY = 0.75


@dataclass
class Violation:
    """A message that does not match the schema. ``kind``: request, reply or event."""

    kind: str
    errors: list[str]
    message: Any


class Stream:
    """Returned by the ``events.subscribe`` handler: the entries to stream after the ack."""

    def __init__(self, entries: list):
        self.entries = entries


class Emulator:
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
        resume_agents: herdr's ``[session] resume_agents_on_restore``.
        detect_agents: recognise ``claude``/``codex`` as the PTY's foreground process.
        session: the herdr session name (exported to panes as ``HERDR_SESSION``).
        herdr_bin: exported to panes as ``HERDR_BIN_PATH``.
        save_delay: seconds between the last change and the ``session.json`` write
            (herdr debounces 5 s; 0 writes after every change).
        violations_path: also append violations to this JSONL file (subprocess mode).
        request_timeout: how long a connection may take to send its request line (5 s).
        enter_window: the "too early" window after text for ``enter_too_early`` (0.3 s).
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
        resume_agents: bool = True,
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
        self._reply_hooks: list[Callable[[str, dict], dict]] = []
        self._resume_at: dict[str, float] = {}
        self.stop_requested = threading.Event()  # set by server.stop (the CLI exits on it)
        self._stop_after_reply = threading.Event()

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
            line = " ".join(argv + [_shell_quote(session.get("value", ""))]) + "\r"
            try:
                pane.proc.write(line.encode())
            except OSError:
                pass

    # ------------------------------------------------------------------ state ops
    def _mark_dirty(self) -> None:
        if self._dirty_at is None:
            self._dirty_at = time.monotonic()

    def _save(self) -> None:
        persist.save(self.session_file, list(self.workspaces.values()), self.focused_ws)
        self._dirty_at = None

    def _emit(self, name: str, data: dict) -> dict:
        envelope = self.hub.publish(name, data)
        self._check("event", envelope)
        return envelope

    def _pane(self, pane_id: str) -> Pane:
        for ws in self.workspaces.values():
            for tab in ws.tabs:
                for pane in tab.panes:
                    if pane.pane_id == pane_id:
                        return pane
        raise KeyError(pane_id)

    def find_pane(self, pane_id: str, live: bool = False) -> Pane:
        """The pane or ``pane_not_found`` (``live``: pending-resume panes count as missing)."""
        try:
            pane = self._pane(pane_id)
        except KeyError:
            raise ApiError("pane_not_found", f"pane {pane_id} not found") from None
        if live and not pane.live:
            raise ApiError("pane_not_found", f"pane {pane_id} not found")
        return pane

    def find_tab(self, tab_id: str) -> Tab | None:
        ws = self.workspaces.get(tab_id.split(":")[0])
        if ws is None:
            return None
        return next((t for t in ws.tabs if t.tab_id == tab_id), None)

    def find_workspace(self, workspace_id: str | None) -> Workspace:
        if workspace_id is None:
            if self.focused_ws is None:
                raise ApiError("workspace_not_found", "no active workspace")
            workspace_id = self.focused_ws
        ws = self.workspaces.get(workspace_id)
        if ws is None:
            raise ApiError("workspace_not_found", f"workspace {workspace_id} not found")
        return ws

    def pane_env(self, pane: Pane, env: dict[str, str] | None) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if k != "CODEX_THREAD_ID"}
        out.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
        out.update(env or {})
        out.update(
            {
                "HERDR_ENV": "1",
                "HERDR_SOCKET_PATH": self.socket_path,
                "HERDR_BIN_PATH": self.herdr_bin,
                "HERDR_WORKSPACE_ID": pane.workspace_id,
                "HERDR_TAB_ID": pane.tab_id,
                "HERDR_PANE_ID": pane.pane_id,
            }
        )
        if self.session:
            out["HERDR_SESSION"] = self.session
        out.pop("CODEX_THREAD_ID", None)
        return out

    def _start_process(self, pane: Pane, argv: list[str] | None, env: dict | None) -> None:
        cwd = pane.cwd if os.path.isdir(pane.cwd) else os.path.expanduser("~")
        try:
            pane.proc = PaneProcess(
                argv or self.shell, cwd, self.pane_env(pane, env), self.rows, self.cols
            )
        except OSError as exc:
            raise ApiError("layout_apply_failed", f"failed to start {argv!r}: {exc}") from None

    def new_workspace(self, cwd: str, label: str | None, env: dict | None, focus: bool):
        ws_id = f"w{encode_number(self.next_ws)}"
        ws = Workspace(ws_id, self.next_ws, cwd, custom_label=label or None)
        self.next_ws += 1
        self.workspaces[ws_id] = ws
        tab = self.new_tab(ws, None)
        pane = self.new_pane(ws, tab, cwd, None, env, None)
        self._emit("workspace_created", {"workspace": self.views.workspace(ws)})
        self._emit("tab_created", {"tab": self.views.tab(tab)})
        self._emit("pane_created", {"pane": self.views.pane(pane)})
        self._emit("layout_updated", {"layout": self.views.layout(tab)})
        if focus or self.focused_ws is None:
            self.focus_pane(pane)
        self._mark_dirty()
        return ws, tab, pane

    def new_tab(self, ws: Workspace, label: str | None) -> Tab:
        tab = Tab(f"{ws.workspace_id}:t{encode_number(ws.next_tab)}", ws.workspace_id, ws.next_tab)
        tab.custom_label = label or None
        ws.next_tab += 1
        ws.tabs.append(tab)
        if ws.active_tab_id is None:
            ws.active_tab_id = tab.tab_id
        return tab

    def new_pane(
        self,
        ws: Workspace,
        tab: Tab,
        cwd: str,
        argv: list[str] | None,
        env: dict | None,
        label: str | None,
    ) -> Pane:
        pane = Pane(
            f"{ws.workspace_id}:p{encode_number(ws.next_pane)}",
            ws.workspace_id,
            tab.tab_id,
            ws.next_pane,
            cwd,
            label=label,
            launch_argv=list(argv) if argv else None,
        )
        self._start_process(pane, argv, env)
        ws.next_pane += 1
        tab.panes.append(pane)
        if tab.focused_pane_id is None:
            tab.focused_pane_id = pane.pane_id
        if self.detect_agents and argv and DETECTED.get(os.path.basename(argv[0])):
            pane.agent_authority = "detect"
            pane.agent = DETECTED[os.path.basename(argv[0])]
        return pane

    def focus_pane(self, pane: Pane) -> None:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        if self.focused_ws != ws.workspace_id:
            self.focused_ws = ws.workspace_id
            self._emit("workspace_focused", {"workspace_id": ws.workspace_id})
        if ws.active_tab_id != tab.tab_id:
            ws.active_tab_id = tab.tab_id
            self._emit("tab_focused", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if tab.focused_pane_id != pane.pane_id:
            tab.focused_pane_id = pane.pane_id
        self._emit("pane_focused", {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if pane.agent_status == "done":
            self._set_status(pane, "idle")

    def _drop_pane(self, pane: Pane) -> tuple[Workspace, Tab]:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        tab.panes.remove(pane)
        if pane.proc is not None:
            pane.proc.terminate()
            pane.proc = None
        self._resume_at.pop(pane.pane_id, None)
        if tab.focused_pane_id == pane.pane_id:
            tab.focused_pane_id = tab.panes[0].pane_id if tab.panes else None
        self._mark_dirty()
        return ws, tab

    def _forget_tab(self, ws: Workspace, tab: Tab) -> None:
        ws.tabs.remove(tab)
        if ws.active_tab_id == tab.tab_id:
            ws.active_tab_id = ws.tabs[0].tab_id if ws.tabs else None

    def _forget_workspace(self, ws: Workspace) -> None:
        del self.workspaces[ws.workspace_id]
        if self.focused_ws == ws.workspace_id:
            self.focused_ws = next(iter(self.workspaces), None)

    def _remove_pane(self, pane: Pane, exited: bool) -> None:
        """Process exit: ``pane_exited`` only. ``pane.close``: ``pane_closed`` (+ workspace_closed)."""
        ws_info = self.views.workspace(self.workspaces[pane.workspace_id])
        ws, tab = self._drop_pane(pane)
        name = "pane_exited" if exited else "pane_closed"
        self._emit(name, {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if tab.panes:
            if not exited:
                self._emit("layout_updated", {"layout": self.views.layout(tab)})
            return
        self._forget_tab(ws, tab)  # an emptied tab vanishes without tab_closed
        if ws.tabs:
            return
        self._forget_workspace(ws)
        if not exited:
            self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_tab(self, tab: Tab) -> None:
        ws = self.workspaces[tab.workspace_id]
        ws_info = self.views.workspace(ws)
        for pane in list(tab.panes):
            self._drop_pane(pane)
        self._forget_tab(ws, tab)
        self._emit("tab_closed", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if not ws.tabs:
            self._forget_workspace(ws)
            self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_workspace(self, ws: Workspace) -> None:
        ws_info = self.views.workspace(ws)
        for tab in list(ws.tabs):
            for pane in list(tab.panes):
                self._drop_pane(pane)
        self._forget_workspace(ws)
        self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def _set_agent(self, pane: Pane, agent: str | None, status: str) -> None:
        if agent == pane.agent:
            if agent is not None:
                self._set_status(pane, status)
            return
        previous = pane.agent_status
        data: dict[str, Any] = {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id}
        if agent is None:
            data.update({"released": True, "final_status": previous})
            pane.agent = None
            pane.agent_session = None
            pane.agent_status = "unknown"
            self._mark_dirty()
        else:
            data["agent"] = agent
            pane.agent = agent
        self._emit("pane_agent_detected", data)
        if agent is not None:
            self._set_status(pane, status, force=True)

    def _set_status(self, pane: Pane, status: str, force: bool = False) -> None:
        if status == pane.agent_status and not force:
            return
        pane.agent_status = status
        pane.state_change_seq += 1
        payload: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "workspace_id": pane.workspace_id,
            "agent_status": status,
        }
        if pane.agent:
            payload["agent"] = pane.agent
        self.hub.push_status(pane.pane_id, status, payload)

    # ------------------------------------------------------------------ input
    def deliver(self, pane: Pane, method: str, segments: list[tuple[str, bytes]]) -> None:
        """Write one request's bytes in ONE write, applying the Enter-swallowing modes.

        ``segments`` are ``("text"|"enter"|"key", bytes)`` in order.
        """
        now = time.monotonic()
        out = bytearray()
        sent = b"".join(data for _, data in segments)
        had_text, swallowed = False, 0
        for kind, data in segments:
            if kind == "text":
                out += data
                had_text = True
                pane.last_text_at = now
                pane.text_pending, pane.drop_decided = True, False
            elif kind == "enter":
                swallow = False
                if self.enter_too_early and (
                    had_text or now - pane.last_text_at < self.enter_window
                ):
                    swallow = True
                elif pane.text_pending and not pane.drop_decided:
                    pane.drop_decided = True
                    p = self.drop_enter_probability
                    swallow = p > 0 and self.rng.random() < p
                if swallow:
                    swallowed += 1
                else:
                    out += data
                    pane.text_pending = False
            else:
                out += data
        pane.inputs.append(InputRecord(time.time(), method, sent, bytes(out), swallowed))
        if out:
            assert pane.proc is not None
            try:
                pane.proc.write(bytes(out))
            except OSError as exc:
                raise ApiError(
                    "pane_send_failed", f"write to {pane.pane_id} failed: {exc}"
                ) from None

    def _read_text(self, pane: Pane, source: str, lines: int | None) -> tuple[str, bool]:
        assert pane.proc is not None
        if source in ("recent", "recent_unwrapped"):
            rows = pane.proc.history_lines() + pane.proc.visible_lines()
            while rows and not rows[-1]:
                rows.pop()
            want = min(lines if lines is not None else 80, 1000)
        else:
            rows = pane.proc.visible_lines()
            while rows and not rows[-1]:  # trailing blank rows carry nothing
                rows.pop()
            want = lines
        truncated = False
        if want is not None and len(rows) > want:
            rows, truncated = rows[len(rows) - want :] if want else [], True
        return "\n".join(rows), truncated


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


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# ---------------------------------------------------------------------- program
def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "herdr"


def session_paths(session: str | None) -> tuple[Path, Path]:
    """(socket path, session dir) like herdr: ``--session`` > HERDR_SOCKET_PATH > HERDR_SESSION."""
    cfg = config_dir()
    if session is None:
        env_session = os.environ.get("HERDR_SESSION")
        data = cfg if env_session in (None, "", "default") else cfg / "sessions" / env_session
        socket_env = os.environ.get("HERDR_SOCKET_PATH")
        if socket_env:
            return Path(socket_env), data
        return data / "herdr.sock", data
    data = cfg if session == "default" else cfg / "sessions" / session
    return data / "herdr.sock", data


def _parse_cli(argv: list[str]) -> tuple[str | None, list[str]]:
    session, rest = None, []
    it = iter(argv)
    for arg in it:
        if arg == "--session":
            session = next(it, None)
        elif arg.startswith("--session="):
            session = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return session, rest


def _read_herdr_config() -> dict:
    path = os.environ.get("HERDR_CONFIG_PATH")
    if not path or not os.path.exists(path):
        return {}
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


def main(argv: list[str] | None = None) -> int:
    """``herdr [--session NAME] server`` / ``herdr --version`` for tests.

    Emulator knobs come from env vars (a shim bakes them in):
    ``ORCR_HERDR_EMU_PROTOCOL``, ``_STRICT`` (default: on when the schema is found),
    ``_SHELL``,
    ``_ENTER_TOO_EARLY``, ``_DROP_ENTER``, ``_SEED``, ``_VIOLATIONS`` (JSONL path,
    default ``<session dir>/emulator-violations.jsonl``).
    """
    argv = sys.argv[1:] if argv is None else argv
    session, rest = _parse_cli(argv)
    if rest in (["--version"], ["-V"], ["version"]):
        print(f"herdr {VERSION}")
        return 0
    if rest != ["server"]:
        print("herdr emulator: only `[--session NAME] server` and `--version`", file=sys.stderr)
        return 2
    sock, data = session_paths(session)
    if session is not None:  # the explicit flag makes the server ignore inherited overrides
        os.environ.pop("HERDR_SOCKET_PATH", None)
    os.environ.pop("HERDR_CLIENT_SOCKET_PATH", None)
    cfg = _read_herdr_config()
    resume = cfg.get("session", {}).get("resume_agents_on_restore", True)
    from orcr_herdr.testing.schema import find_schema

    strict_env = os.environ.get("ORCR_HERDR_EMU_STRICT", "")
    strict = strict_env != "0" and (strict_env == "1" or find_schema() is not None)
    shell = os.environ.get("ORCR_HERDR_EMU_SHELL")
    emu = Emulator(
        sock,
        data,
        protocol=int(os.environ.get("ORCR_HERDR_EMU_PROTOCOL", "20")),
        strict=strict,
        shell=[shell] if shell else None,
        enter_too_early=_env_flag("ORCR_HERDR_EMU_ENTER_TOO_EARLY"),
        drop_enter_probability=float(os.environ.get("ORCR_HERDR_EMU_DROP_ENTER", "0")),
        seed=int(os.environ.get("ORCR_HERDR_EMU_SEED", "0")),
        resume_agents=bool(resume),
        session=session or os.environ.get("HERDR_SESSION"),
        herdr_bin=os.path.abspath(sys.argv[0]),
        violations_path=os.environ.get("ORCR_HERDR_EMU_VIOLATIONS")
        or (data / "emulator-violations.jsonl" if strict else None),
    )
    data.mkdir(parents=True, exist_ok=True)
    import signal

    def on_signal(signum, frame):
        emu.stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        emu.start()
    except RuntimeError as exc:
        print(f"herdr: {exc}", file=sys.stderr)
        return 1
    print(f"herdr server listening on {sock}", file=sys.stderr)
    while not emu.stop_requested.wait(0.5):
        pass
    emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
