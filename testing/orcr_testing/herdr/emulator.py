"""A faithful fake herdr server for tests: herdr 0.8 (socket protocols 19, 20;
ORCR-NOTES §15) or herdr 0.9.3 (protocol 22; HERDR-0.9.md §11), chosen by
``protocol`` (:mod:`orcr_testing.herdr.dialect` lists what differs).

In-process::

    emu = Emulator(socket_path, state_dir, protocol=22)
    emu.start(); ...; emu.stop()

As a program (what a ``herdr`` shim on PATH runs; see
:mod:`orcr_testing.herdr.program`)::

    python -m orcr_testing.herdr.emulator --session NAME server
 Panes run real processes on real PTYs, rendered with pyte.
Every request, reply and event is checked against the schema of its protocol
(``herdr-api.schema.json`` for 0.8, ``herdr-api-0.9.schema.json`` for 0.9) when
``strict`` (the default): violations are recorded in ``violations``.
"""

from __future__ import annotations

import os
import random
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orcr_testing.herdr import droprule
from orcr_testing.herdr.dialect import dialect_for
from orcr_testing.herdr.events import TICK, EventHub
from orcr_testing.herdr.hooks import TestHooks
from orcr_testing.herdr.model import DETECTED, RESUME_ARGV, InputRecord, Pane, Views, Workspace
from orcr_testing.herdr.serving import Deferred, Serving, Stream, Violation
from orcr_testing.herdr.session import ENTER_TOO_EARLY_WINDOW, RESUME_DELAY, SessionState
from orcr_testing.herdr.transport import REQUEST_TIMEOUT, ApiError, Listener

__all__ = ["RESUME_DELAY", "Deferred", "Emulator", "Stream", "Violation"]

VERSION = "0.8.0"  # herdr --version of the 0.8 dialect (0.9: HERDR_09.version)


