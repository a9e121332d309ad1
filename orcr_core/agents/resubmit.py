"""Pressing a prompt's Enter again: only on evidence that the first one did not land.

After a prompt's Enter, :func:`confirm` waits for the turn to show in the
transcript. A TUI can swallow an Enter (one that arrives with its paste, or
before it takes input), and then the prompt sits in its composer for good; but
under load a TUI also writes its transcript late (Claude Code: 8.7 s after the
Enter on a busy 2-core machine, the model's tool call already running). An
Enter pressed then lands in the running turn, or on a permission or trust
dialog, where it chooses the highlighted option: an action nobody chose.

So elapsed time alone never presses Enter. The screen is read with the
provider's ``input_state`` hook (what the composer holds, what shows a turn
running) and its ``screen_state`` hook (a dialog), and Enter is pressed again
only when, for ``settle`` seconds with the screen unchanged, and never once the
composer has shown without the prompt after it had shown it (the Enter landed,
whatever is drawn later; :func:`wait_drawn` looks for it before the Enter):

- the composer still holds the prompt (its first non-blank characters, or a
  TUI's placeholder for a pasted text), and
- nothing shows a running turn (a spinner, "esc to interrupt"), and
- no dialog shows.

``settle`` is ``timings.prompt_confirm`` times the machine's load (the 1-minute
load average per CPU, between 1 and :data:`MAX_LOAD_FACTOR`), and any change
of the screen starts it again: a TUI still drawing is still working on
something. Once a running turn or a dialog has shown, no Enter is pressed
again for this prompt. A provider without ``input_state`` cannot tell: nothing
is pressed again. Every decision is an event: ``prompt.resubmit`` (pressed,
with why) then ``prompt.resubmit_applied``, or ``prompt.resubmit_withheld``
(not pressed, with why), once per reason. The look is bounded by
:data:`ATTEMPTS` times ``settle``, twice that while the composer has not shown
the paste after an Enter pressed before it did (the budget only bounds how long
orcr looks, it never presses anything).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orcr_core.agents.launch import launch_spec, pane_of
from orcr_core.contracts import DriverError, LaunchSpec, ProviderError, ProviderFault
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.delivery")

#: at most ATTEMPTS - 1 more Enters; the look lasts ATTEMPTS settles
ATTEMPTS = 3
#: seconds between two looks at the transcript
POLL = 0.1
#: seconds between two reads of the screen (a multiplexer call per delivering agent)
SCREEN_EVERY = 0.3
#: the most the load stretches ``settle`` (reached at a load average of 8 on 2 CPUs)
MAX_LOAD_FACTOR = 4.0
#: how much of the prompt (its first non-blank characters, whitespace ignored) is
#: looked for to tell a composer (or a screen) that holds it
SCREEN_MATCH = 40
#: what a TUI shows in place of a long pasted text (Claude Code: "[Pasted text #1 +12 lines]")
PASTE_PLACEHOLDERS = ("[Pasted text",)

RESUBMIT = "prompt.resubmit"
RESUBMIT_APPLIED = "prompt.resubmit_applied"
WITHHELD = "prompt.resubmit_withheld"

#: why a resubmit was withheld, for the events (``why``) and docs/concepts.md
REASONS = {
    "running": "the pane shows a running turn",
    "dialog": "the pane shows a dialog",
    "left": "the prompt is no longer in the composer",
    "no_input": "the provider sees no composer on the screen",
    "cannot_tell": "the provider cannot read its composer (no input_state hook)",
    "unreadable": "the pane cannot be read",
}


def holds(text: str, prompt: str, tail: bool = False) -> bool:
    """Whether ``text`` holds the prompt (whitespace ignored: a composer wraps it) or
    a TUI's placeholder for a pasted text. With ``tail``, the prompt's end will do too
    (a composer narrower than the prompt scrolls its head off): only for a look at the
    whole screen when the provider reads no composer, never to judge a resubmit."""
    if any(mark in text for mark in PASTE_PLACEHOLDERS):
        return True
    want = "".join(prompt.split())
    flat = "".join(text.split())
    if not want:
        return False
    return want[:SCREEN_MATCH] in flat or (tail and want[-SCREEN_MATCH:] in flat)


def load_factor() -> float:
    """The 1-minute load average per CPU, between 1 and :data:`MAX_LOAD_FACTOR`."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, load / (os.cpu_count() or 1)))


