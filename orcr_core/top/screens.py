"""``orcr top``'s dialogs: a row's last answer, the next prompt, a yes/no question, help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from orcr_core.top.rows import Row

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