class Emulator:
    """A fake herdr server. All public attributes may be changed while it runs.

    Parts, each held as an attribute: ``state`` (:class:`SessionState`: workspaces,
    tabs, panes, the event hub, what a restart restores, pane input), reading of
    the emulator only the settings its ``SessionHost`` names; ``serving``
    (:class:`Serving`: the request loop, the schema check, the request log, open
    streams and the transport's fault injection). The test hooks are the
    emulator's methods, delegating to ``hooks`` (:class:`TestHooks`: the lock, the
    state and the serving part).

    Args:
        socket_path: the API socket to listen on (AF_UNIX: keep it under 107 bytes).
        state_dir: the session dir (``session.json`` is read at start, written on change).
        protocol: what ``ping`` answers and the herdr it behaves as (19 = tagged
            v0.8.0, 20 = the 0.8 line, 22 = 0.9.3; others behave as 0.8).
        version: ``ping``'s version string (default: the dialect's).
        strict: validate every message against the schema and record violations.
        shell: argv of the "default shell" of new panes (``$SHELL`` else ``/bin/sh``).
        rows, cols: the headless PTY size (default 80x24 on 0.8, 120x40 on 0.9).
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
        drop_self_reported: herdr 0.9.2's drop of a self-reported agent while the
            pane's own shell is the foreground job (:mod:`orcr_testing.herdr.droprule`);
            default: the dialect's (on for protocol 22 only).

    Test hooks (thread-safe): :meth:`pane`, :meth:`panes`, :meth:`screen`,
    :meth:`inputs`, :meth:`set_agent`, :meth:`set_agent_status`,
    :meth:`set_agent_session` (silent, like herdr), :meth:`clear_agent_session`,
    :meth:`exit_agent`, :meth:`add_agent` (a user's agent, e.g. in a
    second session), :meth:`close_pane`, :meth:`zoom_tab`, :meth:`drop_connections`,
    :meth:`corrupt_next_reply`, :meth:`before_subscribe`,
    :meth:`publish`, :meth:`retained_events`, :meth:`restart`, :meth:`crash`,
    :meth:`lose_events` (0.9);
    attributes ``violations``, ``requests``, ``enter_too_early``,
    ``drop_enter_probability``, ``protocol``, ``dialect``, ``stop_requested``,
    ``events_lost_sent``, ``drop_self_reported``, ``drop_checks``,
    ``self_report_drops``.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike,
        state_dir: str | os.PathLike,
        protocol: int = 20,
        *,
        version: str | None = None,
        strict: bool = True,
        shell: list[str] | None = None,
        rows: int | None = None,
        cols: int | None = None,
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
        drop_self_reported: bool | None = None,
    ):
        self.socket_path = str(socket_path)
        self.state_dir = Path(state_dir)
        self.dialect = dialect_for(protocol)
        self.protocol, self.version = protocol, version or self.dialect.version
        self.strict = strict
        self.shell = list(shell) if shell else [os.environ.get("SHELL") or "/bin/sh"]
        self.rows, self.cols = rows or self.dialect.rows, cols or self.dialect.cols
        self.enter_too_early = enter_too_early
        self.drop_enter_probability = drop_enter_probability
        self.rng = random.Random(seed)
        self.resume_agents = resume_agents
        self.detect_agents = detect_agents
        self.session = session
        self.herdr_bin = herdr_bin
        self.save_delay = save_delay
        self.request_timeout = request_timeout
        self.enter_window = enter_window
        if drop_self_reported is None:
            drop_self_reported = self.dialect.drop_self_reported
        self.drop_self_reported = drop_self_reported
        self.drop_checks = 0  # self-report drop checks made (droprule)
        self.self_report_drops: list[dict] = []  # {pane_id, agent, status, at} per drop
        checker = None
        if strict:
            from orcr_testing.herdr.schema import checker_for

            checker = checker_for(protocol)
        self.lock = threading.RLock()  # herdr's "app loop"
        self.serving = Serving(self, checker, violations_path)
        self.state = SessionState(self, self.serving.check)
        self.hooks = TestHooks(self.lock, self.state, self.serving)
        self.stopped = threading.Event()
        self.stopped.set()
        self._listener: Listener | None = None
        self._ticker: threading.Thread | None = None
        self.stop_requested = threading.Event()  # set by server.stop (the CLI exits on it)

    # ------------------------------------------------------------------ what tests read
    @property
    def checker(self) -> Any:
        """The schema checker of this protocol (None when not ``strict``)."""
        return self.serving.checker

    @property
    def violations(self) -> list[Violation]:
        return self.serving.violations

    @property
    def requests(self) -> list[dict]:
        """Every parsed request, in arrival order."""
        return self.serving.requests

    @property
    def muted_connections(self) -> int:
        return self.serving.muted_connections

    @property
    def events_lost_sent(self) -> int:
        return self.serving.events_lost_sent

    @property
    def workspaces(self) -> dict[str, Workspace]:
        return self.state.workspaces

    @property
    def views(self) -> Views:
        return self.state.views

    @property
    def hub(self) -> EventHub:
        return self.state.hub

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
            self.state.hub = EventHub()
            # agent.view / workspace.view are transient: they last until the server exits
            self.agent_view: dict | None = None
            self.workspace_view: dict | None = None
            self.stop_requested.clear()
            self.serving.stop_after_reply.clear()
            self.state.restore()
            self.stopped.clear()
        self._listener = Listener(self.socket_path, self.serving.serve)
        try:
            self._listener.start()
        except BaseException:
            self.state.kill_all()
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
                self.state.save()
            self.stopped.set()
            self.state.kill_all()
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
        state = self.state
        now = time.monotonic()
        for pane in [p for ws in list(state.workspaces.values()) for p in ws.panes()]:
            if pane.pending_resume:
                if now >= state.resume_at.get(pane.pane_id, now):
                    self._resume(pane)
                continue
            if pane.proc is None:
                continue
            if pane.proc.poll() is not None:
                state.remove_pane(pane, exited=True)
                continue
            title = pane.proc.title
            if title != pane.title:
                pane.title = title
                pane.revision += 1
                state.emit("pane_updated", {"pane": state.views.pane(pane)})
            droprule.check(self, pane, now)
            if self.detect_agents and pane.agent_authority in (None, "detect"):
                names = pane.proc.foreground_names()
                detected = next((DETECTED[n] for n in names if n in DETECTED), None)
                if detected != pane.agent:
                    pane.agent_authority = "detect" if detected else None
                    state.set_agent(pane, detected, "unknown")
        if state.dirty_at is not None and now - state.dirty_at >= self.save_delay:
            state.save()

    def _resume(self, pane: Pane) -> None:
        """Native resume: a shell in the saved cwd, then the reported ``resume_argv`` (0.9.2),
        else ``claude --resume <id>``, typed + CR."""
        pane.pending_resume = False
        self.state.resume_at.pop(pane.pane_id, None)
        session = pane.agent_session or {}
        try:
            self.state.start_process(pane, None, None)
        except ApiError:
            return
        argv = RESUME_ARGV.get(session.get("agent", ""))
        if pane.resume_argv:  # no apostrophes in it (checked when reported): quoted as is
            line = " ".join(f"'{a}'" for a in pane.resume_argv["argv"]) + "\r"
        elif argv:
            line = " ".join(argv + [shlex.quote(session.get("value", ""))]) + "\r"
        else:
            line = None
        if line and pane.proc is not None:
            try:
                pane.proc.write(line.encode())
            except OSError:
                pass

    # ------------------------------------------------------------------ test hooks
    def pane(self, pane_id: str) -> Pane:
        """The live :class:`Pane` object (KeyError when gone)."""
        return self.hooks.pane(pane_id)

    def panes(self) -> list[Pane]:
        return self.hooks.panes()

    def inputs(self, pane_id: str) -> list[InputRecord]:
        """Every write into the pane: what was sent, what reached the PTY."""
        return self.hooks.inputs(pane_id)

    def screen(self, pane_id: str) -> str:
        """The pane's visible screen, as ``pane.read`` would give it."""
        return self.hooks.screen(pane_id)

    def set_agent(self, pane_id: str, agent: str | None, status: str = "unknown") -> None:
        self.hooks.set_agent(pane_id, agent, status)

    def zoom_tab(self, tab_id: str, zoomed: bool = True) -> None:
        self.hooks.zoom_tab(tab_id, zoomed)

    def set_agent_status(self, pane_id: str, status: str) -> None:
        self.hooks.set_agent_status(pane_id, status)

    def set_agent_session(
        self, pane_id: str, value: str, agent: str | None = None, source: str | None = None
    ) -> None:
        self.hooks.set_agent_session(pane_id, value, agent, source)

    def clear_agent_session(self, pane_id: str) -> None:
        self.hooks.clear_agent_session(pane_id)

    def add_agent(
        self,
        agent: str = "claude",
        status: str = "idle",
        *,
        cwd: str | None = None,
        label: str | None = None,
    ) -> str:
        return self.hooks.add_agent(agent, status, cwd=cwd, label=label)

    def close_pane(self, pane_id: str) -> None:
        self.hooks.close_pane(pane_id)

    def exit_agent(self, pane_id: str) -> None:
        self.hooks.exit_agent(pane_id)

    def drop_connections(self, count: int = 1, when: str = "before") -> None:
        self.hooks.drop_connections(count, when)

    def mute(self) -> None:
        self.hooks.mute()

    def unmute(self) -> None:
        self.hooks.unmute()

    def lose_events(self, open_streams: bool = True, next_subscriptions: int = 0) -> None:
        self.hooks.lose_events(open_streams, next_subscriptions)

    def before_subscribe(self, change: Callable[[], None]) -> None:
        self.hooks.before_subscribe(change)

    def corrupt_next_reply(self, mutate: Callable[[str, dict], dict]) -> None:
        self.hooks.corrupt_next_reply(mutate)

    def retained_events(self) -> list[dict]:
        return self.hooks.retained_events()

    def publish(self, name: str, data: dict) -> dict:
        return self.hooks.publish(name, data)


if __name__ == "__main__":
    from orcr_testing.herdr.program import main

    raise SystemExit(main())