@dataclass(frozen=True)
class Verdict:
    """One look at the pane: ``why`` is ``unsubmitted`` (the prompt sits in an idle
    composer: Enter may be pressed once it holds) or a key of :data:`REASONS`."""

    why: str
    detail: str = ""
    screen: str = ""
    composer: str = ""  # what the composer holds (``unsubmitted``, ``left``)


def judge(server: ServerContext, agent: Agent, prompt: str, cache: dict | None = None) -> Verdict:
    """What the pane shows of the prompt's Enter, read with the provider's hooks
    (``cache`` keeps the agent's launch spec between looks)."""
    provider = server.registry.providers.get(agent.provider)
    read_input = getattr(provider, "input_state", None)
    if read_input is None:
        return Verdict("cannot_tell")
    try:
        screen = server.driver.read(pane_of(agent))
    except DriverError as exc:
        return Verdict("unreadable", str(exc))
    screen_state = getattr(provider, "screen_state", None)
    try:
        shown = screen_state(screen, _spec(server, agent, cache)) if screen_state else None
        if shown is not None and shown.state == "dialog":
            return Verdict("dialog", shown.kind or "question", screen)
        state = read_input(screen)
    except (ProviderError, ProviderFault) as exc:  # a broken hook tells nothing
        return Verdict("cannot_tell", str(exc), screen)
    if state is None:
        return Verdict("cannot_tell", "", screen)
    if state.running:
        return Verdict("running", state.running, screen)
    if state.composer is None:
        return Verdict("no_input", "", screen)
    if holds(state.composer, prompt):
        return Verdict("unsubmitted", "", screen, state.composer)
    return Verdict("left", "", screen, state.composer)


def _spec(server: ServerContext, agent: Agent, cache: dict | None) -> LaunchSpec:
    """The agent's launch spec for ``screen_state`` (what it names in a dialog's reason),
    kept in ``cache``; a bare one when its launch file is gone."""
    cache = {} if cache is None else cache
    if "spec" not in cache:
        try:
            cache["spec"] = launch_spec(server, agent)
        except (OSError, ValueError):
            cache["spec"] = LaunchSpec(agent.uuid, agent.path, agent.cwd, "", {})
    return cache["spec"]


def blind(server: ServerContext, agent: Agent, prompt: str) -> bool:
    """Whether the provider reads no composer on the pane right now: no
    ``input_state`` hook, or none drawn where it looks (a TUI still drawing after a
    restart, text typed before the program read its terminal). The caller then
    goes by whether the prompt's text shows at all; a running turn or a dialog is
    never blind."""
    return judge(server, agent, prompt).why in ("cannot_tell", "no_input")


def settle_time(server: ServerContext) -> float:
    """``timings.prompt_confirm`` stretched by the machine's load."""
    return server.config.duration("timings.prompt_confirm") * load_factor()


def composer(server: ServerContext, agent: Agent, prompt: str) -> str | None:
    """What the composer shows before a paste (None: none read): :func:`wait_drawn`
    tells the paste from it (Codex's empty composer shows "Ask Codex to do anything")."""
    verdict = judge(server, agent, prompt)
    return verdict.composer if verdict.why == "left" else None


def wait_drawn(server: ServerContext, agent: Agent, prompt: str, before: str | None) -> bool:
    """Before a prompt's Enter: wait (up to a settle time) until the composer shows the
    paste; whether it did. The paste shows as the prompt, or (a composer that shows
    only its last line) as any text other than ``before``, what it showed before the
    paste: an empty composer's placeholder is no paste. A TUI that has not read its
    input yet (descheduled on a loaded machine) still shows its empty composer: that
    is not the prompt having left it, and :func:`confirm` must not take it for a
    landed Enter."""
    deadline = time.monotonic() + settle_time(server)
    cache: dict = {}
    while True:
        verdict = judge(server, agent, prompt, cache)
        if verdict.why == "unsubmitted":
            return True
        shown = verdict.composer.strip()
        if verdict.why == "left" and before is not None and shown and shown != before.strip():
            return True
        if verdict.why != "left" or time.monotonic() >= deadline:
            return False  # no composer to read, a turn, a dialog: nothing to wait for
        time.sleep(POLL)


