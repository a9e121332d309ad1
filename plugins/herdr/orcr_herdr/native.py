"""herdr 0.9.2's ``resume_argv``: orcr tells herdr how to resume an agent, and asks
what runs in a pane herdr restored (HERDR-0.9.md §8.2, §9).

On socket protocol 22 orcr reports, once an agent's program runs, the command that
resumes it in its own session: ``pane.report_agent`` with ``source`` ``custom:orcr``,
the provider's name as ``agent``, and ``resume_argv``. herdr keeps that command while
``custom:orcr`` holds the pane and, after a cold restart with native resume on, types
it into a fresh shell in the pane's saved directory. herdr 0.8 has no such field: the
driver reports nothing there (:meth:`ResumeReports.reports_resume`).

The command starts with ``env`` (herdr wants a plain command name first, orcr's
argvs start with a path) and carries the agent's orcr variables (``ORCR_ID``,
``ORCR_LAUNCH_TOKEN``, ...): the process herdr's restore starts can then be told
apart from anything else by its environment (:meth:`ResumeReports.foreground_pids`
gives the core its pids).
"""

from __future__ import annotations

from collections.abc import Callable

from orcr_core.contracts import DriverError, PaneRef
from orcr_herdr.client import HerdrClient
from orcr_herdr.versions import HERDR_09

#: the reporter orcr reports as (a custom source: herdr keeps its resume command
#: only while this source and the reported agent hold the pane)
SOURCE = "custom:orcr"
#: herdr's codes for a report it refused (the report is not applied)
REFUSED = ("invalid_resume_argv", "resume_not_accepted")
#: herdr's official integrations: agent -> the source its own hooks report as
#: (``src/agent_resume.rs``' pairs, as the emulator models them). While herdr detects
#: one of them in a pane, orcr attaches its command under that pair: herdr's own
#: detection keeps the pane's status (and ``completion_seq``), and the command takes
#: precedence over herdr's built-in resume of that agent.
OFFICIAL = {
    **{a: f"herdr:{a}" for a in ("claude", "codex", "pi", "omp", "copilot", "devin")},
    **{a: f"herdr:{a}" for a in ("droid", "qodercli", "cursor", "grok", "opencode", "kimi")},
    **{a: f"herdr:{a}" for a in ("kilo", "hermes", "mastracode")},
    "agy": "herdr:antigravity_cli",
}


def herdr_argv(argv: list[str], env: dict[str, str]) -> list[str]:
    """``argv`` with ``env`` in front: herdr needs a plain command name first and
    types the command into a shell that has none of the pane's variables."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


class ResumeReports:
    """herdr 0.9's ``resume_argv`` and what runs in a pane, a part of
    :class:`orcr_herdr.driver.HerdrDriver` (which gives the core
    :class:`orcr_core.contracts.NativeResume` through it). It sees only the driver's
    :class:`~orcr_herdr.client.HerdrClient` and the socket protocol the driver's last
    handshake saw (``protocol``, asked at each call: it changes with a herdr restart)."""

    def __init__(self, client: HerdrClient, protocol: Callable[[], int | None]):
        self.client = client
        self.protocol = protocol

    def reports_resume(self) -> bool:
        """Whether herdr takes a ``resume_argv`` (0.9, socket protocol 22)."""
        protocol = self.protocol()
        return protocol is not None and protocol >= HERDR_09

    def report_resume(
        self,
        pane: PaneRef,
        agent: str,
        state: str,
        argv: list[str],
        env: dict[str, str],
        detected: str | None = None,
    ) -> bool:
        """``pane.report_agent`` with ``resume_argv`` (:func:`herdr_argv` of ``argv``
        and ``env``): under herdr's own pair when it detects an official agent in the
        pane (``detected``, the snapshot's ``agent``), else as ``custom:orcr`` with
        ``agent``, which makes orcr's report the pane's status in herdr. True when it
        does. An official ``agent`` herdr has not detected yet is not reported (a
        retryable ``agent_not_detected``: asked again at the next snapshot). herdr's refusal raises :class:`DriverError` with its code (:data:`REFUSED`);
        on 0.8 nothing is sent (False)."""
        if not self.reports_resume():
            return False
        if agent in OFFICIAL and detected != agent:
            # reported as orcr's own, it would shut herdr's detection of it out for good
            raise DriverError(
                f"herdr has not detected {agent} in pane {pane.pane_id} yet",
                code="agent_not_detected",
                retryable=True,
            )
        source = OFFICIAL.get(detected or "")
        params = {
            "pane_id": pane.pane_id,
            "source": source or SOURCE,
            "agent": detected if source else agent,
            "state": state,
            "resume_argv": herdr_argv(argv, env),
        }
        self.client.request("pane.report_agent", params)
        return source is None

    def process_info(self, pane: PaneRef) -> dict | None:
        """herdr's ``pane.process_info`` for the pane, None when the pane is not found."""
        try:
            info = self.client.request("pane.process_info", {"pane_id": pane.pane_id})
        except DriverError as exc:
            if exc.code == "pane_not_found":
                return None
            raise
        return info.get("process_info", {})

    def foreground_pids(self, pane: PaneRef) -> list[int] | None:
        """The pids of the pane's foreground job other than its shell (what a native
        restore typed and started), [] when only the shell runs, None when herdr
        cannot say yet (a pane whose restore is still pending is not found)."""
        info = self.process_info(pane)
        if info is None:
            return None
        shell = info.get("shell_pid")
        pids = [p.get("pid") for p in info.get("foreground_processes", [])]
        return [p for p in pids if isinstance(p, int) and p > 0 and p != shell]
