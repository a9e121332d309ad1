"""Before the first prompt: waiting for a TUI's input, and its dialogs.

A dialog (a folder-trust question, a first-run setup) is never typed into: orcr
answers it itself when the provider's option says so, else the row records that a
person is asked (``agent.blocked``). Moved out of ``pipeline.py`` (its size).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, procs
from orcr_core.contracts import DriverError, PaneRef, ProgramProcess
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.pipeline")  # the start's log, as before the move

READY_WAIT = 10.0  # seconds to wait for a new TUI to draw before typing into it
SETTLE = 0.15  # seconds between a TUI's first ready screen and typing into it
#: how many keys orcr presses answering one dialog itself before leaving it to a person
ANSWER_PRESSES = 6
ANSWER_WAIT = 2.0  # seconds for a TUI to redraw after a key orcr pressed
#: seconds between a dialog's first sight and orcr's first key: Claude Code drops
#: every key sent in the first ~0.3 s after drawing its trust dialog
DIALOG_SETTLE = 0.5


class Canceled(Exception):
    pass


def fresh(agent: Agent) -> Agent:
    return Agent.get_by_id(agent.id)


def check(agent: Agent) -> Agent:
    """Re-read the row; raise Canceled if it was canceled or ended meanwhile."""
    agent = fresh(agent)
    if agent.status != "starting" or agent.cancel_requested:
        raise Canceled()
    return agent


def await_input(server: ServerContext, agent: Agent, provider, spec, pane: PaneRef) -> bool:
    """Wait until the TUI is at its input, from its screen (``Driver.read``) and the
    provider's optional ``screen_state`` hook. True: type the prompt now.

    A dialog (a folder-trust question, a first-run setup) is never typed into:
    when its ``answer_option`` is set in ``[providers.<name>]`` orcr presses its
    answer keys itself (``agent.dialog_answered``), else the row records the
    dialog's reason (``agent.blocked``) and this returns False; the worker
    thread is free again and the monitor runs the pipeline again to re-check
    the screen (about twice a second), under ``timings.dialog_wait``
    instead of the stuck-start guard. A screen the hook does not recognise for
    :data:`READY_WAIT` after its first draw is typed into as before (an adapter that
    does not know a new release's screens must not stall every start); a screen with
    nothing drawn yet is waited for under the stuck-start guard.

    Once orcr has answered a dialog of this start (an ``agent.dialog_answered`` event
    since its pane was started, so a re-run after a block or a server restart knows
    too), an unrecognised screen is never typed into: the answer may restart the TUI
    (Gemini CLI relaunches itself after its trust question, 10-30 s on a busy machine,
    and keys typed meanwhile are lost while the row says the prompt went in). The
    adapter demonstrably knows this TUI's screens, so orcr waits for its ready input
    or a next dialog; the stuck-start guard (``timings.max_starting``, counted from the
    answer) ends a TUI that never comes back.
    """
    driver = server.driver
    hook = getattr(provider, "screen_state", None)
    if hook is None:
        wait_ready(driver, pane)
        return True
    deadline = time.monotonic() + READY_WAIT
    recheck = time.monotonic() + 1.0
    presses: dict[str | None, int] = {}
    seen: set[str | None] = set()
    answered = answered_since_start(agent)
    draw = FirstDraw(driver, pane)
    blank = True
    while True:
        if blank and not draw.due():
            screen = ""  # nothing written since a read found the screen blank
        else:
            try:
                screen = driver.read(pane)
            except DriverError as exc:
                if exc.code in ("pane_not_found", "not_found"):
                    return True  # its program exited: delivery says so
                raise
        blank = not screen.strip()
        if blank:
            # nothing drawn yet: the wait for a screen it does not know starts at the
            # first draw (OpenCode under load draws nothing for tens of seconds, and a
            # prompt typed before it takes input is lost); the stuck-start guard
            # (timings.max_starting) ends a TUI that never draws
            deadline = time.monotonic() + READY_WAIT
            if time.monotonic() >= recheck:
                agent = check(agent)
                recheck = time.monotonic() + 1.0
            time.sleep(0.05)
            continue
        state = hook(screen, spec)
        if state.state == "ready":
            _unblock(agent)
            time.sleep(SETTLE)
            return True
        if state.state == "dialog":
            if state.kind not in seen and agent.blocked_reason != state.reason:
                # a dialog just drawn may take no keys yet and may be a passing frame:
                # look again after DIALOG_SETTLE before answering or reporting it
                seen.add(state.kind)
                time.sleep(DIALOG_SETTLE)
                continue
            option = state.answer_option
            pressed = presses.get(state.kind, 0)
            if (
                option
                and spec.options.get(option) is True
                and state.answer_keys
                and pressed < ANSWER_PRESSES
            ):
                if pressed == 0:
                    with db.atomic("IMMEDIATE"):
                        agent = check(agent)
                        events.emit(
                            "agent.dialog_answered",
                            agent.uuid,
                            path=agent.path,
                            dialog=state.kind,
                            keys=list(state.answer_keys),
                            option=f"providers.{agent.provider}.{option}",
                        )
                        lifecycle.update(
                            agent,
                            None,
                            last_progress_at=time.time(),
                            blocked_reason=None,
                            blocked_at=None,
                        )
                presses[state.kind] = pressed + 1
                answered = True
                # one key at a time, each re-derived from the redrawn screen: a TUI
                # drops keys that arrive before its menu takes input, or an Enter
                # that follows an arrow too closely
                time.sleep(SETTLE)
                driver.send_keys(pane, [state.answer_keys[0]])
                _wait_changed(driver, pane, screen)
                deadline = time.monotonic() + READY_WAIT
                continue
            _block(agent, state)
            return False
        if time.monotonic() >= deadline:
            if not answered:
                log.warning("agent %s: its screen is not recognised; typing the prompt", agent.path)
                return True
            # after an answer: wait for the ready input (the TUI may be restarting);
            # the stuck-start guard ends the row, seen here
            if time.monotonic() >= recheck:
                agent = check(agent)
                recheck = time.monotonic() + 1.0
        time.sleep(0.05)


def answered_since_start(agent: Agent) -> bool:
    """Whether orcr answered a dialog of this agent since its pane was last started
    (a resumed agent starts a new pane: an answer of an earlier start does not count)."""
    started = events.last_of(agent.uuid, "pane.start_requested")
    return events.has(agent.uuid, "agent.dialog_answered", after=started or 0)


def _wait_changed(driver, pane: PaneRef, before: str) -> None:
    """After pressing a key of a dialog's answer: until the screen redraws (or
    ANSWER_WAIT: a swallowed key is pressed again)."""
    deadline = time.monotonic() + ANSWER_WAIT
    while time.monotonic() < deadline:
        try:
            if driver.read(pane) != before:
                return
        except DriverError:
            return
        time.sleep(0.05)


def _block(agent: Agent, state) -> None:
    """Record that the TUI asks a person (once per question: a re-check writes nothing)."""
    with db.atomic("IMMEDIATE"):
        agent = check(agent)
        if agent.blocked_reason == state.reason:
            return
        lifecycle.update(agent, None, blocked_reason=state.reason, blocked_at=time.time())
        events.emit(
            "agent.blocked", agent.uuid, path=agent.path, dialog=state.kind, reason=state.reason
        )


def _unblock(agent: Agent) -> None:
    """The dialog was answered: a progress marker, the reason cleared."""
    if not fresh(agent).blocked_reason:
        return
    with db.atomic("IMMEDIATE"):
        agent = check(agent)
        if not agent.blocked_reason:
            return
        lifecycle.update(
            agent, None, blocked_reason=None, blocked_at=None, last_progress_at=time.time()
        )
        events.emit("agent.unblocked", agent.uuid, path=agent.path)


#: the first and the longest pause between two screen reads of :func:`wait_ready`
READ_EVERY = (0.05, 0.25)
#: a blank screen read less than this after its program's last write is read once
#: more this long after that write: the multiplexer may not have drawn it yet
LAG = 0.2
#: seconds between two reads of a blank screen whose program neither wrote nor read
#: meanwhile: it may wait for a child of its own that draws (a sandbox's launcher)
QUIET_READ = 1.0
#: the longest time between two reads of a blank screen, however busy its program
QUIET_MAX = 3.0


class FirstDraw:
    """Whether a read of a new TUI's blank screen can find something new.

    Each read is a multiplexer round trip (a tmux client process: most of a start's
    server CPU, bench/lifetime.py), and a TUI slow to start on a busy machine draws
    nothing for seconds. A driver that knows the program's pid (:class:`ProgramProcess`)
    lets orcr watch its I/O (``/proc/<pid>/io``, a few microseconds): the screen is
    read once the program wrote since the last read (and once more :data:`LAG` after
    a write the read came too soon after); while it reads (loading itself) and writes
    nothing, every :data:`QUIET_MAX`; once it does neither (waiting for a child that
    draws?), every :data:`QUIET_READ`. A program that wrote nothing yet and has no child
    (a new TUI) is not read before it writes or those pauses pass: its screen is blank.
    Without a pid to watch, at every call."""

    def __init__(self, driver, pane: PaneRef) -> None:
        self._pid = None
        if isinstance(driver, ProgramProcess):
            try:
                pid = driver.program_pid(pane)
            except DriverError:
                pid = None
            if pid and procs.io_counts(pid) is not None:
                self._pid = pid
        self._seen = procs.io_counts(self._pid) if self._pid else None
        self._wrote = self._read = float("-inf")
        self._busy = time.monotonic()
        if self._seen is not None and self._seen[1] == 0 and not procs.has_children(self._pid):
            # it wrote nothing yet and started nothing that could have: nothing drawn, no
            # read due before it writes (a new TUI; a start resumed after a restart has
            # written, and a launcher's child may have drawn: both are read at once)
            self._read = self._busy

    def due(self) -> bool:
        if self._pid is None:
            return True
        now = time.monotonic()
        counts = procs.io_counts(self._pid)
        if counts is None:
            return True  # gone, or no longer readable: read and see
        if self._seen is None or counts[1] != self._seen[1]:
            self._wrote = now
        if self._seen is None or counts[0] != self._seen[0]:
            self._busy = now
        self._seen = counts
        since = now - self._read
        if (
            self._wrote > self._read  # it wrote since the last read
            or (self._read - self._wrote < LAG <= now - self._wrote)  # read too soon after
            or since >= QUIET_MAX
            or (since >= QUIET_READ and now - self._busy >= QUIET_READ)
        ):
            self._read = now
            return True
        return False


def wait_ready(driver, pane: PaneRef) -> None:
    """Until the new TUI has drawn anything (a provider without ``screen_state``).

    Each read is a multiplexer round trip (a tmux subprocess): the pause between
    reads grows from 0.05 s to 0.25 s, so a program slow to draw on a busy machine
    costs a few reads, not one every 50 ms (bench/lifetime.py); a program orcr can
    watch (:class:`FirstDraw`) is read when it wrote, else every 1-3 s."""
    deadline = time.monotonic() + READY_WAIT
    pause = READ_EVERY[0]
    draw = FirstDraw(driver, pane)
    while time.monotonic() < deadline:
        try:
            if draw.due() and driver.read(pane).strip():
                time.sleep(SETTLE)
                return
        except DriverError as exc:
            if exc.code in ("pane_not_found", "not_found"):
                return  # its program exited (herdr drops the pane): delivery says so
        time.sleep(pause)
        pause = min(pause * 1.5, READ_EVERY[1])
