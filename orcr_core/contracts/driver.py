"""The multiplexer driver contract: :class:`Driver`, its optional capabilities (each a
``runtime_checkable`` Protocol the core checks with ``isinstance``) and the data that
crosses it (imported from :mod:`orcr_core.contracts`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading


class DriverError(Exception):
    """A multiplexer call failed. ``code`` is a short stable word.

    ``retryable`` says whether the multiplexer may answer later (it is down,
    restarting): a retryable error never frees a name or fails a row on its own.
    """

    def __init__(self, message: str, code: str = "driver_error", retryable: bool = False):
        super().__init__(message)
        self.code = code
        self.retryable = retryable


@dataclass(frozen=True)
class SessionPointer:
    """The provider's native session id, as the multiplexer or orcr knows it.

    ``source`` is who reported it (``herdr:claude``, ``orcr``), ``kind`` is
    ``id`` or ``path``.
    """

    source: str
    kind: str
    value: str


@dataclass(frozen=True)
class PaneRef:
    """Where an agent runs. Ids are the multiplexer's own strings.

    ``instance`` and ``launch_token``, when set, are the marks the pane must
    carry: :meth:`Driver.close` then closes it only if it carries both (a pane
    id can name another instance's pane after a multiplexer restart).
    """

    workspace_id: str
    tab_id: str
    pane_id: str
    instance: str | None = field(default=None, compare=False)
    launch_token: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PaneInfo:
    """One pane as a driver's ``snapshot()`` reports it.

    ``label`` is the agent's full orcr path for panes orcr started (the
    recovery anchor); ``None`` for unlabelled panes. ``agent`` is the
    multiplexer's detected agent kind (``claude``, ``codex``) or ``None`` for a
    plain shell; ``agent_status`` is the multiplexer's own idea of its state
    (``idle|working|blocked|done|unknown``), a hint only.
    """

    pane_id: str
    workspace_id: str
    tab_id: str
    label: str | None = None
    agent: str | None = None
    agent_status: str = "unknown"
    agent_session: SessionPointer | None = None
    session: str | None = None  # the multiplexer session (herdr session / tmux socket)
    terminal_id: str | None = None
    #: the pane's process has exited but the pane is kept (tmux remain-on-exit);
    #: orcr ends the agent with exit_reason ``exited`` and closes the pane
    dead: bool = False
    #: the marks the pane was started with (``StartSpec.instance`` and
    #: ``launch_token``), or None when it carries none (not started by an orcr)
    instance: str | None = None
    launch_token: str | None = None
    #: the pid of the pane's own process (tmux ``#{pane_pid}``), or None when the
    #: snapshot does not carry it (see :meth:`Driver.pane_pid`)
    pid: int | None = None
    #: the multiplexer kept the pane after a restart but could not start it again
    #: (herdr 0.9.2's ``restore_error``: its saved directory is gone, its shell failed);
    #: nothing runs in it, so an agent there is lost, with this as its error
    restore_error: str | None = None
    #: herdr 0.9.2+'s ``completion_seq`` of the agent it tracks in the pane: set when
    #: that agent went working/blocked -> idle, None otherwise (a second witness of a
    #: turn end, never the only one: ``orcr_core/agents/witness.py``)
    completion_seq: int | None = None
    #: the pane is in this instance's parking area (moved there by ``move(pane,
    #: PARKING)``); always False from a driver without parking support
    parked: bool = False


#: The ``dest`` of :meth:`Driver.move` that means "this instance's parking area".
PARKING = "parking"


@dataclass(frozen=True)
class UnmanagedAgent:
    """An agent the multiplexer detected outside orcr's own session (herdr: the
    user's other sessions). orcr only lists it; no verb acts on it.

    Keyed by (``session``, ``terminal_id``): herdr allocates a new terminal id for
    every pane and after every restart, and never reuses one.
    """

    session: str
    terminal_id: str
    agent: str  # the detected kind: claude, codex, ...
    agent_status: str = "unknown"  # idle|working|blocked|done|unknown, as herdr says
    pane_id: str | None = None
    workspace_id: str | None = None
    tab_id: str | None = None
    cwd: str | None = None
    label: str | None = None  # the pane's manual label
    name: str | None = None  # the herdr agent name (agent.start / agent.rename)
    agent_session: SessionPointer | None = None


@dataclass(frozen=True)
class StartSpec:
    """Everything a driver needs to start one agent in a new tab.

    ``argv`` is executed directly, never through a shell. ``env`` holds
    ``ORCR_ID``, ``ORCR_PATH`` and ``ORCR_LAUNCH_TOKEN`` at least.
    ``instance`` (the orcr instance's id) and ``launch_token`` (unique per
    start attempt) are marks the driver records on the pane atomically with
    its creation and reports back in :meth:`Driver.snapshot`: orcr only ever
    closes a pane that carries both.
    """

    workspace_id: str
    label: str  # the agent's full path
    cwd: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    instance: str = ""
    launch_token: str = ""


@runtime_checkable
class Driver(Protocol):
    """A terminal multiplexer orcr can start agents in.

    Every method may raise :class:`DriverError`. Methods are called from
    worker threads; a driver must be safe to call from several at once.
    """

    name: str

    def handshake(self) -> dict[str, Any]:
        """Check the multiplexer answers and speaks a supported protocol.

        Returns facts for ``orcr server status`` (``version``, ``protocol``).
        An unsupported protocol raises ``DriverError`` naming the version needed.
        """

    def ensure_session(self) -> None:
        """Make sure orcr's own multiplexer session/server runs (start it if not)."""

    def ensure_workspace(self, level1: str) -> str:
        """Return the id of the workspace for a level-1 path segment.

        Found again by its label after any restart, never by a remembered id;
        created when missing.
        """

    def start(self, spec: StartSpec) -> PaneRef:
        """Start ``spec.argv`` in a new tab whose single pane is labelled ``spec.label``."""

    def session_pointer(self, pane: PaneRef) -> SessionPointer | None:
        """The provider's native session as the multiplexer reports it, or None yet."""

    def send_prompt(self, pane: PaneRef, text: str) -> None:
        """Deliver a prompt by the two-call rule: the text, >= 300 ms, then Enter."""

    def send_keys(self, pane: PaneRef, keys: list[str]) -> None:
        """Send logical key names (``enter``, ``escape``, ``ctrl+c``)."""

    def read(self, pane: PaneRef) -> str:
        """The pane's visible screen as text (a passive read)."""

    def close(self, pane: PaneRef) -> None:
        """Close the pane. Closing a pane that is already gone is not an error.

        When ``pane.instance``/``pane.launch_token`` are set, a pane that does
        not carry those marks is left alone (as if it were gone).
        """

    def snapshot(self) -> list[PaneInfo]:
        """Every pane in orcr's own session, with the marks it carries. The
        truth for reconciliation. A multiplexer that does not answer raises
        (retryable): a failed snapshot is never "no panes"."""

    def agent_status(self, pane: PaneRef) -> str | None:
        """The multiplexer's agent state for a pane, or None when it has none."""

    # Optional: the capability Protocols below, checked with ``isinstance``
    # (docs/plugins/hooks.md): a driver has one when it has all of its methods.


