"""The two plugin contracts: a multiplexer driver and a provider adapter.

Both are plain classes with documented methods (``typing.Protocol`` for type
checkers); plugins need not inherit from anything. Data crossing the contract
is carried by the small frozen dataclasses below, so the core never sees a
multiplexer's or a provider's private shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
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


class ProviderError(Exception):
    """A provider adapter refused (unsupported version, unreadable transcript)."""

    def __init__(self, message: str, code: str = "provider_error"):
        super().__init__(message)
        self.code = code


class ProviderFault(ProviderError):
    """A provider adapter broke its contract: a hook raised something other than
    :class:`ProviderError`/``OSError``, returned the wrong shape, or never answered.

    It costs the adapter's own agent (ended ``failed`` with this message, which
    names the provider and the hook), never the server or another agent.
    """

    def __init__(self, provider: str, hook: str, what: str):
        super().__init__(f"provider {provider!r} broke in {hook}: {what}", "provider_fault")
        self.provider = provider
        self.hook = hook


class AgentStatus(StrEnum):
    """An agent row's ``status`` (DESIGN.md §4), in the order of its life.

    A ``StrEnum``: each member *is* its string (``AgentStatus.IDLE == "idle"``,
    ``json.dumps`` writes ``"idle"``), so rows, events and the socket's JSON are
    the same whether a writer used the member or the word.
    """

    QUEUED = "queued"
    STARTING = "starting"
    WORKING = "working"
    IDLE = "idle"
    LOST = "lost"
    ENDED = "ended"


class ExitReason(StrEnum):
    """Why an ``ended`` agent ended (its row's ``exit_reason``). ``done``: an
    ``agent run --rm`` agent whose first turn ended (its answer stays readable);
    ``oom``: the kernel killed it at its memory ceiling."""

    CANCELED = "canceled"
    FAILED = "failed"
    KILLED = "killed"
    EXITED = "exited"
    TIMEOUT = "timeout"
    LOST = "lost"
    GC = "gc"
    DONE = "done"
    OOM = "oom"


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


@dataclass(frozen=True)
class LaunchSpec:
    """What a provider needs to build an agent's argv."""

    uuid: str
    path: str
    cwd: str
    data_dir: str  # the agent's own data dir (launch.json lives here)
    options: dict[str, Any] = field(default_factory=dict)  # [providers.<name>] config


@dataclass(frozen=True)
class Usage:
    """The tokens one turn spent, as its transcript reports them.

    ``input`` is the uncached input, ``cache_read``/``cache_write`` the input
    read from / written to the provider's prompt cache, ``output`` the output
    (reasoning included); ``model`` the model that answered (the last one when
    several did), or None.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    model: str | None = None

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            other.model or self.model,
        )


@dataclass(frozen=True)
class Turn:
    """One agent turn as read from a transcript.

    ``status`` is ``completed``, ``interrupted``, ``errored`` or ``open``;
    ``final_text`` is the final answer of a completed turn, else None;
    ``error`` is why an ``errored`` turn failed, when the transcript says;
    ``usage`` is what the turn spent, None when the provider reports no usage.
    """

    status: str
    final_text: str | None = None
    error: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class TurnState:
    """What a transcript says so far.

    ``state`` is ``working`` (a turn is open), ``idle`` (the last turn ended),
    ``blocked`` (a permission prompt is showing) or ``unknown`` (nothing yet).
    ``version`` is the provider version found in the transcript, or None.
    """

    state: str
    turns: tuple[Turn, ...] = ()
    version: str | None = None

    @property
    def final_text(self) -> str | None:
        for turn in reversed(self.turns):
            if turn.status != "open":
                return turn.final_text
        return None


@dataclass(frozen=True)
class ScreenState:
    """What a provider reads on its TUI's screen: before orcr types a first prompt,
    and on a working agent gone quiet (a question mid-turn: ``kind`` ``permission``).

    ``state`` is ``ready`` (the TUI waits at its input), ``dialog`` (it asks a
    question first: a folder-trust check, a first-run setup) or ``unknown``
    (nothing recognised yet: still drawing, or a screen the adapter does not
    know). For a dialog, ``kind`` is a short stable word (``trust``,
    ``api_key``, ``onboarding``), ``reason`` is one line for a person naming
    the question and how to answer it, ``answer_keys`` are the logical keys
    that answer it yes (for :meth:`Driver.send_keys`), and ``answer_option``
    is the ``[providers.<name>]`` option that lets orcr press them itself
    (``trust_cwd``); a dialog with no option always waits for a person.

    ``waiting`` (``kind`` ``usage_limit``) is a working TUI that waits out its plan's
    usage limit and goes on by itself (Claude Code 2.1.234+): never idle, hung or done;
    ``until`` is the reset it shows (Unix seconds), None when it shows none, and
    ``reason`` a short phrase (``usage limit until 19:00``).
    """

    state: str
    kind: str | None = None
    reason: str | None = None
    answer_keys: tuple[str, ...] = ()
    answer_option: str | None = None
    until: float | None = None


@dataclass(frozen=True)
class InputState:
    """What a provider reads on its TUI's screen after a prompt's Enter: whether the
    Enter landed (``input_state`` hook; orcr_core/agents/resubmit.py decides from it).

    ``composer`` is the text in the TUI's input (its lines joined by newlines, ``""``
    when empty or showing only a placeholder), None when the screen shows no input
    the adapter recognises. ``running`` is what shows a turn running (a spinner's
    "esc to interrupt"), None when nothing does. orcr presses Enter again only when
    the composer still holds the prompt, ``running`` is None and ``screen_state``
    shows no dialog.
    """

    composer: str | None
    running: str | None = None


@runtime_checkable
class TranscriptReader(Protocol):
    """An incremental reader over one transcript file.

    ``poll()`` reads what was appended since the last call (an unchanged file
    costs one ``stat``; a partial last line waits for the rest) and returns the
    whole :class:`TurnState` so far.
    """

    def poll(self) -> TurnState: ...


@runtime_checkable
class Provider(Protocol):
    """A provider adapter: how to launch an agent CLI and read its transcript."""

    name: str
    #: A PEP 440 specifier of the provider versions this adapter was checked
    #: against, e.g. ``">=2.1.38,<2.2"``; empty for "any".
    supported_versions: str
    #: False for providers with no transcript (turns follow the multiplexer).
    has_transcript: bool

    def launch_argv(self, spec: LaunchSpec) -> list[str]:
        """The argv that starts the agent TUI (executed without a shell)."""

    def launch_session(self, spec: LaunchSpec) -> SessionPointer | None:
        """A session pointer orcr chose up front (Claude's ``--session-id``), or None."""

    # Optional: ``launch_env(spec) -> dict[str, str | None]``: environment for the
    # agent's process; a None value removes an inherited variable (a Claude Code
    # started from inside another one must not see CLAUDECODE). Read with getattr.
    # Optional: ``screen_state(screen, spec) -> ScreenState``: what the TUI's
    # screen (``Driver.read``) shows before the first prompt. orcr types the
    # prompt only at ``ready``; at a ``dialog`` the agent waits in ``starting``
    # with the dialog's reason (or orcr answers it when the dialog's
    # ``answer_option`` is set). Without the hook orcr types once the screen
    # shows anything (docs/plugins/index.md). The same hook reads a working
    # agent's screen once its transcript goes quiet: a ``dialog`` there (a
    # permission prompt) shows the agent blocked mid-turn (agents/asking.py); a
    # ``waiting`` (``usage_limit``) a wait on the plan's usage limit (orcr_core/usage_limits).
    # Optional: ``usage_limit(error) -> ScreenState | None``: a turn's error that is
    # the CLI's usage limit (Codex ends the turn there): holds the provider's queue.
    # Optional: ``input_state(screen) -> InputState``: the composer's text and what
    # shows a turn running, read after a prompt's Enter; without it orcr never
    # presses Enter again (agents/resubmit.py).
    # Optional: ``cli: tuple[str, str]``: the command it runs by default and how to
    # install it (``("gemini", "npm install -g @google/gemini-cli")``): ``orcr
    # doctor`` finds that command (or ``[providers.NAME] argv``'s), asks its
    # ``--version`` and checks it against ``supported_versions``.
    # Optional: ``needs_argv: bool``: the provider runs an argv the user gives
    # (``command``); admission refuses a run with none given and none configured.

    def locate_transcript(self, pointer: SessionPointer, spec: LaunchSpec) -> str | None:
        """The transcript path for a session pointer, or None while it does not exist yet."""

    def open_reader(self, path: str) -> TranscriptReader:
        """An incremental reader for a transcript path."""

    def check_version(self, version: str | None, options: dict[str, Any]) -> str | None:
        """Refuse (raise :class:`ProviderError`) a version outside the pinned range.

        With ``options["allow_unpinned"]`` true, return a warning string instead.
        Returns None when the version is covered.
        """
