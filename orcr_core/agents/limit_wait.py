"""A turn that ended on a usage limit while its CLI waits to go on by itself.

Claude Code 2.1.332 logged in to a claude.ai plan ends the turn in its transcript on
the plan's limit ("You've hit your 5-hour limit · resets 12:24am (UTC)", an API error
line) and then waits at its composer, "Continuing automatically at 12:24am · Esc to
cancel" (plugins/claude/tests/fixtures/screens/2.1.332-usage-limit-plan.txt), going on
by itself at the reset. Taken as the turn's end, the agent would go ``idle`` and an
``--rm`` agent would end there. So before the monitor takes the end of a turn whose
error the provider's ``usage_limit`` hook reads as a usage limit, it reads the pane
(:func:`waits`): while the provider's ``screen_state`` shows the wait (``waiting``,
kind ``usage_limit``) the agent stays ``working (waiting: usage limit until …)``, held
like any agent waiting out a limit (orcr_core/usage_limits). When the CLI goes on, its
transcript grows (the turn reopens or a new one starts) and that turn ends as usual;
when the line leaves the screen (a person pressed Esc) the errored turn's end is taken:
``idle`` with the error, the provider held until the reset it named. The line also
leaves when the CLI goes on, before its answer reaches the transcript: a screen that
shows a turn running (the provider's ``input_state``, "esc to interrupt") is no Esc.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from orcr_core.agents import stall
from orcr_core.agents.asking import RECHECK
from orcr_core.agents.launch import launch_spec, pane_of
from orcr_core.contracts import DriverError
from orcr_core.store.models import Agent

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: seconds after the transcript's error line during which a screen without the wait is
#: not yet believed: the CLI may draw its line a moment after it writes the error (an
#: API key's 429, which never waits, goes idle this much later)
GRACE = 2.0


def waits(server: ServerContext, agent: Agent, provider, error: str, now: float) -> bool:
    """Whether working ``agent``, whose turn ended on ``error``, waits for its CLI to go
    on by itself past a usage limit: then its turn's end is not taken yet."""
    hook = getattr(provider, "screen_state", None)
    limit = getattr(provider, "usage_limit", None)
    if hook is None or limit is None or limit(error) is None:
        return False
    noticed = server.usage_limits.noticed(agent.uuid)
    if time.monotonic() - server.dialog_checked.get(agent.uuid, 0.0) < RECHECK:
        return noticed is not None or _fresh(server, agent, now)  # as last seen
    server.dialog_checked[agent.uuid] = time.monotonic()
    pane = pane_of(agent)
    if pane is None or server.driver is None:
        return False
    try:
        screen = server.driver.read(pane)
    except DriverError:
        return noticed is not None  # a pane gone is the monitor's business
    shown = hook(screen, launch_spec(server, agent))
    if shown.state == "waiting" and shown.kind == "usage_limit":
        server.usage_limits.seen(server, agent, shown.reason or "usage limit", shown.until)
        if agent.stalled_at is not None:  # quiet because it waits the limit out: no stall
            stall._flag(server, agent, None, waiting="usage_limit")
        return True
    running = getattr(provider, "input_state", None)
    if noticed is not None and running is not None and running(screen).running:
        return True  # the CLI went on: its request runs, the transcript grows with its answer
    if noticed is not None:  # Esc pressed: the wait was cancelled, the turn is over
        server.usage_limits.over(server, agent, "the limit left the screen")
        return False
    return _fresh(server, agent, now)


def _fresh(server: ServerContext, agent: Agent, now: float) -> bool:
    grew = stall.grew_at(server, agent)
    return grew is not None and now - grew < GRACE
