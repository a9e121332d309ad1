"""herdr 0.9.2's drop rule for self-reported agents (HERDR-0.9.md §7.2, §11 item 6).

herdr 0.9.2 "clears a self-reported agent — hook authority whose ``--agent`` label
herdr does not recognise — whenever the pane's own shell is the sole foreground job
again. The check runs about once a second and is not gated on a transition"; a
registration made while the shell is still idle is dropped within about 0.3 s and
stays dropped once a command starts. The emulator models it on protocol 22 only
(``Dialect.drop_self_reported``; ``Emulator.drop_self_reported`` turns it on or off):

- **Self-reported**: the pane's authority is a custom ``source`` from
  ``pane.report_agent`` (not herdr's detection, not an official ``herdr:<agent>``
  pair, not the test hooks' ``"hook"``) and its agent label is none herdr
  recognises (:data:`RECOGNISED`).
- **The pane's own shell** is the pane's root process when herdr started it as the
  pane's default shell: a pane made without a ``command`` (``workspace.create``,
  ``tab.create``, ``pane.split``, a ``layout.apply`` node without one) and every
  pane a cold restart brings back (a plain shell, or the shell a native restore
  types its command into). ``Pane.own_shell`` records it when the process starts.
  A pane whose root process is a ``layout.apply`` ``command`` has no shell of its
  own, even when that command is a shell or a ``#!/bin/sh`` script: herdr execs the
  argv directly and closes the pane when it exits, never returning to a prompt.
  The decision is by how herdr started the root process, not by the foreground
  process's name (herdr's docs speak of "the pane's interactive shell",
  cli-reference ``agent start``; a name test would drop every agent written as a
  shell script).
- **The sole foreground job**: the PTY's foreground process group is the shell's
  own (``tcgetpgrp`` = the shell's pid). An interactive shell with job control
  (``/bin/sh`` here) puts each command it runs in a group of its own, so the shell
  is the foreground job exactly while it waits at its prompt, or reads its rc
  files before the first prompt.

A drop is checked :data:`FIRST_CHECK` seconds after a registration, then every
:data:`PERIOD` seconds. It clears the label (``agent`` gone, ``agent_status``
``unknown``) and the reporter's ``resume_argv`` with it (held only while the
reporter holds the pane), and emits what HERDR-0.9.md §7.2 infers herdr emits for a
label disappearing (which event herdr sends is not documented, §12):
``pane_agent_detected`` without ``agent`` (no ``released``: nobody released it)
and a status change to ``unknown`` on the pane's ``pane.agent_status_changed``
streams. Every drop is recorded in ``Emulator.self_report_drops``; each check
counts in ``Emulator.drop_checks``.
"""

from __future__ import annotations

import time
from typing import Any

from orcr_testing.herdr.model import DETECTED, OFFICIAL_SOURCES, Pane

#: seconds from a registration to its first check ("dropped within 0.3 s")
FIRST_CHECK = 0.3
#: seconds between checks ("the check runs about once a second")
PERIOD = 1.0
#: agent labels herdr recognises: its official integrations and its detection
RECOGNISED = frozenset(OFFICIAL_SOURCES.values()) | frozenset(DETECTED.values())
#: authorities that are not a self-report (detection, the test hooks' official hooks)
NOT_SELF = (None, "detect", "hook")


def self_reported(pane: Pane) -> bool:
    return (
        pane.agent is not None
        and pane.agent_authority not in NOT_SELF
        and OFFICIAL_SOURCES.get(pane.agent_authority or "") != pane.agent
        and pane.agent not in RECOGNISED
    )


def shell_in_foreground(pane: Pane) -> bool:
    """The pane's own shell (herdr started it, see the module doc) owns the PTY's
    foreground: no command, editor or agent runs in front of it."""
    proc = pane.proc
    if proc is None or not pane.own_shell or proc.poll() is not None:
        return False
    return proc.foreground_pgid() == proc.pid


def registered(emu: Any, pane: Pane) -> None:
    """A custom report made ``pane``'s agent a self-report: check it shortly."""
    if emu.drop_self_reported and self_reported(pane):
        pane.drop_check_at = time.monotonic() + FIRST_CHECK


def check(emu: Any, pane: Pane, now: float) -> None:
    """One tick for ``pane`` (under the emulator's lock): drop its self-reported agent
    when its check is due and its own shell is the foreground job."""
    if not emu.drop_self_reported or not self_reported(pane):
        pane.drop_check_at = None
        return
    if pane.drop_check_at is None:
        pane.drop_check_at = now + PERIOD
        return
    if now < pane.drop_check_at:
        return
    pane.drop_check_at = now + PERIOD
    emu.drop_checks += 1
    if shell_in_foreground(pane):
        drop(emu, pane)


def drop(emu: Any, pane: Pane) -> None:
    agent, previous = pane.agent, pane.agent_status
    pane.agent, pane.agent_authority, pane.agent_status = None, None, "unknown"
    pane.completion_seq, pane.drop_check_at = None, None
    pane.state_change_seq += 1
    emu.self_report_drops.append(
        {"pane_id": pane.pane_id, "agent": agent, "status": previous, "at": time.monotonic()}
    )
    data = {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id}
    emu.state.emit("pane_agent_detected", data)
    emu.state.hub.push_status(pane.pane_id, "unknown", {**data, "agent_status": "unknown"})
    emu.state.mark_dirty()