def confirm(
    server: ServerContext, agent: Agent, prompt: str, started, over, drawn: bool = True
) -> bool:
    """Wait for the turn to show (``started()``: True, False, or None when nothing
    can tell); press Enter again only on the evidence described above.

    ``over()`` says the prompt is no longer the agent's current one: then nothing
    more is pressed and this returns False. True when the transcript showed the
    turn, or the pane showed it running; False when the budget ran out first.
    ``drawn``: the composer was seen holding the prompt before the Enter; until it
    has been (then, or by a look here), a composer without the prompt is one the
    TUI has not redrawn yet, not evidence that the Enter landed."""
    settle = settle_time(server)
    deadline = time.monotonic() + ATTEMPTS * settle
    cache: dict = {}
    presses, since, last_screen = 0, None, None
    said: set[str] = set()
    seen: str | None = None  # "running" or "dialog" once shown: no Enter after that
    # once the composer showed without the prompt (after it had shown it), the Enter
    # landed: a TUI that draws it again (real Claude Code under load, a prompt it took
    # but had not yet sent: 0.2-2 s before the turn began, 12 s after the Enter) gets no
    # second one. Never shown: an empty composer may be one not redrawn since the paste
    # (a TUI that then read paste and Enter at once and took the Enter for the paste's)
    landed = False
    looked = 0.0
    # an Enter pressed before the composer showed the paste: the TUI has read neither
    # yet, and the look waits on while its composer stays as it was, up to twice as long
    longest = time.monotonic() + 2 * ATTEMPTS * settle
    while True:
        s = started()
        if s is None or s:
            return True
        now = time.monotonic()
        if now >= deadline:
            return seen == "running"
        if now - looked >= SCREEN_EVERY:
            looked = now
            if over():
                return False  # lost, restored, set back, sent again: nothing more to do
        if seen is None and looked == now:
            verdict = judge(server, agent, prompt, cache)
            if verdict.why in ("running", "dialog"):
                seen = verdict.why
            if verdict.why == "unsubmitted":
                if verdict.screen != last_screen:  # the TUI still draws: wait on
                    if since is None and (presses or not drawn):  # the first look
                        # since a press, or the paste first drawn after the Enter:
                        # a settle to see it hold, whenever it came, and one of slack
                        deadline = max(deadline, now + 2 * settle)
                    since, last_screen = now, verdict.screen
                elif now - since >= settle and presses < ATTEMPTS - 1 and not landed:
                    presses += 1
                    _press(server, agent, presses, now - since)
                    since, last_screen = None, None
                    deadline = max(deadline, time.monotonic() + settle)
                drawn = True
            else:
                since, last_screen = None, None
                landed = landed or (verdict.why == "left" and drawn)
                if verdict.why == "left" and not drawn:
                    deadline = max(deadline, min(longest, now + settle))
                if verdict.why not in said:
                    said.add(verdict.why)
                    _withheld(agent, verdict, presses)
        time.sleep(POLL)


def _press(server: ServerContext, agent: Agent, attempt: int, held: float) -> None:
    """Enter again, between its intent and applied events."""
    why = "the prompt is still in the composer, no turn runs and no dialog shows"
    log.info("agent %s: Enter pressed again (%s for %.1fs)", agent.path, why, held)
    with db.atomic("IMMEDIATE"):
        events.emit(
            RESUBMIT, agent.uuid, path=agent.path, attempt=attempt, why=why, held=round(held, 1)
        )
    server.driver.send_keys(pane_of(agent), ["enter"])
    with db.atomic("IMMEDIATE"):
        events.emit(RESUBMIT_APPLIED, agent.uuid, path=agent.path, attempt=attempt)


def _withheld(agent: Agent, verdict: Verdict, presses: int) -> None:
    why = REASONS[verdict.why] + (f" ({verdict.detail})" if verdict.detail else "")
    log.info("agent %s: Enter not pressed again: %s", agent.path, why)
    with db.atomic("IMMEDIATE"):
        events.emit(
            WITHHELD, agent.uuid, path=agent.path, reason=verdict.why, why=why, pressed=presses
        )
