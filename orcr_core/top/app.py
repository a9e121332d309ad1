"""The ``orcr top`` screen (Textual). Only ``orcr top`` imports this module.

The app owns a :class:`~orcr_core.top.model.FleetModel`; the stream thread
posts messages (snapshot, event batches, connection lost) and the app applies
them in order on its own loop, then redraws. Requests (kill, send, read,
attach, status) run in worker threads on a connection of their own.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Footer, Input, Static

from orcr_core.kit.activities import activity_line, read_activities
from orcr_core.sdk.client import ServerError
from orcr_core.top.actions import KeyActions
from orcr_core.top.ended import EndedToggle
from orcr_core.top.filtering import Filter
from orcr_core.top.model import FleetModel, Gap
from orcr_core.top.rows import Row
from orcr_core.top.screens import AnswerScreen, ConfirmScreen, HelpScreen, PromptScreen
from orcr_core.top.source import Requests, WatchSource
from orcr_core.top.table import FleetTable
from orcr_core.top.text import drift_line, header_line, held_line

#: seconds between server.status refreshes (caps, drift, the multiplexer's health)
STATUS_EVERY = 2.0

#: the dialogs (``screens``) are importable from here too, as tests and tools do
__all__ = [
    "AnswerScreen",
    "ConfirmScreen",
    "Down",
    "Events",
    "HelpScreen",
    "PromptScreen",
    "Snapshot",
    "TopApp",
]


class Snapshot(Message):
    def __init__(self, snap: dict):
        super().__init__()
        self.snap = snap


class Events(Message):
    def __init__(self, events: list[dict]):
        super().__init__()
        self.events = events


class Down(Message):
    def __init__(self, reason: str):
        super().__init__()
        self.reason = reason


class _Sink:
    """Hands the stream thread's output to the app's message queue (thread-safe)."""

    def __init__(self, app: TopApp):
        self.app = app

    def on_snapshot(self, snap: dict) -> None:
        self.app.post_message(Snapshot(snap))

    def on_events(self, events: list[dict]) -> None:
        self.app.post_message(Events(events))

    def on_down(self, reason: str) -> None:
        self.app.post_message(Down(reason))


class HeaderBar(Widget):
    """The header lines. Redrawn without a re-layout unless its height changes
    (a Static's update re-lays the whole screen out, on every batch)."""

    DEFAULT_CSS = "HeaderBar { height: 3; padding: 0 1; background: $panel; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.text = ""

    def show(self, text: str) -> None:
        if text == self.text:
            return
        lines = text.count("\n") + 1
        self.text = text
        if lines != self.text_lines:
            self.styles.height = lines
        self.refresh()

    @property
    def text_lines(self) -> int:
        h = self.styles.height
        return int(h.value) if h is not None else 0

    def render(self) -> Text:
        return Text(self.text)


class TopApp(EndedToggle, KeyActions, App[None]):
    """``orcr top``."""

    TITLE = "orcr top"
    CSS = """
    #banner { display: none; background: $error; color: $text; padding: 0 1; }
    #banner.shown { display: block; }
    #filter { display: none; }
    #filter.shown { display: block; }
    #table { height: 1fr; }
    #dialog { width: 90%; max-height: 80%; height: auto; border: thick $accent; padding: 1 2;
              background: $surface; }
    #answer-scroll { height: auto; max-height: 30; }
    ModalScreen { align: center middle; }
    .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort"),
        Binding("enter", "answer", "Answer", show=True),
        Binding("p", "prompt", "Prompt"),
        Binding("k", "kill", "Kill"),
        Binding("K", "kill_filtered", "Kill filter", show=False),
        Binding("a", "attach", "Attach"),
        Binding("r", "resume", "Resume"),
        Binding("e", "ended", "Ended"),
        Binding("space", "loop_toggle", "Pause loop"),
        Binding("f", "fire", "Fire loop"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        socket_path: Path,
        flt: Filter | None = None,
        sort: str = "path",
        source=None,
    ):
        """``source`` replaces the watch stream (benchmarks and screenshots feed a
        fake one): anything with ``start()``, ``stop()`` and ``resnapshot()`` that
        posts :class:`Snapshot`, :class:`Events` and :class:`Down` to the app."""
        super().__init__()
        self.socket_path = socket_path
        self.model = FleetModel()
        self.flt = flt or Filter()
        self.sort = sort
        self.connected = False
        self.down_reason: str | None = None
        self.requests = Requests(socket_path)
        self._answers = Requests(socket_path)
        self._answer_queue: queue.Queue[str | None] = queue.Queue()
        self._asked: set[str] = set()
        self._status_due = 0.0
        self._loops_scheduled = False
        self.source = source if source is not None else WatchSource(socket_path, _Sink(self))
        self.renders = 0
        self.last_render_ms = 0.0
        self.notices: list[str] = []  # the last few notifications, newest last (tests read them)

    def notify(self, message: str, **kwargs) -> None:
        self.notices = [*self.notices[-19:], message]
        super().notify(message, **kwargs)

    # -- layout -------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # kept as attributes: a modal screen on top must not hide them from updates
        self.header = HeaderBar(id="header")
        self.banner = Static(id="banner")
        self.table = FleetTable(id="table")
        self.filter_box = Input(
            placeholder="filter: idle working stalled parked review/* nightly/** text", id="filter"
        )
        yield self.header
        yield self.banner
        yield self.table
        yield self.filter_box
        yield Footer()

    def on_mount(self) -> None:
        self.set_banner("connecting…")
        threading.Thread(target=self._answer_worker, name="orcr-top-answers", daemon=True).start()
        self.source.start()
        self.set_interval(1.0, self._tick)
        self.set_interval(STATUS_EVERY, self.refresh_status)
        self.table.focus()

    def on_unmount(self) -> None:
        self.source.stop()
        self._answer_queue.put(None)
        self.requests.close()

    # -- the stream ---------------------------------------------------------

    def on_snapshot(self, msg: Snapshot) -> None:
        vanished = self.model.load_snapshot(msg.snap)
        self.connected = True
        self.down_reason = None
        self.set_banner(None)
        if vanished:
            self.fetch_final(vanished)
        self.refresh_status()
        self.refresh_loops()
        self._ask_answers()
        self.refresh_view()

    def on_events(self, msg: Events) -> None:
        if not self.connected:
            return  # from a stream that has since dropped; a snapshot follows
        try:
            self.model.apply_batch(msg.events)
        except Gap:
            self.connected = False
            self.source.resnapshot()
            return
        if not self._loops_scheduled and any(
            e["kind"].startswith(("loop.", "run.")) for e in msg.events
        ):
            self._loops_scheduled = True  # one loop.list for a burst of loop events
            self.set_timer(0.2, self.refresh_loops)
        if any(e["kind"] == "agent.status" for e in msg.events):
            self._status_due = min(
                self._status_due or time.monotonic() + 0.5, time.monotonic() + 0.5
            )
        self._ask_answers()
        self.refresh_view()

    def on_down(self, msg: Down) -> None:
        self.connected = False
        self.down_reason = msg.reason
        self.set_banner(f"reconnecting to the orcr server… ({msg.reason})")

    def set_banner(self, text: str | None) -> None:
        banner = self.banner
        banner.update(text or "")
        banner.set_class(bool(text), "shown")

    # -- drawing ------------------------------------------------------------

    def header_text(self) -> str:
        h = self.model.header()
        lines = [header_line(h)]
        if held := held_line(h):
            lines.append(held)
        lines.append(drift_line(h))
        lines.extend(activity_line(a) for a in self.model.activities)
        extra = f"sort {self.sort}"
        if self.flt:
            extra += f"  filter: {self.flt.text}"
        lines.append(extra + f"  · seq {self.model.seq if self.model.seq is not None else '-'}")
        return "\n".join(lines)

    def _tick(self) -> None:
        """The TIME column ages: redraw the lines in view (no rebuild); the activities
        (a lander) are read again, and the header redrawn when they changed."""
        self.table.refresh()
        activities = read_activities()
        if activities != self.model.activities:
            self.model.set_activities(activities)
            self._update_header()
        if self._status_due and time.monotonic() >= self._status_due:
            self.refresh_status()

    def _update_header(self) -> None:
        self.header.show(self.header_text())

    def refresh_view(self) -> None:
        if not self.is_running:
            return
        t0 = time.perf_counter()
        self._update_header()
        self._render_table(time.time())
        if self._status_due and time.monotonic() >= self._status_due:
            self.refresh_status()
        self.renders += 1
        self.last_render_ms = (time.perf_counter() - t0) * 1000

    def _render_table(self, now: float) -> None:
        self.table.set_groups(self.model.groups(self.flt, self.sort))

    def selected_key(self) -> str | None:
        return self.table.selected_key()

    def selected_row(self) -> Row | None:
        key = self.selected_key()
        return self.model.rows.get(key) if key else None

    def select(self, path: str) -> bool:
        """Move the cursor to an agent (or ``group/``) by path; for tests and scripts."""
        for i, key in enumerate(self.table.keys):
            row = self.model.rows.get(key)
            if (row is not None and row.path == path) or key == f"g:{path.rstrip('/')}":
                self.table.move_to(i)
                return True
        return False

    # -- the server's status, answers, final rows -----------------------------

    @work(thread=True, exclusive=True, group="status")
    def refresh_status(self) -> None:
        self._status_due = 0.0
        if not self.connected:
            return
        try:
            status = self.requests.call("server.status")
        except (ServerError, OSError):
            return
        self.call_from_thread(self._set_status, status)

    def _set_status(self, status: dict) -> None:
        self.model.set_status(status)
        self._update_header()

    @work(thread=True, group="loops")
    def refresh_loops(self) -> None:
        """Loops from loop.list: at each snapshot and after loop/run events."""
        self._loops_scheduled = False
        try:
            loops = self.requests.call("loop.list")["loops"]
        except (ServerError, OSError):
            return
        self.call_from_thread(self._set_loops, loops)

    def _set_loops(self, loops: list[dict]) -> None:
        self.model.set_loops(loops)
        self.refresh_view()

    def _ask_answers(self) -> None:
        for uuid in self.model.stale_answers():
            if uuid not in self._asked:
                self._asked.add(uuid)
                self._answer_queue.put(uuid)

    def _answer_worker(self) -> None:
        while (uuid := self._answer_queue.get()) is not None:
            text = self._answers.answer(uuid)
            try:
                self.call_from_thread(self._set_answer, uuid, text)
            except RuntimeError:  # the app has stopped
                return

    def _set_answer(self, uuid: str, text: str | None) -> None:
        self._asked.discard(uuid)
        self.model.set_answer(uuid, text)
        self.refresh_view()

    @work(thread=True)
    def fetch_final(self, uuids: list[str]) -> None:
        for uuid in uuids:
            try:
                agent = self.requests.call("agent.get", target=uuid)["agent"]
            except (ServerError, OSError):
                continue
            self.call_from_thread(self._set_final, agent)

    def _set_final(self, agent: dict) -> None:
        self.model.set_final(agent)
        self._ask_answers()
        self.refresh_view()
