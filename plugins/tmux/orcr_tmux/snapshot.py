"""What panes orcr's tmux server holds: one ``list-panes`` parsed into pane infos."""

from __future__ import annotations

from orcr_core.contracts import PaneInfo, PaneRef
from orcr_tmux.layout import INSTANCE_OPTION, LABEL_OPTION, ROLE_OPTION, TOKEN_OPTION
from orcr_tmux.server import TmuxServer
from orcr_tmux.tmuxcli import TmuxError

_FIELDS = (
    "#{pid}",  # the tmux server's
    "#{pane_id}",
    "#{window_id}",
    "#{session_name}",
    "#{pane_dead}",
    f"#{{{ROLE_OPTION}}}",
    f"#{{{INSTANCE_OPTION}}}",
    f"#{{{TOKEN_OPTION}}}",
    "#{pane_pid}",
    f"#{{{LABEL_OPTION}}}",
)


class Panes:
    """The driver's pane listing, a part of :class:`orcr_tmux.driver.TmuxDriver`: it
    reads through the :class:`~orcr_tmux.server.TmuxServer` part, tells it which
    server answered, and asks it whether a refused listing is an outage."""

    def __init__(self, server: TmuxServer, query=None):
        self.server = server
        self.tmux = server.tmux
        #: read-only queries: over the driver's control-mode channel when it has one
        self.query = query or self.tmux.run

    def snapshot(self, parking: str) -> list[PaneInfo]:
        """Every live pane on orcr's tmux server but the workspace placeholders.

        No server means no panes (tmux's panes die with their server): an empty
        list. But a server that still runs while its socket file is gone (a /tmp
        cleaner deleted it) is an outage, not "no panes": the driver remembers the
        server's pid, asks it to recreate its socket (``SIGUSR1``) and raises a
        retryable error, so no agent is taken for lost. A dead pane (its
        program exited; agent windows keep ``remain-on-exit on``) is reported
        with ``dead=True`` so orcr ends its agent ``exited`` and closes it; a
        pane in the session ``parking`` is reported ``parked``.
        """
        try:
            out = self.tmux.run(["list-panes", "-a", "-F", "\t".join(_FIELDS)])
        except TmuxError as exc:
            if exc.code == "server_not_running":
                self.server.socket_gone_or_none(exc)
                return []
            raise
        panes = []
        for line in out.splitlines():
            parts = line.split("\t", len(_FIELDS) - 1)
            if len(parts) != len(_FIELDS):
                continue
            server_pid, pane_id, window_id, session, dead, role, instance, token, pid, label = parts
            if server_pid.isdigit():
                self.server.seen(int(server_pid))
            if role == "placeholder":
                continue
            panes.append(
                PaneInfo(
                    pane_id=pane_id,
                    workspace_id=session,
                    tab_id=window_id,
                    label=label or None,
                    session=self.tmux.socket,
                    dead=dead == "1",
                    instance=instance or None,
                    launch_token=token or None,
                    pid=int(pid) if pid.isdigit() else None,
                    parked=session == parking,
                )
            )
        return panes

    def pane_pid(self, pane: PaneRef) -> int | None:
        """The pid of the pane's process (``#{pane_pid}``); None when the pane is gone."""
        try:
            out = self.query(["display-message", "-p", "-t", pane.pane_id, "#{pane_pid}"])
        except TmuxError as exc:
            if exc.code in ("not_found", "server_not_running"):
                return None
            raise
        out = out.strip()
        return int(out) if out.isdigit() else None
