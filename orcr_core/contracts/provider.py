"""The provider adapter contract: :class:`Provider`, its transcript reader and the data
that crosses it (imported from :mod:`orcr_core.contracts`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orcr_core.contracts.driver import SessionPointer


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
