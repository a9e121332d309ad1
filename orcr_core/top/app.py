"""The ``orcr top`` screen (Textual). Only ``orcr top`` imports this module.

The app owns a :class:`~orcr_core.top.model.FleetModel`; the stream thread
posts messages (snapshot, event batches, connection lost) and the app applies
them in order on its own loop, then redraws. Requests (kill, send, read,
attach, status) run in worker threads on a connection of their own.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Footer, Input, Label, Static

from orcr_core.client import ServerError
from orcr_core.top.ended import EndedToggle
from orcr_core.top.model import SORTS, Filter, FleetModel, Gap, Row
from orcr_core.top.source import Requests, WatchSource
from orcr_core.top.table import FleetTable
from orcr_core.top.text import drift_line, header_line, held_line

#: seconds between server.status refreshes (caps, drift, the multiplexer's health)
STATUS_EVERY = 2.0

HELP = """\
orcr top: the fleet live, over one watch.open stream

  /        filter: statuses (idle working), stalled, parked, path globs (review/*,
           nightly/**) or substrings; several terms narrow or widen; empty clears
  s        sort: path, status, age (within each level-1 group)
  enter    the selected agent's last answer (scrollable; escape closes)
  p        send a prompt to the selected agent (it must be idle)
  k        kill the selected agent, or on a group row every active agent under
           it (GROUP/**); a confirmation names what is killed
  K        kill every active agent matching the filter's path glob
  a        attach to the agent's pane (top suspends until you detach), or show
           the attach command when top cannot hand over the terminal
  r        resume the selected agent when it is lost (or ended lost or exited):
           a confirmation first; it is queued again in its own session (same
           path, uuid and transcript); any other row says why it cannot be
  e        show (or hide again) the 50 most recently ended agents, also those
           that ended before top started, so r can resume a lost one
  space    pause or resume the loop of the selected group (its runs' agents sit
           under it)
  f        fire a run of that loop now (pending when the loop is at its cap)
  ?        this help
  q        quit

The header counts the rows (queue depth, live against the caps) and shows what
server.status reports: caps, held-back reasons, drift, the multiplexer's health.
After a server restart top reconnects and takes a new snapshot by itself.
"""


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


class AnswerScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, row: Row):
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"{self.row.path} · {self.row.status} · turn {self.row.turn}", id="title")
            with VerticalScroll(id="answer-scroll"):
                yield Static("reading…", id="answer", markup=False)
            yield Label("escape closes · arrows / page keys scroll", classes="hint")


class PromptScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, row: Row):
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Prompt for {self.row.path} (idle, turn {self.row.turn + 1} next)")
            yield Input(placeholder="the next prompt; enter sends, escape cancels", id="prompt")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value if event.value.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(
        self, question: str, detail: str = "", hint: str = "y kills · n or escape keeps them"
    ):
        super().__init__()
        self.question = question
        self.detail = detail
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.detail:
                yield Static(self.detail, id="detail", markup=False)
            yield Label(self.hint, classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(HELP, markup=False)


class TopApp(EndedToggle, App[None]):
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
        extra = f"sort {self.sort}"
        if self.flt:
            extra += f"  filter: {self.flt.text}"
        lines.append(extra + f"  · seq {self.model.seq if self.model.seq is not None else '-'}")
        return "\n".join(lines)

    def _tick(self) -> None:
        """The TIME column ages: redraw the lines in view (no rebuild)."""
        self.table.refresh()
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

    # -- keys -----------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.filter_box
        box.value = self.flt.text
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "filter":
            return
        self.flt = Filter.parse(event.value)
        event.input.remove_class("shown")
        self.table.focus()
        self.refresh_view()

    def key_escape(self) -> None:
        box = self.filter_box
        if box.has_class("shown"):
            box.remove_class("shown")
            self.table.focus()

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_view()
        self.notify(f"sorted by {self.sort}", timeout=1.5)

    def action_answer(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        screen = AnswerScreen(row)
        self.push_screen(screen)
        self._load_answer(screen, row.uuid)

    @work(thread=True)
    def _load_answer(self, screen: AnswerScreen, uuid: str) -> None:
        try:
            res = self.requests.call("agent.read", target=uuid)
            text = res.get("text")
            if text is None:
                text = res.get("screen") or "(no answer yet)"
        except (ServerError, OSError) as exc:
            text = f"cannot read it: {getattr(exc, 'message', exc)}"
        self.call_from_thread(lambda: screen.query_one("#answer", Static).update(text))

    def action_prompt(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        if row.status != "idle":
            self.notify(f"{row.path} is {row.status}; p needs an idle agent", severity="warning")
            return

        def sent(text: str | None) -> None:
            if text:
                self._send(row.uuid, row.path, text)

        self.push_screen(PromptScreen(row), sent)

    @work(thread=True)
    def _send(self, uuid: str, path: str, text: str) -> None:
        try:
            self.requests.call("agent.send", target=uuid, prompt=text)
            self.call_from_thread(self.notify, f"sent to {path}", timeout=2)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{path}: {getattr(exc, 'message', exc)}", severity="error"
            )

    def action_kill(self) -> None:
        key = self.selected_key()
        if key is None:
            return
        if key.startswith("g:"):
            self._confirm_glob(f"{key[2:]}/**")
            return
        row = self.model.rows[key]
        if row.status == "ended":
            self.notify(f"{row.path} has already ended ({row.exit_reason})", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._kill(row.uuid, row.path)

        self.push_screen(
            ConfirmScreen(f"Kill {row.path} ({row.status}, {row.provider})?"), confirmed
        )

    def action_kill_filtered(self) -> None:
        glob = self.flt.glob
        if glob is None:
            self.notify("K kills the filter's path glob; set one with / (e.g. review/*)")
            return
        self._confirm_glob(glob)

    def _confirm_glob(self, glob: str) -> None:
        rows = self.model.matching(glob)
        if not rows:
            self.notify(f"no active agent matches {glob}", severity="warning")
            return
        shown = "\n".join(f"{r.path} ({r.status})" for r in rows[:12])
        if len(rows) > 12:
            shown += f"\n… and {len(rows) - 12} more"
        n = len(rows)

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._kill(glob, glob)

        self.push_screen(
            ConfirmScreen(f"Kill {n} agent{'s' if n != 1 else ''} matching {glob}?", shown),
            confirmed,
        )

    @work(thread=True)
    def _kill(self, target: str, what: str) -> None:
        try:
            killed = self.requests.call("agent.kill", target=target)["killed"]
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"kill {what}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        summary = ", ".join(f"{k['path']} {k['result']}" for k in killed[:5])
        if len(killed) > 5:
            summary += f", … ({len(killed)} in all)"
        self.call_from_thread(self.notify, summary or f"nothing to kill for {what}", timeout=3)

    def action_attach(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        self._attach(row.uuid, row.path)

    @work(thread=True)
    def _attach(self, uuid: str, path: str) -> None:
        try:
            res = self.requests.call("agent.attach", target=uuid)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{path}: {getattr(exc, 'message', exc)}", severity="warning"
            )
            return
        self.call_from_thread(self._run_attach, res)

    def _run_attach(self, res: dict) -> None:
        command = res.get("command")
        self.last_attach_hint = res.get("hint") or ""
        if command:
            try:
                with self.suspend():
                    rc = subprocess.run(command).returncode  # argv, no shell; until detached
                if rc == 0:
                    return
                self.last_attach_hint = f"the attach command exited {rc}; {self.last_attach_hint}"
            except (SuspendNotSupported, OSError):
                pass
        self.notify(self.last_attach_hint, title="attach", timeout=15)

    def action_resume(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("r resumes a lost agent: select its row", severity="warning")
            return
        why = row.not_resumable()
        if why is not None:
            self.notify(why, severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._resume(row.uuid, row.path)

        now = row.status + (f" ({row.exit_reason})" if row.exit_reason else "")
        self.push_screen(
            ConfirmScreen(
                f"Resume {row.path} ({now}, {row.provider})?",
                "It is queued again and started in a new pane in its own session: "
                "same path, uuid and transcript; no prompt is typed.",
                hint="y resumes · n or escape leaves it",
            ),
            confirmed,
        )

    @work(thread=True)
    def _resume(self, uuid: str, path: str) -> None:
        try:
            agent = self.requests.call("agent.resume", target=uuid)["agent"]
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"resume {path}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        self.call_from_thread(self.notify, f"{path} {agent['status']} (resumed)", timeout=3)

    def selected_loop(self) -> dict | None:
        key = self.selected_key()
        if key is None:
            return None
        name = key[2:] if key.startswith("g:") else self.model.rows[key].group
        return self.model.loops.get(name)

    def action_loop_toggle(self) -> None:
        loop = self.selected_loop()
        if loop is None:
            self.notify("space pauses or resumes a loop: select a loop's group", severity="warning")
            return
        method = "loop.resume" if loop["status"] == "paused" else "loop.pause"
        self._loop_call(method, loop["name"], f"{loop['name']}: {method.split('.')[1]}d")

    def action_fire(self) -> None:
        loop = self.selected_loop()
        if loop is None:
            self.notify("f fires a loop now: select a loop's group", severity="warning")
            return
        self._loop_call("loop.run.start", loop["name"], None)

    @work(thread=True)
    def _loop_call(self, method: str, name: str, done: str | None) -> None:
        try:
            res = self.requests.call(method, target=name)
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"{name}: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        if done is None:  # a run: say which
            run = res["run"]
            done = f"{run['path']} {run['status']}"
        self.call_from_thread(self.notify, done, timeout=3)  # its events refresh the loop line

    def action_help(self) -> None:
        self.push_screen(HelpScreen())