@runtime_checkable
class SplitPrompt(Protocol):
    """Paste and Enter as two calls, each after its own intent (else ``send_prompt``)."""

    def paste_prompt(self, pane: PaneRef, text: str) -> None: ...
    def submit_prompt(self, pane: PaneRef) -> None: ...


@runtime_checkable
class Parking(Protocol):
    """Park (``dest`` :data:`PARKING`) and un-park (a workspace id) in one step,
    keeping process, label and marks; returns where the pane now is. An unmarked pane
    is not moved (``pane_not_found``). Without it a driver never parks."""

    def move(self, pane: PaneRef, dest: str) -> PaneRef: ...


@runtime_checkable
class PaneProcesses(Protocol):
    """The pane's own process, the root of the tree orcr ends with the agent (None:
    unknown). Without it orcr has only the snapshots' ``PaneInfo.pid``."""

    def pane_pid(self, pane: PaneRef) -> int | None: ...


@runtime_checkable
class ProgramProcess(Protocol):
    """The pid of the agent's program itself, no shell between (tmux runs the argv in
    its pane; None: unknown). Before a new TUI's first draw orcr watches that process's
    writes (``/proc/<pid>/io``) and reads its screen through the multiplexer when it
    wrote, not every 50-250 ms (agents/dialogs.py). Without it orcr reads at that pace."""

    def program_pid(self, pane: PaneRef) -> int | None: ...


@runtime_checkable
class NativeResume(Protocol):
    """A multiplexer that restores agents itself (herdr 0.9; agents/native.py):
    ``report_resume`` gives it the command resuming the agent (True: orcr's report now
    owns the pane's status; a refusal is a non-retryable DriverError);
    ``foreground_pids``: the pane's processes but its shell (None: cannot say yet)."""

    def reports_resume(self) -> bool: ...
    def report_resume(
        self,
        pane: PaneRef,
        agent: str,
        state: str,
        argv: list[str],
        env: dict[str, str],
        detected: str | None = None,
    ) -> bool: ...
    def foreground_pids(self, pane: PaneRef) -> list[int] | None: ...


@runtime_checkable
class PaneEvents(Protocol):
    """Pushed pane events, hints only (``{"event", "data"}``; ``pane_exited``: that pane's
    process exited by itself); ``on_start()`` once up. Without it orcr polls snapshots."""

    def events(
        self, stop: threading.Event | None = None, on_start: Callable[[], None] | None = None
    ) -> Iterator[dict]: ...


@runtime_checkable
class Discovery(Protocol):
    """The agents detected in the user's *other* sessions, by session name (None: did
    not answer; a session left out: gone). orcr only lists them."""

    def discover(self) -> dict[str, list[UnmanagedAgent] | None]: ...


@runtime_checkable
class Focus(Protocol):
    """Make the pane the current one, so ``orcr agent attach`` lands on it."""

    def focus(self, pane: PaneRef) -> None: ...


@runtime_checkable
class AttachCommand(Protocol):
    """The argv a user runs in a terminal to watch the pane (``orcr agent attach``)."""

    def attach_command(self, pane: PaneRef) -> list[str]: ...


@runtime_checkable
class Availability(Protocol):
    """A driver factory that says whether its multiplexer is installed (``[driver]
    name = "auto"``): ``(ok, why)``. Without it a driver counts as available."""

    def available(self, config: Any = None) -> tuple[bool, str]: ...
